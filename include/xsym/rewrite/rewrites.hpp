#ifndef XSYM_REWRITE_REWRITES_HPP
#define XSYM_REWRITE_REWRITES_HPP

// Graph rewrites run when a function is built. compile/pipeline.hpp lists them as rows (name,
// tags, position), so flags such as optimizer_excluding=fusion:inplace choose among them.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "../config/limits.hpp"
#include "../expr/variable.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym {

/// @brief What one rewrite did while a function was built (the optimizer profile prints it).
struct rewrite_record {
  std::string name;
  double seconds = 0;
  int applied = 0;          // times it changed the graph
  int nodes_before = 0;
  int nodes_after = 0;
  std::vector<std::string> notes;  // e.g. why a candidate was not fused
};

namespace detail {

using rebuild_map = std::unordered_map<std::uint64_t, var_ptr>;

// Every apply variable reachable from roots, inputs before users.
// One step of a Composite's text, as Theano prints it: infix ops in parentheses, with
// (a + b) + c as (a + b + c); neg as (-a); Cast{type}(a); comparisons upper-cased; Switch.
// first_op is the op whose text args[0] is (identity for an input).
inline std::string composite_term(scalar_op op, dtype out_type, const std::vector<std::string>& args, scalar_op first_op) {
  return composite_term(op, out_type, args.data(), args.size(), first_op);
}

inline std::vector<var_ptr> topo_order(const std::vector<var_ptr>& roots) {
  std::vector<var_ptr> order;
  std::unordered_map<std::uint64_t, int> state;  // 1 = visiting, 2 = done
  std::vector<std::pair<var_ptr, std::size_t>> stack;
  for (const auto& r : roots) {
    if (state[r->id] == 2) continue;
    stack.push_back({r, 0});
    state[r->id] = 1;
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      if (i < v->inputs.size()) {
        const var_ptr& in = v->inputs[i++];
        if (!state[in->id]) {
          state[in->id] = 1;
          stack.push_back({in, 0});
        }
      } else {
        state[v->id] = 2;
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  return order;
}

inline int count_applies(const std::vector<var_ptr>& roots) {
  int n = 0;
  for (auto& v : topo_order(roots)) n += v->kind == var_kind::apply;
  return n;
}

// Rebuilds the graph bottom-up: f(v, new_inputs) returns the replacement of v.
template <class F>
std::vector<var_ptr> rebuild(const std::vector<var_ptr>& roots, F&& f) {
  rebuild_map done;
  for (const var_ptr& v : topo_order(roots)) {
    std::vector<var_ptr> ins;
    ins.reserve(v->inputs.size());
    bool changed = false;
    for (const auto& in : v->inputs) {
      ins.push_back(done.at(in->id));
      changed |= ins.back() != in;
    }
    const at_site site(v->where, true);  // what replaces a node keeps the user's line
    var_ptr nv = f(v, ins, changed);
    done[v->id] = nv;
  }
  std::vector<var_ptr> out;
  for (const auto& r : roots) out.push_back(done.at(r->id));
  return out;
}

inline var_ptr with_inputs(const var_ptr& v, std::vector<var_ptr> ins, bool changed) {
  if (!changed) return v;
  auto nv = std::make_shared<variable>(*v);
  nv->id = next_variable_id();
  nv->inputs = std::move(ins);
  return nv;
}

/// merge: identical subexpressions (same op on the same inputs) and equal constants become one.
inline std::vector<var_ptr> merge_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  std::unordered_map<std::string, var_ptr> seen;
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    std::string key;
    if (v->kind == var_kind::constant) {
      const ndarray c = v->constant.contiguous();
      key = "c" + std::string(dtype_name(c.type())) + to_string(c.shape());
      key.append(reinterpret_cast<const char*>(c.data()), c.nbytes());
    } else if (v->kind == var_kind::apply) {
      // The output's type too: Shape_i of one input is an int64 for shape(x) and a float for
      // mean's gradient.
      key = "a" + std::string(dtype_name(v->type)) + std::to_string(v->rank) + v->fn->signature() + "(";
      for (auto& in : ins) key += std::to_string(in->id) + ",";
    } else {
      return v;
    }
    auto it = seen.find(key);
    if (it != seen.end()) {
      ++rec.applied;
      return it->second;
    }
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    seen.emplace(std::move(key), nv);
    return nv;
  });
}

/// blas: dot of matrix·vector and vector·matrix becomes Gemv, matrix·matrix Dot22.
inline std::vector<var_ptr> blas_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    if (v->kind != var_kind::apply || v->fn->kind != op_kind::dot) return with_inputs(v, std::move(ins), changed);
    const int ra = ins[0]->rank, rb = ins[1]->rank;
    op o = *v->fn;
    if (ra == 2 && rb == 1) {
      o.kind = op_kind::gemv;
    } else if (ra == 1 && rb == 2) {
      o.kind = op_kind::gemv;  // a·B = Bᵀ a
      o.transpose_a = true;
      std::swap(ins[0], ins[1]);
    } else if (ra == 2 && rb == 2) {
      o.kind = op_kind::dot22;
    } else {
      return with_inputs(v, std::move(ins), changed);
    }
    ++rec.applied;
    return make_apply(std::move(o), std::move(ins), v->type, v->rank);
  });
}

// Builds the Composite for the elementwise tree rooted at v (or v itself when nothing fuses).
template <class Transform>
var_ptr fuse_tree(const var_ptr& v, std::unordered_map<std::uint64_t, int>& users, int max_registers,
                  Transform& transform, rewrite_record& rec) {
  auto is_elem = [](const var_ptr& x) { return x->kind == var_kind::apply && x->fn->kind == op_kind::elemwise; };
  std::vector<var_ptr> leaves;
  std::unordered_map<std::uint64_t, int> leaf_reg;
  int n_ops = 0;
  int op_budget = max_registers;  // lowered until leaves + ops fit the register file
  std::vector<std::string> notes;
  std::function<void(const var_ptr&, bool)> find_leaves = [&](const var_ptr& x, bool top) {
    if (top || (is_elem(x) && users[x->id] == 1 && n_ops < op_budget)) {
      ++n_ops;
      for (const auto& in : x->inputs) find_leaves(in, false);
      return;
    }
    if (!leaf_reg.count(x->id)) {
      if (is_elem(x))
        notes.push_back("not fused into " + v->fn->name() + ": its input " + x->fn->name() +
                            (users[x->id] > 1 ? " has " + std::to_string(users[x->id] % 1000) + " users" +
                                                    (users[x->id] >= 1000 ? " and is an output" : "")
                                              : std::string(" would exceed the register limit")));
      leaf_reg[x->id] = static_cast<int>(leaves.size());
      leaves.push_back(x);
    }
  };
  // The walk cannot know how many leaves an op brings before it visits them: retry with fewer
  // ops until leaves + ops fit (each op needs a register, each distinct leaf one more).
  while (true) {
    leaves.clear();
    leaf_reg.clear();
    notes.clear();
    n_ops = 0;
    find_leaves(v, true);
    const int used = static_cast<int>(leaves.size()) + n_ops;
    if (used <= max_registers || op_budget <= 1) break;
    op_budget = std::max(1, n_ops - (used - max_registers) - 1);
  }
  for (auto& n : notes) rec.notes.push_back(std::move(n));
  if (n_ops == 1) {
    std::vector<var_ptr> ins;
    bool changed = false;
    for (const auto& in : v->inputs) {
      ins.push_back(transform(in));
      changed |= ins.back() != in;
    }
    return with_inputs(v, std::move(ins), changed);
  }
  auto prog = std::make_shared<program>();
  prog->n_inputs = static_cast<int>(leaves.size());
  for (const auto& l : leaves) prog->reg_types.push_back(l->type);
  struct emitted {
    int reg;
    std::string text;
    scalar_op op;
  };
  std::function<emitted(const var_ptr&, bool)> emit = [&](const var_ptr& x, bool top) -> emitted {
    auto it = leaf_reg.find(x->id);
    if (!top && it != leaf_reg.end()) return {it->second, "i" + std::to_string(it->second), scalar_op::identity};
    std::vector<emitted> args;
    for (const auto& in : x->inputs) args.push_back(emit(in, false));
    const op& o = *x->fn;
    instruction ins{};
    ins.op = o.scalar;
    ins.out_type = x->type;
    ins.in_type = o.scalar == scalar_op::switch_ ? x->inputs[1]->type : x->inputs[0]->type;
    for (std::size_t j = 0; j < args.size(); ++j) ins.args[j] = args[j].reg;
    ins.dst = static_cast<int>(prog->reg_types.size());
    prog->reg_types.push_back(x->type);
    prog->code.push_back(ins);
    prog->absorbed.push_back(o.name());
    std::vector<std::string> texts;
    for (const auto& e : args) texts.push_back(e.text);
    const std::string text = composite_term(o.scalar, x->type, texts, args.empty() ? scalar_op::identity : args[0].op);
    return {ins.dst, text, o.scalar};
  };
  const emitted top = emit(v, true);
  prog->outputs = {top.reg};
  prog->text = top.text;
  ++rec.applied;
  rec.notes.push_back("fused " + std::to_string(prog->absorbed.size()) + " elementwise ops into Composite{" +
                      top.text + "}");
  std::vector<var_ptr> new_inputs;
  for (const auto& l : leaves) new_inputs.push_back(transform(l));
  op c;
  c.kind = op_kind::composite;
  c.fused = std::move(prog);
  return make_apply(std::move(c), std::move(new_inputs), v->type, v->rank);
}

inline bool uniform_constant(const var_ptr& v, double& value) {
  if (v->kind != var_kind::constant || v->constant.size() == 0) return false;
  value = v->constant.flat_as_double(0);
  for (std::int64_t i = 1; i < v->constant.size(); ++i)
    if (v->constant.flat_as_double(i) != value) return false;
  return true;
}

// y0 as scale * base + offset: a tree of +, -, * and negation over one-element constants and
// one array, base (weight decay's w - 0.01 * (0.01 * w + 0.01 * w) is 0.9998 w). False where a
// product multiplies base by itself or another array appears.
struct linear_term {
  double scale = 0, offset = 0;
};
inline bool linear_in_one(const var_ptr& e, dtype type, var_ptr& base, linear_term& out, int depth = 0) {
  double c = 0;
  if (e->kind == var_kind::constant) {
    if (e->constant.size() != 1 || !uniform_constant(e, c)) return false;
    out = {0, c};
    return true;
  }
  if (depth > 32 || e->type != type) return false;
  if (e->kind == var_kind::apply && e->fn->kind == op_kind::elemwise) {
    const scalar_op s = e->fn->scalar;
    linear_term a, b;
    if (s == scalar_op::neg && e->inputs.size() == 1) {
      if (!linear_in_one(e->inputs[0], type, base, a, depth + 1)) return false;
      out = {-a.scale, -a.offset};
      return true;
    }
    if ((s == scalar_op::add || s == scalar_op::sub || s == scalar_op::mul) && e->inputs.size() == 2) {
      if (!linear_in_one(e->inputs[0], type, base, a, depth + 1) || !linear_in_one(e->inputs[1], type, base, b, depth + 1))
        return false;
      if (s == scalar_op::add) out = {a.scale + b.scale, a.offset + b.offset};
      else if (s == scalar_op::sub) out = {a.scale - b.scale, a.offset - b.offset};
      else if (a.scale != 0 && b.scale != 0) return false;
      else out = {a.scale * b.offset + b.scale * a.offset, a.offset * b.offset};
      return true;
    }
  }
  if (base && base->id != e->id) return false;
  base = e;
  out = {1, 0};
  return true;
}

/// gemv_accumulate (part of blas): `a - c * (b + gemv(A, x))` becomes
/// Gemv{alpha=-c}(a - c * b, A, x): the product is added into the elementwise result
/// instead of being stored and read again. Also `a - c * gemv`, `a + c * gemv`, and the
/// same with a matrix product (Dot22), which becomes Gemm{alpha}.
inline std::vector<var_ptr> gemv_accumulate_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  std::unordered_map<std::uint64_t, int> users;
  for (const auto& v : topo_order(roots))
    for (const auto& in : v->inputs) ++users[in->id];
  for (const auto& r : roots) users[r->id] += 1000;
  auto is = [](const var_ptr& v, scalar_op s) {
    return v->kind == var_kind::apply && v->fn->kind == op_kind::elemwise && v->fn->scalar == s;
  };
  auto plain_gemv = [&](const var_ptr& v) {
    return v->kind == var_kind::apply && (v->fn->kind == op_kind::gemv || v->fn->kind == op_kind::dot22) &&
           !v->fn->accumulate && users[v->id] == 1;
  };
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    if (!(is(nv, scalar_op::sub) || is(nv, scalar_op::add))) return nv;
    const var_ptr& a = nv->inputs[0];
    const var_ptr& m = nv->inputs[1];
    if (!is(m, scalar_op::mul) || users[v->inputs[1]->id] != 1) return nv;
    double c = 0;
    if (!uniform_constant(m->inputs[0], c)) return nv;
    var_ptr g, b;
    const var_ptr& t = m->inputs[1];
    if (plain_gemv(t)) g = t;
    else if (is(t, scalar_op::add) && plain_gemv(t->inputs[1])) {
      g = t->inputs[1];
      b = t->inputs[0];
    } else if (is(t, scalar_op::add) && plain_gemv(t->inputs[0])) {
      g = t->inputs[0];
      b = t->inputs[1];
    } else {
      return nv;
    }
    if (g->type != nv->type || g->rank != nv->rank || a->rank != nv->rank) return nv;
    var_ptr y0 = b ? elemwise(nv->fn->scalar, {a, elemwise(scalar_op::mul, {m->inputs[0], b})}) : a;
    if (y0->type != nv->type || y0->broadcastable != nv->broadcastable) return nv;
    op o = *g->fn;
    o.accumulate = true;
    o.alpha = is(nv, scalar_op::sub) ? -c : c;
    ++rec.applied;
    rec.notes.push_back("gemv_accumulate: " + nv->fn->name() + " of a product became " + o.name());
    return make_apply(std::move(o), {y0, g->inputs[0], g->inputs[1]}, nv->type, nv->rank);
  });
}

/// gemv_scale_fold (tags blas and fast_math): an accumulating Gemv whose y0 is a multiple of one
/// array (weight decay's w - 0.01 * (0.01 * w) is 0.9999 w) takes that array with the multiple
/// as beta: the product reads it where it is, and no elementwise pass over it runs first. Not
/// IEEE-exact: where the array holds inf or NaN, or a step of the unfolded form overflows, the
/// folded one differs (inf - inf is NaN, 0.9999 * inf is inf), so optimizer_excluding=fast_math
/// turns it off.
inline std::vector<var_ptr> gemv_scale_fold_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  return rebuild(roots, [&](const var_ptr& v, std::vector<var_ptr>& ins, bool changed) -> var_ptr {
    var_ptr nv = with_inputs(v, std::move(ins), changed);
    if (nv->kind != var_kind::apply || nv->fn->kind != op_kind::gemv || !nv->fn->accumulate || nv->fn->beta != 1.0 ||
        !(nv->type == dtype::float32 || nv->type == dtype::float64))
      return nv;
    const var_ptr& y0 = nv->inputs[0];
    var_ptr base;
    linear_term lin;
    if (!linear_in_one(y0, nv->type, base, lin) || !base || base->id == y0->id || lin.offset != 0 ||
        !std::isfinite(lin.scale) || base->type != nv->type || base->rank != nv->rank ||
        base->broadcastable != nv->broadcastable)
      return nv;
    op o = *nv->fn;
    o.beta = lin.scale;
    ++rec.applied;
    rec.notes.push_back("gemv_scale_fold: " + nv->fn->name() + " became " + o.name());
    return make_apply(std::move(o), {base, nv->inputs[1], nv->inputs[2]}, nv->type, nv->rank);
  });
}

/// elemwise_fusion: each maximal tree of elementwise ops whose inner results have no other
/// user becomes one Composite node, run as one loop over cache-sized blocks.
inline std::vector<var_ptr> fusion_pass(const std::vector<var_ptr>& roots, rewrite_record& rec) {
  const auto order = topo_order(roots);
  std::unordered_map<std::uint64_t, int> users;
  for (const auto& v : order)
    for (const auto& in : v->inputs) ++users[in->id];
  for (const auto& r : roots) users[r->id] += 1000;  // outputs are read outside: never absorbed
  auto is_elem = [](const var_ptr& v) {
    return v->kind == var_kind::apply && v->fn->kind == op_kind::elemwise;
  };
  constexpr int max_registers = static_cast<int>(limits::max_fusion_registers);
  std::unordered_map<std::uint64_t, var_ptr> memo;
  std::function<var_ptr(const var_ptr&)> transform = [&](const var_ptr& v) -> var_ptr {
    if (auto it = memo.find(v->id); it != memo.end()) return it->second;
    const at_site site(v->where, true);
    var_ptr result;
    if (!is_elem(v)) {
      std::vector<var_ptr> ins;
      bool changed = false;
      for (const auto& in : v->inputs) {
        ins.push_back(transform(in));
        changed |= ins.back() != in;
      }
      result = with_inputs(v, std::move(ins), changed);
    } else {
      result = fuse_tree(v, users, max_registers, transform, rec);
    }
    memo[v->id] = result;
    return result;
  };
  std::vector<var_ptr> out;
  for (const auto& r : roots) out.push_back(transform(r));
  return out;
}

}  // namespace detail
}  // namespace xsym
XSYM_COLD_END

#endif
