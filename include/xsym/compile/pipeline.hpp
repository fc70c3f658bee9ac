#ifndef XSYM_COMPILE_PIPELINE_HPP
#define XSYM_COMPILE_PIPELINE_HPP

// The rewrite pipeline: xsym's own rewrites as rows (rewrite/registry.hpp), the program's
// registered ones beside them, and the runs of both in position order.
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../backend/cpu/elemwise.hpp"
#include "../config/cold.hpp"
#include "../exec/shapes.hpp"
#include "../graph/fgraph.hpp"
#include "../profile/clock.hpp"
#include "../rewrite/canonicalize.hpp"
#include "../rewrite/gpu_placement.hpp"
#include "../rewrite/inplace.hpp"
#include "../rewrite/multi_fusion.hpp"
#include "../rewrite/one_pass.hpp"
#include "../rewrite/reduce_fusion.hpp"
#include "../rewrite/subtensor_fusion.hpp"
#include "../rewrite/registry.hpp"
#include "../rewrite/rewrites.hpp"
#include "../rewrite/stabilize.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym {
namespace detail {

inline constexpr const char* gpu_placement_rewrite = "gpu_placement";
inline constexpr const char* one_pass_rewrite = "one_pass_gemv";  // CPU only: not with device=cuda
inline constexpr const char* set_fusion_rewrite = "set_subtensor_fusion";  // IncSubtensor runs on the host
inline constexpr const char* reduce_fusion_rewrite = "careduce_fusion";     // CPU only, as the two above

inline std::vector<std::string> split_colon(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ':'))
    if (!cur.empty()) out.push_back(cur);
  return out;
}


// Constant folding's evaluator: an elementwise op runs on the CPU executor (the same kernels
// a call runs), a dimshuffle of a constant is copied into its own array.
inline ndarray evaluate_constant_elemwise(const variable& v) {
  auto p = std::make_shared<program>();
  p->n_inputs = static_cast<int>(v.inputs.size());
  std::vector<const ndarray*> ins;
  std::vector<std::uint8_t> bc;
  for (const auto& in : v.inputs) {
    p->reg_types.push_back(in->type);
    ins.push_back(&in->constant);
    bc.push_back(in->broadcastable);
  }
  instruction i{};
  i.op = v.fn->scalar;
  i.out_type = v.type;
  i.in_type = i.op == scalar_op::switch_ ? p->reg_types[1] : p->reg_types[0];
  for (int j = 0; j < p->n_inputs; ++j) i.args[j] = j;
  i.dst = p->n_inputs;
  p->reg_types.push_back(v.type);
  p->code.push_back(i);
  p->outputs = {i.dst};
  const auto cp = cpu::compile_program<false>(p);
  const shape_t shape = cpu::broadcast_shape(ins.data(), bc.data(), static_cast<int>(ins.size()));
  ndarray out = ndarray::empty(v.type, shape);
  ndarray* outs[1] = {&out};
  cpu::run_program(cp, ins.data(), outs);
  return out;
}

inline std::optional<ndarray> evaluate_constant(const variable& v) {
  if (v.fn->kind == op_kind::elemwise) return evaluate_constant_elemwise(v);
  if (v.fn->kind == op_kind::dimshuffle) {
    const ndarray& c = v.inputs[0]->constant;
    return cast_array(dimshuffle_view(c, v.fn->pattern), c.type());
  }
  return std::nullopt;
}

inline std::vector<var_ptr> constant_folding_on_cpu(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return constant_folding_pass(roots, rec, evaluate_constant);
}

// xsym's rewrites, in the order they run. Those that can change an IEEE result carry
// fast_math (docs/semantics.md); gpu_placement runs exactly when device=cuda. Plain data,
// made into rows by one loop: a program that builds functions compiles little for it.
struct builtin_rewrite {
  const char* name;
  const char* tags;  // colon-separated
  double position;
  std::vector<var_ptr> (*on_vars)(const std::vector<var_ptr>&, rewrite_record&);
  void (*on_graph)(function_graph&, rewrite_record&);
};
inline constexpr builtin_rewrite builtin_rewrite_table[] = {
    {"stabilize", "stabilize:fast_run:fast_compile", 1, stabilize_pass, nullptr},
    {"canonicalize", "canonicalize:fast_run:fast_compile", 2, canonicalize_pass, nullptr},
    {"constant_folding", "canonicalize:constant_folding:fast_run:fast_compile", 3, constant_folding_on_cpu, nullptr},
    {"merge", "merge:fast_run:fast_compile", 4, merge_pass, nullptr},
    {"blas", "blas:fast_run", 10, blas_pass, nullptr},
    {"gemv_accumulate", "blas:fast_run", 11, gemv_accumulate_pass, nullptr},
    {"gemv_scale_fold", "blas:fast_math:fast_run", 12, gemv_scale_fold_pass, nullptr},
    {"elemwise_fusion", "fusion:fast_run", 49, fusion_pass, nullptr},
    // Tagged elemwise_fusion too: it merges the same elementwise nodes, so excluding
    // elemwise_fusion by name leaves them unfused.
    {"multi_output_fusion", "fusion:elemwise_fusion:fast_run", 60, nullptr, multi_output_fusion_pass},
    {set_fusion_rewrite, "fusion:fast_run", 62, nullptr, set_subtensor_fusion_pass},
    {one_pass_rewrite, "fusion:fast_run", 65, nullptr, one_pass_gemv_pass},
    {reduce_fusion_rewrite, "fusion:fast_run", 66, nullptr, careduce_fusion_pass},
    {"inplace_elemwise", "inplace:fast_run", 70, nullptr, inplace_pass},
    {gpu_placement_rewrite, "gpu", 90, nullptr, gpu_placement_pass},
};

inline const std::vector<std::shared_ptr<const rewrite_row>>& builtin_rewrites() {
  static const std::vector<std::shared_ptr<const rewrite_row>> rows = [] {
    std::vector<std::shared_ptr<const rewrite_row>> r;
    for (const builtin_rewrite& b : builtin_rewrite_table) {
      auto row = std::make_shared<rewrite_row>();
      row->name = b.name;
      row->tags = split_colon(b.tags);
      row->position = b.position;
      if (b.on_vars) row->on_vars = b.on_vars;
      if (b.on_graph) row->on_graph = b.on_graph;
      r.push_back(std::move(row));
    }
    return r;
  }();
  return rows;
}

}  // namespace detail

/// @brief Every rewrite, xsym's and the program's, in the order the pipeline runs them
/// (by position; at equal positions xsym's first, then in registration order).
inline std::vector<std::shared_ptr<const rewrite_row>> rewrite_rows() {
  std::vector<std::shared_ptr<const rewrite_row>> rows = detail::builtin_rewrites();  // in position order
  auto& t = detail::user_rewrites();
  std::lock_guard lock(t.mutex);
  for (const auto& r : t.rows) {  // each after every row of its position or below
    auto at = rows.begin();
    while (at != rows.end() && (*at)->position <= r->position) ++at;
    rows.insert(at, r);
  }
  return rows;
}

/// @brief Adds a rewrite to every function built while the returned registration lives. Its
/// tags place it in the modes (fast_run, fast_compile) and let the optimizer flags choose it,
/// as xsym's own. Throws std::invalid_argument when the name is taken or the position does
/// not suit what it rewrites.
[[nodiscard]] inline rewrite_registration register_rewrite(rewrite_row row) {
  detail::check_rewrite_row(row);
  for (const auto& r : detail::builtin_rewrites())
    if (r->name == row.name)
      throw std::invalid_argument("xsym::register_rewrite: '" + row.name + "' is the name of one of xsym's rewrites");
  auto p = std::make_shared<const rewrite_row>(std::move(row));
  auto& t = detail::user_rewrites();
  std::lock_guard lock(t.mutex);
  for (const auto& r : t.rows)
    if (r->name == p->name)
      throw std::invalid_argument("xsym::register_rewrite: a rewrite named '" + p->name + "' is already registered");
  t.rows.push_back(p);
  return rewrite_registration(p);
}

namespace detail {

// Runs the chosen rows of one kind (symbolic graph or built graph), recording each for the
// optimizer profile.
inline std::vector<var_ptr> run_vars_rewrites(const std::vector<std::shared_ptr<const rewrite_row>>& rows,
                                              const std::set<std::string>& chosen, std::vector<var_ptr> roots,
                                              std::vector<rewrite_record>& records) {
  for (const auto& r : rows) {
    if (!r->on_vars || !chosen.count(r->name)) continue;
    rewrite_record rec;
    rec.name = r->name;
    rec.nodes_before = count_applies(roots);
    const double s0 = wall_seconds();
    roots = r->on_vars(roots, rec);
    rec.seconds = wall_seconds() - s0;
    rec.nodes_after = count_applies(roots);
    records.push_back(std::move(rec));
  }
  return roots;
}

inline void run_graph_rewrites(const std::vector<std::shared_ptr<const rewrite_row>>& rows,
                               const std::set<std::string>& chosen, function_graph& g,
                               std::vector<rewrite_record>& records) {
  for (const auto& r : rows) {
    if (!r->on_graph || !chosen.count(r->name)) continue;
    rewrite_record rec;
    rec.name = r->name;
    rec.nodes_before = static_cast<int>(g.nodes.size());
    const double s0 = wall_seconds();
    r->on_graph(g, rec);
    rec.seconds = wall_seconds() - s0;
    rec.nodes_after = static_cast<int>(g.nodes.size());
    records.push_back(std::move(rec));
  }
}

}  // namespace detail
}  // namespace xsym
XSYM_COLD_END

#endif
