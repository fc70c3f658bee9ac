// print_diff_summary and scripts/xsym-prof diff on the same pair of profiles (one graph fused
// and unfused, two function names) list the same ops and Apply nodes (a Composite against the
// nodes it absorbed), in the same order, with the same times.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#if defined(XSYM_TEST_PYTHON) && defined(XSYM_TEST_PROF_TOOL)
namespace {
struct op_line {
  std::string name;
  double a = 0, b = 0;  // 0: "-"
};

// The rows of a report's section (Ops, Apply): "  <A> <B> <B/A> <B - A> <name>".
std::vector<op_line> section(const std::string& text, const std::string& title) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line != title) {
  }
  std::getline(in, line);  // ---
  std::getline(in, line);  // header
  std::vector<op_line> rows;
  while (std::getline(in, line) && !line.empty()) {
    std::istringstream cells(line);
    std::string a, b, ratio, change, name;
    cells >> a >> b >> ratio >> change;
    std::getline(cells, name);
    op_line r;
    r.name = name.substr(name.find_first_not_of(' '));
    r.a = a == "-" ? 0 : std::stod(a);
    r.b = b == "-" ? 0 : std::stod(b);
    rows.push_back(r);
  }
  return rows;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  return out;
}
}  // namespace

TEST_CASE("print_diff_summary and xsym-prof diff agree on the same pair", "[profile][diff]") {
  xsym::config.reset();
  auto fused_stats = std::make_shared<xsym::profile_stats>("fused", false);
  auto unfused_stats = std::make_shared<xsym::profile_stats>("unfused", false);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto fused = xsym::function("fast", xsym::inputs(x, y, z), exp(x + y) * z + 2.0, xsym::profile(fused_stats));
  auto unfused = xsym::function("slow", xsym::inputs(x, y, z), exp(x + y) * z + 2.0, xsym::profile(unfused_stats),
                                xsym::optimizer_excluding("fusion:inplace"));
  xt::xtensor<double, 1> a = xt::linspace<double>(0, 1, 20000), b = a * 2.0, c = a + 1.0;
  for (int i = 0; i < 5; ++i) {
    fused(a, b, c);
    unfused(a, b, c);
  }
  std::ostringstream in_process;
  fused_stats->print_diff_summary(in_process, *unfused_stats);

  const std::string dir = "/tmp/xsym-prof-diff-" + std::to_string(::getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  {
    std::ofstream fa(dir + "/a.json"), fb(dir + "/b.json");
    xsym::write_json(*fused_stats, fa);
    xsym::write_json(*unfused_stats, fb);
  }
  const std::string command_out =
      run(std::string(XSYM_TEST_PYTHON) + " " + XSYM_TEST_PROF_TOOL + " diff " + dir + "/a.json " + dir + "/b.json");
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);

  INFO(in_process.str() << "\n----\n" << command_out);
  // Ops: the Composite on one side; add (twice), exp, mul on the other. Apply: the Composite
  // against B's four nodes.
  for (const auto& [title, rows] : {std::pair{"Ops", 4u}, std::pair{"Apply", 1u}}) {
    const auto mine = section(in_process.str(), title), theirs = section(command_out, title);
    REQUIRE(mine.size() == theirs.size());
    REQUIRE(mine.size() == rows);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      CHECK(mine[i].name == theirs[i].name);
      CHECK(mine[i].a == Approx(theirs[i].a).epsilon(2e-3));
      CHECK(mine[i].b == Approx(theirs[i].b).epsilon(2e-3));
    }
    // Sorted by the absolute change, largest first.
    for (std::size_t i = 1; i < mine.size(); ++i)
      CHECK(std::abs(mine[i - 1].b - mine[i - 1].a) >= std::abs(mine[i].b - mine[i].a) * (1 - 2e-3));
  }
  CHECK_THAT(command_out, Catch::Contains("~  B: Elemwise{add} x2, Elemwise{exp}, Elemwise{mul}"));
}
#endif
