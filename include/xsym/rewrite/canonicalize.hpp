#ifndef XSYM_REWRITE_CANONICALIZE_HPP
#define XSYM_REWRITE_CANONICALIZE_HPP

// canonicalize: algebraic identities (x*1, x+0, x-0, x/1, --x, -(-a*b), pow(x, 2), pow(x, 1)) and
// constant_folding: elementwise ops and dimshuffles of constants computed once, at build.
#include "../backend/cpu/elemwise.hpp"
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
      if (is_constant_value(in[1], 1) && same_kind(in[0])) return in[0];
      if (is_constant_value(in[0], 1) && same_kind(in[1])) return in[1];
      if (is_op(in[0], scalar_op::neg) && is_op(in[1], scalar_op::neg))
        return elemwise(scalar_op::mul, {in[0]->inputs[0], in[1]->inputs[0]});
      break;
    case scalar_op::add:
      if (is_constant_value(in[1], 0) && same_kind(in[0])) return in[0];
      if (is_constant_value(in[0], 0) && same_kind(in[1])) return in[1];
      break;
    case scalar_op::sub:
      if (is_constant_value(in[1], 0) && same_kind(in[0])) return in[0];
      if (is_op(in[1], scalar_op::neg)) return elemwise(scalar_op::add, {in[0], in[1]->inputs[0]});
      break;
    case scalar_op::true_div:
      if (is_constant_value(in[1], 1) && same_kind(in[0])) return in[0];
      break;
    case scalar_op::pow:
      // x * x is pow(x, 2) correctly rounded, special values too, and far cheaper than pow
      if (is_constant_value(in[1], 2) && same_kind(in[0])) return elemwise(scalar_op::sqr, {in[0]});
      if (is_constant_value(in[1], 1) && same_kind(in[0])) return in[0];
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

inline std::vector<var_ptr> constant_folding_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    if (nv->kind != var_kind::apply || nv->inputs.empty()) return nv;
    for (const auto& in : nv->inputs)
      if (in->kind != var_kind::constant) return nv;
    if (nv->fn->kind == op_kind::elemwise) {
      ++rec.applied;
      return make_constant(evaluate_constant_elemwise(*nv));
    }
    if (nv->fn->kind == op_kind::dimshuffle) {
      const ndarray& c = nv->inputs[0]->constant;
      shape_t s;
      s.rank = static_cast<int>(nv->fn->pattern.size());
      std::array<std::int64_t, max_rank> st{};
      for (int i = 0; i < s.rank; ++i) {
        const int p = nv->fn->pattern[static_cast<std::size_t>(i)];
        s[i] = p < 0 ? 1 : c.shape(p);
        st[static_cast<std::size_t>(i)] = p < 0 ? 0 : c.stride(p);
      }
      ++rec.applied;
      return make_constant(cast_array(c.view(s, st), c.type()));
    }
    return nv;
  });
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
