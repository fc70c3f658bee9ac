#ifndef XSYM_TESTS_EXPR_TYPED_UTIL_HPP
#define XSYM_TESTS_EXPR_TYPED_UTIL_HPP

// What the typed-kernel tests read from a profile.
#include <xsym/xsym.hpp>

#include <string>
#include <vector>

namespace xsym_test {

/// The profile's <type> of each node of the function named `name`, in toposort order.
template <class F>
std::vector<std::string> node_types(F& f, const std::string& name) {
  std::vector<std::string> t;
  for (const auto& p : f.profile().functions())
    if (p->facts->name == name)
      for (std::size_t i = 0; i < p->facts->graph->nodes.size(); ++i) t.push_back(p->facts->node_implementation(i));
  return t;
}

}  // namespace xsym_test

#endif
