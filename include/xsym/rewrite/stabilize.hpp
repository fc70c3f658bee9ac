#ifndef XSYM_REWRITE_STABILIZE_HPP
#define XSYM_REWRITE_STABILIZE_HPP

// Numerically stable forms, applied bottom-up:
//   1 / (1 + exp(-z))      -> sigmoid(z)        (also exp(-a - b - c) -> z = a + b + c)
//   log(sigmoid(z))        -> -softplus(-z)
//   log(1 - sigmoid(z))    -> -softplus(z)
//   log(1 + x)             -> log1p(x)
// so the seeds' cross-entropy stays finite where the literal formula gives log(0).
#include <unordered_set>

#include "rewrites.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

inline bool is_constant_value(const var_ptr& v, double value) {
  if (v->kind != var_kind::constant || v->constant.size() == 0) return false;
  for (std::int64_t i = 0; i < v->constant.size(); ++i)
    if (v->constant.flat_as_double(i) != value) return false;
  return true;
}

inline bool is_op(const var_ptr& v, scalar_op s) {
  return v->kind == var_kind::apply && v->fn->kind == op_kind::elemwise && v->fn->scalar == s;
}

// The z of `-z` written as neg(z), or as -a - b - ... == -(a + b + ...); null otherwise.
inline var_ptr negated(const var_ptr& v) {
  if (is_op(v, scalar_op::neg)) return v->inputs[0];
  if (is_op(v, scalar_op::sub))
    if (var_ptr a = negated(v->inputs[0])) return elemwise(scalar_op::add, {a, v->inputs[1]});
  return nullptr;
}

// A constant of one element equal to value. A rewrite that drops a constant keeps the result's
// shape only where the constant broadcasts: an array of ones larger than x repeats x's values
// (sum(log(ones + x)) is not sum(log1p(x))), and x's own extents may broadcast at run time.
inline bool is_single_value(const var_ptr& v, double value) {
  return is_constant_value(v, value) && v->constant.size() == 1;
}
inline bool is_one(const var_ptr& v) { return is_single_value(v, 1); }

// The x of 1 + x or x + 1; null otherwise.
inline var_ptr one_plus(const var_ptr& v) {
  if (!is_op(v, scalar_op::add)) return nullptr;
  if (is_one(v->inputs[0])) return v->inputs[1];
  if (is_one(v->inputs[1])) return v->inputs[0];
  return nullptr;
}

inline var_ptr stabilize_node(const var_ptr& v) {
  if (v->kind != var_kind::apply || v->fn->kind != op_kind::elemwise) return nullptr;
  const auto& in = v->inputs;
  if (is_op(v, scalar_op::true_div) && is_one(in[0])) {
    if (var_ptr e = one_plus(in[1]); e && is_op(e, scalar_op::exp))
      if (var_ptr z = negated(e->inputs[0]); z && z->rank <= v->rank) {
        var_ptr s = elemwise(scalar_op::sigmoid, {z});
        if (s->type == v->type && s->rank == v->rank) return s;
      }
  }
  if (is_op(v, scalar_op::log)) {
    const var_ptr& x = in[0];
    if (is_op(x, scalar_op::sigmoid))
      return elemwise(scalar_op::neg, {elemwise(scalar_op::softplus, {elemwise(scalar_op::neg, {x->inputs[0]})})});
    if (is_op(x, scalar_op::sub) && is_one(x->inputs[0]) && is_op(x->inputs[1], scalar_op::sigmoid)) {
      var_ptr r = elemwise(scalar_op::neg, {elemwise(scalar_op::softplus, {x->inputs[1]->inputs[0]})});
      if (r->rank == v->rank) return r;
    }
    if (var_ptr y = one_plus(x); y && y->type == v->type && y->rank == v->rank) return elemwise(scalar_op::log1p, {y});
  }
  return nullptr;
}

// Whether replacing v by r drops a node of `keep`: one that v reaches and r does not (the
// sigmoid of log(sigmoid(z)), the 1 + y of log(1 + y)).
inline bool drops_kept(const var_ptr& v, const var_ptr& r, const std::vector<var_ptr>& keep) {
  if (keep.empty()) return false;
  std::unordered_set<const variable*> reached;
  std::vector<const variable*> stack{r.get()};
  while (!stack.empty()) {
    const variable* n = stack.back();
    stack.pop_back();
    if (reached.insert(n).second)
      for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  std::unordered_set<const variable*> seen;
  for (const auto& in : v->inputs) stack.push_back(in.get());
  while (!stack.empty()) {
    const variable* n = stack.back();
    stack.pop_back();
    if (reached.count(n) || !seen.insert(n).second) continue;
    if (std::any_of(keep.begin(), keep.end(), [&](const var_ptr& k) { return k.get() == n; })) return true;
    for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  return false;
}

/// stabilize: rewrites the forms above wherever they appear; the nodes in `keep` (grad's wrt)
/// stay themselves, with their inputs, and in the graph: a form that would absorb one stays.
inline std::vector<var_ptr> stabilize_pass(const std::vector<var_ptr>& roots, rewrite_record& rec,
                                           const std::vector<var_ptr>& keep) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    if (std::find(keep.begin(), keep.end(), v) != keep.end()) return v;
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    if (var_ptr r = stabilize_node(nv); r && r->type == nv->type && r->rank == nv->rank && !drops_kept(nv, r, keep)) {
      ++rec.applied;
      rec.notes.push_back(nv->fn->name() + " -> " + r->fn->name());
      return r;
    }
    return nv;
  });
}
inline std::vector<var_ptr> stabilize_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return stabilize_pass(roots, rec, {});
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
