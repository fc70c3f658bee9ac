#ifndef XSYM_GRAD_GRAD_HPP
#define XSYM_GRAD_GRAD_HPP

// Reverse-mode symbolic differentiation on the graph. The result is an ordinary expression,
// so merge, fusion and in-place rewrites apply to it like to any other.
#include <tuple>
#include <utility>
#include <unordered_map>
#include <vector>

#include "../expr/var.hpp"
#include "../rewrite/stabilize.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // gradients are built once, before compiling

namespace xsym {

/// @brief What grad does for a wrt the cost does not depend on (Theano's disconnected_inputs).
enum class disconnected { raise, zeros };

namespace detail {

inline var_ptr constant_like(dtype t, double value) { return make_constant(scalar_array_of(t, value)); }
// Out of line, with their operands by reference: each rule below is a few calls, not a vector
// of operands built and destroyed in place (half of input_grads' code, compiled into every
// program).
[[gnu::noinline]] inline var_ptr ew(scalar_op s, const var_ptr& a) { return elemwise(s, {a}); }
[[gnu::noinline]] inline var_ptr ew(scalar_op s, const var_ptr& a, const var_ptr& b) { return elemwise(s, {a, b}); }
[[gnu::noinline]] inline var_ptr ew(scalar_op s, const var_ptr& a, const var_ptr& b, const var_ptr& c) {
  return elemwise(s, {a, b, c});
}
// The vocabulary of the op table's derivative column (expr/op_table.hpp).
inline var_ptr add(const var_ptr& a, const var_ptr& b) { return ew(scalar_op::add, a, b); }
inline var_ptr sub(const var_ptr& a, const var_ptr& b) { return ew(scalar_op::sub, a, b); }
inline var_ptr mul(const var_ptr& a, const var_ptr& b) { return ew(scalar_op::mul, a, b); }
inline var_ptr divide(const var_ptr& a, const var_ptr& b) { return ew(scalar_op::true_div, a, b); }
inline var_ptr neg(const var_ptr& a) { return ew(scalar_op::neg, a); }
inline var_ptr sw(const var_ptr& cond, const var_ptr& a, const var_ptr& b) { return ew(scalar_op::switch_, cond, a, b); }
// g to the first input where pick_a holds, to the second elsewhere (maximum, minimum).
inline std::vector<var_ptr> select_grads(const var_ptr& pick_a, const var_ptr& g, const var_ptr& zero) {
  return {sw(pick_a, g, zero), sw(pick_a, zero, g)};
}
// A cast passes a gradient only between floating-point types.
inline bool float_to_float(const var_ptr& a, dtype t) { return is_float(a->type) && is_float(t); }

// Sums g over axes, dropping those where g is already broadcastable (always 1): no Sum node
// for what is only a reshape.
inline var_ptr sum_axes(const var_ptr& g, const std::vector<int>& axes) {
  std::vector<int> to_sum;
  for (int a : axes)
    if (!is_broadcastable(g, a)) to_sum.push_back(a);
  var_ptr s = g;
  if (!to_sum.empty()) s = reduce(g, reduce_op::sum, to_sum, false);
  std::vector<int> pattern;
  int j = 0;
  for (int d = 0; d < g->rank; ++d) {
    const bool summed = std::find(to_sum.begin(), to_sum.end(), d) != to_sum.end();
    const bool dropped = !summed && std::find(axes.begin(), axes.end(), d) != axes.end();
    if (summed) continue;
    if (!dropped) pattern.push_back(j);
    ++j;
  }
  return dimshuffle(s, std::move(pattern));
}

// g broadcast to x's shape (Theano's fill/second): needed where a non-elementwise op reads it.
inline var_ptr fill_like(const var_ptr& g, const var_ptr& x) {
  if ((g->broadcastable & ~x->broadcastable) == 0) return g;
  return elemwise(scalar_op::switch_, {make_constant(scalar_array(true)), g, cast(x, g->type)});
}

// Sums g, the adjoint of the elementwise z, over the dimensions where its input x is
// broadcastable but g is not, so g takes x's pattern. A g that is broadcastable where z is not
// stands for one value repeated along z's dimension (the adjoint of a sum, say): it is filled
// to z's shape first, so that the sum counts every repetition.
inline var_ptr sum_to_pattern(var_ptr g, const var_ptr& x, const var_ptr& z) {
  for (int d = 0; d < x->rank; ++d)
    if (is_broadcastable(x, d) && is_broadcastable(g, d) && !is_broadcastable(z, d)) {
      g = fill_like(g, z);
      break;
    }
  std::vector<int> axes;
  for (int d = 0; d < x->rank; ++d)
    if (is_broadcastable(x, d) && !is_broadcastable(g, d)) axes.push_back(d);
  if (axes.empty()) return g;
  var_ptr s = sum_axes(g, axes);
  std::vector<int> pattern;
  int j = 0;
  for (int d = 0; d < x->rank; ++d) pattern.push_back(std::find(axes.begin(), axes.end(), d) != axes.end() ? -1 : j++);
  return dimshuffle(s, std::move(pattern));
}

// The contributions of z = op(inputs) to its inputs' adjoints, given z's adjoint g.
// A null entry means no gradient flows to that input.
inline std::vector<var_ptr> input_grads(const var_ptr& z, const var_ptr& g) {
  const op& o = *z->fn;
  const auto& in = z->inputs;
  std::vector<var_ptr> r(in.size());
  const dtype t = z->type;
  auto c = [&](double v) { return constant_like(t, v); };
  switch (o.kind) {
    case op_kind::elemwise: {
      // The op table's derivative column, in the helpers above.
      [[maybe_unused]] const var_ptr& a = in[0];
      [[maybe_unused]] const var_ptr& b = in.size() > 1 ? in[1] : in[0];
      switch (o.scalar) {
#define XSYM_GRAD_CASE(S, name, arity, infix, family, flops, derivative, ...) \
  case scalar_op::S: r = {XSYM_UNPAREN derivative}; break;
        XSYM_OP_TABLE(XSYM_GRAD_CASE)
#undef XSYM_GRAD_CASE
      }
      // Undo broadcasting: an input that broadcasts gets the sum over the broadcast dimensions.
      for (std::size_t i = 0; i < r.size(); ++i)
        if (r[i]) r[i] = sum_to_pattern(r[i], in[i], z);
      return r;
    }
    case op_kind::dimshuffle: {
      const var_ptr& a = in[0];
      std::vector<int> new_axes;
      std::vector<int> kept;  // input dimension held at each remaining position
      for (std::size_t i = 0; i < o.pattern.size(); ++i) {
        if (o.pattern[i] < 0) new_axes.push_back(static_cast<int>(i));
        else kept.push_back(o.pattern[i]);
      }
      var_ptr s = new_axes.empty() ? g : sum_axes(g, new_axes);
      // A dropped (broadcastable) input dimension comes back as a new axis of 1.
      std::vector<int> inverse(static_cast<std::size_t>(a->rank), -1);
      for (std::size_t j = 0; j < kept.size(); ++j) inverse[static_cast<std::size_t>(kept[j])] = static_cast<int>(j);
      bool identity = true;
      for (std::size_t i = 0; i < inverse.size(); ++i) identity &= inverse[i] == static_cast<int>(i);
      return {identity ? s : dimshuffle(s, inverse)};
    }
    case op_kind::reduce: {
      const var_ptr& a = in[0];
      // Put the reduced axes back as broadcastable ones: g then broadcasts against a.
      std::vector<int> pattern;
      int j = 0;
      for (int d = 0; d < a->rank; ++d)
        pattern.push_back(std::find(o.axes.begin(), o.axes.end(), d) != o.axes.end() ? -1 : j++);
      const var_ptr gb = pattern.size() == static_cast<std::size_t>(g->rank) && o.axes.empty() ? g : dimshuffle(g, pattern);
      // gb is left with broadcastable axes: the sweep broadcasts it to a's shape only where a
      // non-elementwise op needs the full shape (fill_like).
      if (!is_float(a->type)) return {nullptr};
      switch (o.reduction) {
        case reduce_op::sum: return {gb};
        case reduce_op::mean: return {ew(scalar_op::true_div, gb, shape_prod(a, o.axes, t))};
        case reduce_op::prod: {
          // g * prod / a divides 0 by 0 where a is 0. Per reduced group, with k zeros in it:
          // k = 0, g * prod / a; k = 1, g times the product of the others at the zero and 0
          // elsewhere; k > 1, 0 everywhere (Theano's rule).
          const var_ptr zb = dimshuffle(z, pattern);
          const var_ptr zero = c(0), one = c(1);
          const var_ptr is_zero = ew(scalar_op::eq, a, zero);
          const var_ptr zeros_b = dimshuffle(reduce(cast(is_zero, t), reduce_op::sum, o.axes, o.all_axes), pattern);
          const var_ptr others_b =
              dimshuffle(reduce(ew(scalar_op::switch_, is_zero, one, a), reduce_op::prod, o.axes, o.all_axes), pattern);
          const var_ptr at_zero = ew(scalar_op::switch_, ew(scalar_op::eq, zeros_b, one), mul(gb, others_b), zero);
          const var_ptr elsewhere = ew(scalar_op::switch_, ew(scalar_op::eq, zeros_b, zero),
                                       ew(scalar_op::true_div, mul(gb, zb), a), zero);
          return {ew(scalar_op::switch_, is_zero, at_zero, elsewhere)};
        }
        case reduce_op::max:
        case reduce_op::min: {
          const var_ptr zb = dimshuffle(z, pattern);
          return {ew(scalar_op::switch_, ew(scalar_op::eq, a, zb), gb, constant_like(t, 0))};
        }
      }
      return {nullptr};
    }
    case op_kind::dot: {
      const var_ptr& a = in[0];
      const var_ptr& b = in[1];
      auto col = [](const var_ptr& v) { return dimshuffle(v, {0, -1}); };
      auto row = [](const var_ptr& v) { return dimshuffle(v, {-1, 0}); };
      auto tr = [](const var_ptr& v) { return dimshuffle(v, {1, 0}); };
      if (a->rank == 1 && b->rank == 1) return {mul(g, b), mul(g, a)};
      if (a->rank == 2 && b->rank == 1) return {dot(col(g), row(b)), dot(tr(a), g)};
      if (a->rank == 1 && b->rank == 2) return {dot(b, g), dot(col(a), row(g))};
      return {dot(g, tr(b)), dot(tr(a), g)};
    }
    case op_kind::arg_reduce: return {nullptr};  // an integer position: nothing flows
    case op_kind::take: {
      // The rows' adjoints added into zeros of x's shape (repeated indices add up).
      const var_ptr zeros = elemwise(scalar_op::switch_, {make_constant(scalar_array(true)), c(0), in[0]});
      return {inc_rows(zeros, g, in[1]), nullptr};
    }
    case op_kind::inc_rows: {
      // y's adjoint: g's rows at the indices, summed where y was broadcast.
      const var_ptr rows = take(g, in[2]);
      return {g, sum_to_pattern(rows, in[1], rows), nullptr};
    }
    case op_kind::subtensor: {
      // The region's adjoint added into zeros of x's shape.
      const var_ptr zeros = elemwise(scalar_op::switch_, {make_constant(scalar_array(true)), c(0), in[0]});
      return {inc_subtensor(zeros, g, o.slices, false)};
    }
    case op_kind::inc_subtensor: {
      // x's adjoint is g, with the region zeroed where y replaced x; y's is the region of g,
      // summed over the dimensions along which y was broadcast.
      const var_ptr gx = o.set_values ? inc_subtensor(g, c(0), o.slices, true) : g;
      const var_ptr region = subtensor(g, o.slices);
      return {gx, sum_to_pattern(region, in[1], region)};
    }
    case op_kind::reshape:  // the adjoint in x's shape; none to a `like` or extent input
      r[0] = reshape_like(g, in[0]);
      return r;
    case op_kind::check:
      r[0] = g;
      return r;
    case op_kind::batched_dot: {
      auto tr = [](const var_ptr& v) { return dimshuffle(v, {0, 2, 1}); };
      return {batched_dot(g, tr(in[1])), batched_dot(tr(in[0]), g)};
    }
    case op_kind::join:
      for (std::size_t k = 0; k < in.size(); ++k) r[k] = join_part(g, in, static_cast<int>(k), o.axes[0]);
      return r;
    case op_kind::alloc:  // the value's adjoint sums g over the dimensions it was broadcast along
      r[0] = sum_to_pattern(g, in[0], z);
      return r;
    case op_kind::arange: {  // Theano's ARange, floats: z_i = start + i step
      if (!is_float(t)) return r;
      r[0] = reduce(g, reduce_op::sum, {0}, false);  // stop moves no element: no gradient
      r[2] = divide(reduce(mul(g, sub(z, in[0])), reduce_op::sum, {0}, false), in[2]);  // sum g_i i
      return r;
    }
    case op_kind::cumulative: {
      if (!is_float(t)) return r;
      const int axis = o.axes[0];
      std::vector<slice_spec> flip(static_cast<std::size_t>(axis) + 1);
      flip.back().step = -1;
      if (o.reduction == reduce_op::sum) {  // the adjoint's running sum from the end
        r[0] = subtensor(cumulative(subtensor(g, flip), reduce_op::sum, axis), flip);
        return r;
      }
      // cumprod's adjoint divides by each element (wrong at a zero); refused rather than wrong.
      throw graph_error("xsym::grad: no gradient through " + o.name() + " (cumprod); write the product with cumsum of logs");
    }
    case op_kind::join_part: {
      // Zeros of the joined shape with g where part k lay: a Join of zeros and g.
      std::vector<var_ptr> parts;
      for (std::size_t k = 1; k < in.size(); ++k)
        parts.push_back(static_cast<int>(k) - 1 == o.pass_u
                            ? g
                            : elemwise(scalar_op::switch_, {make_constant(scalar_array(true)), c(0), in[k]}));
      r[0] = join(std::move(parts), o.axes[0]);
      return r;
    }
    case op_kind::allreduce:
      // Which ranks' costs would the adjoint sum? Differentiate on each shard, then all-reduce.
      throw graph_error("xsym::grad: no gradient through " + o.name() +
                        ": take the gradient of each rank's cost on its shard and all-reduce the gradient");
    default: return r;
  }
}

inline var_ptr add_all(const std::vector<var_ptr>& parts) {
  var_ptr s = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) s = ew(scalar_op::add, s, parts[i]);
  return s;
}

/// Adjoints of cost with respect to each wrt: one reverse sweep, contributions summed per node.
/// Compiled once with XSYM_COMPILED_LIB.
XSYM_RUNTIME_INLINE std::vector<var_ptr> grad(const var_ptr& cost, const std::vector<var_ptr>& wrt, disconnected policy)
#if !XSYM_RUNTIME_DEFINITIONS
    ;
#else
{
  if (cost->rank != 0) throw graph_error("xsym::grad: the cost must be a scalar (rank 0)");
  if (!is_float(cost->type)) throw graph_error("xsym::grad: the cost must be float32 or float64");
  // Differentiate the stable form: the gradient of log(1 - sigmoid(z)) is finite, that of
  // log(1 - 1/(1 + exp(-z))) is not once the sigmoid rounds to 1.
  // A wrt built apart from the cost is the cost's equal subexpression: a typed expression
  // lowers once per use (`auto h = x * 2.0; sum(h * h)` holds copies of x * 2), so the two are
  // merged first. The stable forms then leave each wrt as it is, in the graph.
  rewrite_record ignored;
  std::vector<var_ptr> roots{cost};
  roots.insert(roots.end(), wrt.begin(), wrt.end());
  const std::vector<var_ptr> merged = merge_pass(roots, ignored);
  const std::vector<var_ptr> targets(merged.begin() + 1, merged.end());
  const var_ptr stable_cost = stabilize_pass({merged[0]}, ignored, targets)[0];
  const auto order = topo_order({stable_cost});
  // Only nodes on a path to some wrt need adjoints.
  std::unordered_map<std::uint64_t, bool> reaches;
  for (const auto& w : targets) reaches[w->id] = true;
  for (const auto& v : order)
    for (const auto& in : v->inputs)
      if (reaches[in->id]) reaches[v->id] = true;
  std::unordered_map<std::uint64_t, std::vector<var_ptr>> contributions;
  contributions[stable_cost->id].push_back(constant_like(cost->type, 1));
  std::unordered_map<std::uint64_t, var_ptr> adjoint;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const var_ptr& v = *it;
    auto c = contributions.find(v->id);
    if (c == contributions.end()) continue;
    const bool elementwise = v->kind == var_kind::apply && v->fn->kind == op_kind::elemwise;
    const var_ptr g = elementwise ? add_all(c->second) : fill_like(add_all(c->second), v);
    adjoint[v->id] = g;
    if (v->kind != var_kind::apply || !reaches[v->id]) continue;
    const auto gs = input_grads(v, g);
    for (std::size_t i = 0; i < gs.size(); ++i)
      if (gs[i] && reaches[v->inputs[i]->id] && is_float(v->inputs[i]->type))
        contributions[v->inputs[i]->id].push_back(cast(gs[i], v->inputs[i]->type));
  }
  std::vector<var_ptr> out;
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    const var_ptr& w = targets[k];
    auto a = adjoint.find(w->id);
    if (a != adjoint.end()) {  // an elementwise wrt's adjoint may stand for one value repeated
      out.push_back(fill_like(a->second, w));
      continue;
    }
    // In the graph but reached only through comparisons or integer casts: a true zero.
    const bool in_graph = std::any_of(order.begin(), order.end(), [&](const var_ptr& v) { return v->id == w->id; });
    if (policy == disconnected::raise && !in_graph) {
      const var_ptr& named = wrt[k];
      const std::string what = !named->name.empty()           ? "'" + named->name + "'"
                               : named->kind == var_kind::apply ? "the unnamed " + named->fn->name() + " node"
                                                                : "an unnamed variable";
      throw graph_error("xsym::grad: the cost does not depend on " + what + " (wrt " + std::to_string(k) +
                        "; pass xsym::disconnected::zeros to get a zero gradient instead)");
    }
    out.push_back(ew(scalar_op::switch_, constant_like(dtype::bool_, 0), w, constant_like(w->type, 0)));
  }
  return out;
}
#endif  // XSYM_RUNTIME_DEFINITIONS
template <class... W, std::size_t... I>
auto typed_grads(const std::vector<var_ptr>& gs, std::index_sequence<I...>) {
  return std::tuple<var<typename W::value_type, W::rank>...>{var<typename W::value_type, W::rank>(gs[I])...};
}
/// grad's cost and the user's line that asked for its gradient: the wrt are a pack, after which
/// no defaulted source_location can come, but the cost's conversion can take one.
struct cost_at {
  var_ptr node;
  source_site where;
  template <class C>
  cost_at(const var<C, 0>& cost, source_site w = source_site::current())  // NOLINT: implicit
      : node(cost.node()), where(w) {
    static_assert(std::is_floating_point_v<C>, "xsym::grad: the cost must be float or double");
  }
};
}  // namespace detail

/// @brief Gradients of a scalar cost with respect to each wrt, as expressions of wrt's type.
///
/// `auto [gw, gb] = xsym::grad(cost, w, b);` Non-differentiable ops (comparisons, casts to
/// integers) pass no gradient; a wrt the cost does not depend on is an error unless
/// `xsym::disconnected::zeros` is passed first.
/// Its errors, and the run-time errors of the nodes it builds, name the line that called it.
template <class... W>
auto grad(const detail::cost_at& cost, const W&... wrt) {
  return grad(disconnected::raise, cost, wrt...);
}
template <class... W>
auto grad(disconnected policy, const detail::cost_at& cost, const W&... wrt) {
  static_assert(sizeof...(W) > 0, "xsym::grad: name at least one variable to differentiate with respect to");
  static_assert((is_var_v<W> && ...), "xsym::grad: differentiate with respect to symbolic variables");
  static_assert((std::is_floating_point_v<typename W::value_type> && ...),
                "xsym::grad: variables to differentiate with respect to must be float or double");
  const detail::at_site site(cost.where);
  return detail::typed_grads<W...>(detail::grad(cost.node, {wrt.node()...}, policy), std::index_sequence_for<W...>{});
}
template <class C, std::size_t N, class... W>
  requires(N > 0)
auto grad(const var<C, N>&, const W&...) {
  static_assert(N == 0, "xsym::grad: the cost must be a scalar (rank 0); reduce it first, e.g. with xsym::sum");
}

}  // namespace xsym
XSYM_COLD_END

#endif
