// The layering test: every #include under include/xsym runs down the order that
// docs/design.md states between its "layers:begin" and "layers:end" markers (one folder per
// line, lowest first). A file may include files of its own folder and of folders listed
// before it; anything else fails, naming the file, the line and the two layers.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {
// The layer of a path relative to include/xsym: its folder, with backend/<name> as one.
std::string layer_of(const fs::path& rel) {
  auto it = rel.begin();
  if (rel.has_parent_path() == false) return "(top)";
  std::string first = it->string();
  if (first == "backend" && std::distance(rel.begin(), rel.end()) > 2) return first + "/" + (++it)->string();
  return first;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check_layers <repository root>\n";
    return 2;
  }
  const fs::path root = argv[1];
  const fs::path design = root / "docs" / "design.md";
  std::ifstream doc(design);
  if (!doc) {
    std::cerr << "check_layers: cannot read " << design << "\n";
    return 2;
  }
  std::map<std::string, int> rank;
  bool inside = false;
  std::string line;
  while (std::getline(doc, line)) {
    if (line.find("layers:begin") != std::string::npos) {
      inside = true;
      continue;
    }
    if (line.find("layers:end") != std::string::npos) break;
    if (!inside || line.empty() || line.rfind("```", 0) == 0) continue;
    const std::string name = line.substr(0, line.find_first_of(" \t"));
    rank.emplace(name, static_cast<int>(rank.size()));
  }
  if (rank.size() < 2) {
    std::cerr << "check_layers: " << design << " states no layer order (between layers:begin and layers:end)\n";
    return 2;
  }
  rank.emplace("(top)", static_cast<int>(rank.size()));  // xsym.hpp, gpu.hpp, benchmark.hpp, version.hpp

  const fs::path include = root / "include" / "xsym";
  const std::regex inc(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  int files = 0, includes = 0, errors = 0;
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator(include))
    if (e.is_regular_file()) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    const fs::path rel = fs::relative(p, include);
    const std::string from = layer_of(rel);
    if (!rank.count(from)) {
      std::cerr << "include/xsym/" << rel.generic_string() << ": its folder '" << from
                << "' is not in the layer order of docs/design.md\n";
      ++errors;
      continue;
    }
    ++files;
    std::ifstream in(p);
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      std::smatch m;
      if (!std::regex_search(line, m, inc)) continue;
      fs::path target;
      if (m[1] == "\"") {
        target = fs::weakly_canonical(p.parent_path() / m[2].str());
      } else if (m[2].str().rfind("xsym/", 0) == 0) {
        target = fs::weakly_canonical(include.parent_path() / m[2].str());
      } else {
        continue;  // the standard library and other projects
      }
      const fs::path target_rel = fs::relative(target, fs::weakly_canonical(include));
      if (target_rel.empty() || *target_rel.begin() == "..") continue;
      ++includes;
      const std::string to = layer_of(target_rel);
      if (!rank.count(to) || rank.at(to) > rank.at(from) || (to != from && rank.at(to) == rank.at(from))) {
        std::cerr << "include/xsym/" << rel.generic_string() << ":" << n << ": includes " << m[2].str() << " ("
                  << to << "), a layer above " << from << " (docs/design.md states the order)\n";
        ++errors;
      }
    }
  }
  std::cout << "check_layers: " << files << " headers, " << includes << " includes of xsym's own, " << rank.size() - 1
            << " layers; " << errors << " upward\n";
  return errors == 0 ? 0 : 1;
}
