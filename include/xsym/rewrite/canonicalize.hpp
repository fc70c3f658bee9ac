#ifndef XSYM_REWRITE_CANONICALIZE_HPP
#define XSYM_REWRITE_CANONICALIZE_HPP

// canonicalize: algebraic identities (x*1, x+0, x-0, x/1, --x, -(-a*b), pow(x, 2), pow(x, 1)) and
// constant_folding: elementwise ops and dimshuffles of constants computed once, at build.
#include <functional>
#include <optional>

#include "stabilize.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

// The shape of an elementwise result is the shape of any input with the same pattern: ask
// the input, so the shape does not wait for (or tie a fused group to) the result.
inline var_ptr canonical_shape(const var_ptr& v) {
  var_ptr x = v->inputs[0];
  bool moved = false;
  while (x->kind == var_kind::apply && (x->fn->kind == op_kind::elemwise || x->fn->kind == op_kind::composite)) {
    var_ptr next;
    for (const auto& in : x->inputs)
      if (in->rank == x->rank && in->broadcastable == x->broadcastable) {
        next = in;
        break;
      }
    if (!next) break;
    x = next;
    moved = true;
  }
  if (!moved) return nullptr;
  return shape_prod(x, v->fn->axes, v->type);
}

inline var_ptr canonical_node(const var_ptr& v) {
  if (v->kind == var_kind::apply && v->fn->kind == op_kind::shape_prod) return canonical_shape(v);
  if (v->kind != var_kind::apply || v->fn->kind != op_kind::elemwise) return nullptr;
  const auto& in = v->inputs;
  auto same_kind = [&](const var_ptr& x) {
    return x->type == v->type && x->rank == v->rank && x->broadcastable == v->broadcastable;
  };
  switch (v->fn->scalar) {
    case scalar_op::neg:
      if (is_op(in[0], scalar_op::neg)) return in[0]->inputs[0];
      if (is_op(in[0], scalar_op::mul) && is_op(in[0]->inputs[0], scalar_op::neg))
        return elemwise(scalar_op::mul, {in[0]->inputs[0]->inputs[0], in[0]->inputs[1]});
      if (is_op(in[0], scalar_op::mul) && is_op(in[0]->inputs[1], scalar_op::neg))
        return elemwise(scalar_op::mul, {in[0]->inputs[0], in[0]->inputs[1]->inputs[0]});
      break;
    case scalar_op::mul:
      if (is_single_value(in[1], 1) && same_kind(in[0])) return in[0];
      if (is_single_value(in[0], 1) && same_kind(in[1])) return in[1];
      if (is_op(in[0], scalar_op::neg) && is_op(in[1], scalar_op::neg))
        return elemwise(scalar_op::mul, {in[0]->inputs[0], in[1]->inputs[0]});
      break;
    case scalar_op::add:
      if (is_single_value(in[1], 0) && same_kind(in[0])) return in[0];
      if (is_single_value(in[0], 0) && same_kind(in[1])) return in[1];
      break;
    case scalar_op::sub:
      if (is_single_value(in[1], 0) && same_kind(in[0])) return in[0];
      if (is_op(in[1], scalar_op::neg)) return elemwise(scalar_op::add, {in[0], in[1]->inputs[0]});
      break;
    case scalar_op::true_div:
      if (is_single_value(in[1], 1) && same_kind(in[0])) return in[0];
      break;
    case scalar_op::pow:
      // x * x is pow(x, 2) correctly rounded, special values too, and far cheaper than pow
      if (is_single_value(in[1], 2) && same_kind(in[0])) return elemwise(scalar_op::sqr, {in[0]});
      if (is_single_value(in[1], 1) && same_kind(in[0])) return in[0];
      break;
    default: break;
  }
  return nullptr;
}

inline std::vector<var_ptr> canonicalize_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    // Repeat: one identity can expose another (--(-x)).
    for (int i = 0; i < 8; ++i) {
      var_ptr r = canonical_node(nv);
      if (!r || r->type != nv->type || r->rank != nv->rank) break;
      ++rec.applied;
      const std::string to = r->kind == var_kind::apply      ? r->fn->name()
                             : r->kind == var_kind::constant ? std::string("a constant")
                                                             : "'" + r->name + "'";
      rec.notes.push_back(nv->fn->name() + " simplified to " + to);
      nv = r;
    }
    return nv;
  });
}

/// Computes an Apply node whose inputs are all constants, or gives nullopt to leave it.
using constant_evaluator = std::function<std::optional<ndarray>(const variable& apply)>;

// The evaluator comes from compile (it runs the CPU kernels): rewrites include no backend.
inline std::vector<var_ptr> constant_folding_pass(const std::vector<var_ptr>& roots, rewrite_record& rec,
                                                  const constant_evaluator& evaluate) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    if (nv->kind != var_kind::apply || nv->inputs.empty()) return nv;
    for (const auto& in : nv->inputs)
      if (in->kind != var_kind::constant) return nv;
    std::optional<ndarray> value = evaluate(*nv);
    if (!value) return nv;
    ++rec.applied;
    return make_constant(std::move(*value));
  });
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
