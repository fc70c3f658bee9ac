#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <xsym/xsym.hpp>

int main() {
  // A rewrite of the symbolic graph, in fast_run, just before elemwise_fusion (49).
  int seen = 0;
  auto reg = xsym::register_rewrite(
      {"count_roots", {"fast_run"}, 48,
       [&](const std::vector<xsym::var_ptr>& roots, xsym::rewrite_record& rec) {
         ++seen;
         rec.notes.push_back("saw " + std::to_string(roots.size()) + " root(s)");
         return roots;  // unchanged; a real rewrite returns rebuilt roots
       },
       {}});
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), (x + 1) * 2);
  for (const auto& row : xsym::rewrite_rows()) std::cout << row->position << " " << row->name << "\n";
  if (seen != 1) throw std::runtime_error("count_roots did not run once");
}
