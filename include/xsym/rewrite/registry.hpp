#ifndef XSYM_REWRITE_REGISTRY_HPP
#define XSYM_REWRITE_REGISTRY_HPP

// Rewrites as rows: a name, tags, a position and the function. The pipeline runs the rows in
// position order; optimizer_including/excluding/requiring and the optimizer profile read the
// same rows. xsym's own rows, rewrite_rows() and register_rewrite are in compile/pipeline.hpp,
// where every pass and the constant evaluator are visible.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../expr/variable.hpp"
#include "../graph/fgraph.hpp"
#include "rewrites.hpp"

namespace xsym {

/// A rewrite of the symbolic graph (the outputs and update values as var_ptrs, in order):
/// returns the new roots, counting in rec.applied the changes it made.
using vars_rewrite = std::function<std::vector<var_ptr>(const std::vector<var_ptr>& roots, rewrite_record& rec)>;
/// A rewrite of the built graph of Apply nodes, in place.
using graph_rewrite = std::function<void(function_graph& g, rewrite_record& rec)>;

/// Rewrites of the symbolic graph take positions below this one, rewrites of the built graph
/// positions above it: the function's graph is built here.
inline constexpr double graph_build_position = 50;

/// @brief One rewrite: `on_vars` or `on_graph` is set, as `position` says.
struct rewrite_row {
  std::string name;
  std::vector<std::string> tags;  // e.g. fast_run: the modes and flags choose rewrites by tag
  double position = 0;
  vars_rewrite on_vars;
  graph_rewrite on_graph;
};

namespace detail {
struct rewrite_table {
  std::mutex mutex;
  std::vector<std::shared_ptr<const rewrite_row>> rows;  // in registration order
};
inline rewrite_table& user_rewrites() {
  static rewrite_table t;
  return t;
}
inline void check_rewrite_row(const rewrite_row& r) {
  const std::string what = "xsym::register_rewrite: rewrite '" + r.name + "' ";
  if (r.name.empty()) throw std::invalid_argument("xsym::register_rewrite: a rewrite needs a name");
  if (static_cast<bool>(r.on_vars) == static_cast<bool>(r.on_graph))
    throw std::invalid_argument(what + "needs exactly one of on_vars and on_graph");
  if (r.on_vars && !(r.position < graph_build_position))
    throw std::invalid_argument(what + "rewrites the symbolic graph, so its position must be below " +
                                std::to_string(graph_build_position) + " (where the graph is built); it is " +
                                std::to_string(r.position));
  if (r.on_graph && !(r.position > graph_build_position))
    throw std::invalid_argument(what + "rewrites the built graph, so its position must be above " +
                                std::to_string(graph_build_position) + "; it is " + std::to_string(r.position));
}
}  // namespace detail

/// @brief Keeps a registered rewrite in the pipeline; destroying it removes the rewrite.
class rewrite_registration {
 public:
  rewrite_registration() = default;
  explicit rewrite_registration(std::shared_ptr<const rewrite_row> row) : m_row(std::move(row)) {}
  rewrite_registration(rewrite_registration&& o) noexcept : m_row(std::move(o.m_row)) {}
  rewrite_registration& operator=(rewrite_registration&& o) noexcept {
    if (this != &o) {
      reset();
      m_row = std::move(o.m_row);
    }
    return *this;
  }
  rewrite_registration(const rewrite_registration&) = delete;
  rewrite_registration& operator=(const rewrite_registration&) = delete;
  ~rewrite_registration() { reset(); }
  /// @brief Removes the rewrite now; functions built before keep what it did.
  void reset() {
    if (!m_row) return;
    auto& t = detail::user_rewrites();
    std::lock_guard lock(t.mutex);
    t.rows.erase(std::remove(t.rows.begin(), t.rows.end(), m_row), t.rows.end());
    m_row.reset();
  }

 private:
  std::shared_ptr<const rewrite_row> m_row;
};

}  // namespace xsym

#endif
