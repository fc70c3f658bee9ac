#ifndef XSYM_COMPILE_DEBUG_MODES_HPP
#define XSYM_COMPILE_DEBUG_MODES_HPP

// DebugMode (each node against the reference kernels, the function against its unoptimised
// twin), NanGuardMode and MonitorMode.
#include <cstring>
#include <iostream>
#include <sstream>

#include "function_runtime.hpp"

namespace xsym {

inline node_event function_runtime::event_for(std::size_t i, const ndarray* values, bool with_outputs) const {
  node_event e;
  e.graph = m_graph.get();
  e.node = &m_graph->nodes[i];
  for (int s : e.node->inputs) e.inputs.push_back(&values[s]);
  if (with_outputs)
    for (int s : e.node->outputs) e.outputs.push_back(&values[s]);
  return e;
}

namespace detail {
inline void call_monitor(const monitor_callback& f, const node_event& e) {
  try {
    f(e);
  } catch (...) {
    throw callback_exception{std::current_exception()};
  }
}
}  // namespace detail

// One node under DebugMode, NanGuardMode or MonitorMode.
inline void function_runtime::run_checked(std::size_t i, ndarray* values) {
  const apply_node& n = m_graph->nodes[i];
  if (m_monitor_pre) detail::call_monitor(m_monitor_pre, event_for(i, values, false));
  else if (m_plan.monitor && !m_monitor_post) print_monitor(i, values, false);
  std::vector<ndarray> snapshot;  // checked against after the node, then the reference's inputs
  if (m_plan.debug)
    for (int s : n.inputs) snapshot.push_back(detail::deep_copy(values[s]));
  m_thunks[i].run(m_thunks[i], values);
  if (m_plan.debug) debug_check_node(i, values, snapshot);
  if (m_plan.nan_guard) guard_outputs(i, values);
  if (m_monitor_post) detail::call_monitor(m_monitor_post, event_for(i, values, true));
  else if (m_plan.monitor && !m_monitor_pre) print_monitor(i, values, true);
}

XSYM_COLD_BEGIN
// Flag-only MonitorMode: each node and a summary of its values on stderr.
inline void function_runtime::print_monitor(std::size_t i, const ndarray* values, bool after) const {
  const apply_node& n = m_graph->nodes[i];
  auto summary = [](const ndarray& a) {
    std::ostringstream os;
    os << dtype_name(a.type()) << to_string(a.shape());
    if (a.size() > 0) {
      os << " [";
      for (std::int64_t k = 0; k < std::min<std::int64_t>(a.size(), 4); ++k) os << (k ? " " : "") << a.flat_as_double(k);
      os << (a.size() > 4 ? " ...]" : "]");
    }
    return os.str();
  };
  std::cerr << "xsym MonitorMode: " << m_name << " node " << i << (after ? " done " : " starts ") << m_graph->node_text(n)
            << "\n";
  const auto& slots = after ? n.outputs : n.inputs;
  for (std::size_t k = 0; k < slots.size(); ++k)
    std::cerr << "    " << (after ? "output " : "input ") << k << ": " << summary(values[slots[k]]) << "\n";
}

[[noreturn]] inline void function_runtime::debug_fail(std::size_t i, const ndarray* values, const std::string& what) const {
  const apply_node& n = m_graph->nodes[i];
  std::string shapes;
  for (std::size_t k = 0; k < n.inputs.size(); ++k)
    shapes += (k ? ", " : "") + to_string(values[n.inputs[k]].shape());
  throw debug_mode_error("xsym DebugMode: function '" + m_name + "', Apply node " + std::to_string(i) + " " +
                         m_graph->node_text(n) + " (input shapes " + shapes + "): " + what);
}

namespace detail {
// A contiguous copy with every floating value's magnitude.
inline ndarray abs_copy(const ndarray& v) {
  ndarray a;
  v.copy_contiguous_into(a);
  visit_dtype(a.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>)
      for (std::int64_t e = 0; e < a.size(); ++e) a.data_as<T>()[e] = std::abs(a.data_as<T>()[e]);
  });
  return a;
}
}  // namespace detail

// |beta y0| + |alpha| |op(A)| |x| for a product node (y0 when it accumulates), sum |x| or
// mean |x| for a sum or mean of x, from the reference kernels run on absolute values; an empty
// array for any other node. The reference sums in another order than the kernels: a sum that
// cancels keeps rounding noise of the size of its terms.
inline ndarray function_runtime::product_scale(std::size_t i, const std::vector<ndarray>& ref_in) const {
  const apply_node& n = m_graph->nodes[i];
  const op& o = *n.fn;
  const bool product = o.kind == op_kind::dot || o.kind == op_kind::gemv || o.kind == op_kind::dot22;
  const bool summed = o.kind == op_kind::reduce && !o.fused && (o.reduction == reduce_op::sum || o.reduction == reduce_op::mean);
  if (!(product || summed) || n.outputs.size() != 1 || !is_float(ref_in[0].type())) return {};
  const bool accumulates = o.accumulate && (o.kind == op_kind::gemv || o.kind == op_kind::dot22);
  std::vector<ndarray> ref_values(m_graph->slots.size());
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    ndarray a = detail::abs_copy(ref_in[k]);
    if (accumulates && k == 0 && a.nbytes()) std::memset(a.data(), 0, a.nbytes());  // beta y0 is added below
    ref_values[static_cast<std::size_t>(n.inputs[k])] = std::move(a);
  }
  detail::thunk ref = m_ref_thunks[i];
  ref.pool = nullptr;
  ref.dests = nullptr;
  ref.run(ref, ref_values.data());
  ndarray scale;
  ref_values[static_cast<std::size_t>(n.outputs[0])].copy_contiguous_into(scale);
  xsym::detail::visit_dtype(scale.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      T* p = scale.data_as<T>();
      const ndarray y0 = accumulates ? ref_in[0].contiguous() : ndarray{};
      for (std::int64_t e = 0; e < scale.size(); ++e)
        p[e] = std::abs(p[e]) + (accumulates ? std::abs(static_cast<T>(o.beta) * y0.data_as<T>()[e]) : T(0));
    }
  });
  return scale;
}

namespace detail {
// A OnePassGemv's product (its last output): |beta y0| + |alpha| |A|ᵀ |g|, g the reference's.
inline ndarray one_pass_scale(const op& o, const std::vector<ndarray>& ref_in, const ndarray& g) {
  const ndarray a = abs_copy(ref_in[0]), x = abs_copy(g);
  ndarray scale = ndarray::empty(a.type(), vector_shape(a.shape(1)));
  if (!o.accumulate) {
    cpu::run_gemv(a, true, x, scale, std::abs(o.alpha));
    return scale;
  }
  const ndarray y0 = abs_copy(ref_in[2]);
  cpu::run_gemv(a, true, x, scale, std::abs(o.alpha), true, {}, &y0, std::abs(o.beta));
  return scale;
}
}  // namespace detail

inline void function_runtime::debug_check_node(std::size_t i, ndarray* values, std::vector<ndarray>& snapshot) {
  const apply_node& n = m_graph->nodes[i];
  // Inputs outside the destroy map must be untouched.
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    bool destroyed = false;
    for (auto [o, in] : n.fn->destroy_map) destroyed |= in == static_cast<int>(k);
    if (destroyed) continue;
    const ndarray& now = values[n.inputs[k]];
    if (!now.has_value()) continue;
    const ndarray& was = snapshot[k];
    if (now.is_c_contiguous() && now.type() == was.type() && now.shape() == was.shape() &&
        std::memcmp(now.data(), was.data(), now.nbytes()) == 0)
      continue;  // the same bits: one memcmp where most inputs are
    if (auto m = detail::compare_arrays(now, was); m && (m->layout || m->max_abs > 0))
      debug_fail(i, values, "input " + std::to_string(k) + " changed although the node does not declare it destroyed: " +
                                detail::describe_mismatch(now, *m));
  }
  // The same node with the reference kernels, on the snapshot of its inputs (checked above, so
  // the reference may now destroy what its op declares).
  std::vector<ndarray> ref_values(m_graph->slots.size());
  for (std::size_t k = 0; k < n.inputs.size(); ++k) ref_values[static_cast<std::size_t>(n.inputs[k])] = snapshot[k];
  if (n.fn->kind == op_kind::allreduce) {
    // No kernel of xsym reduces over the ranks, and a second collective would pair with another
    // rank's next one: the node's result is its own reference, and the twin replays it.
    const int out = n.outputs[0];
    m_reference->m_collective_log.entries.push_back({n.fn.get(), i, snapshot[0], detail::deep_copy(values[out]), {}, false});
    ref_values[static_cast<std::size_t>(out)] = values[out];
  } else {
    detail::thunk ref = m_ref_thunks[i];
    ref.pool = nullptr;
    ref.dests = nullptr;
    ref.run(ref, ref_values.data());
  }
  const bool one_pass = n.fn->kind == op_kind::one_pass_gemv;
  const ndarray scale =
      one_pass ? detail::one_pass_scale(*n.fn, snapshot, ref_values[static_cast<std::size_t>(n.outputs[static_cast<std::size_t>(n.fn->pass_g)])])
               : product_scale(i, snapshot);
  const std::size_t scaled = one_pass ? n.outputs.size() - 1 : 0;  // the product's output
  // Max and Min of the node's own inputs pick an element: no rounding, so no tolerance. (A
  // fused one reduces values its program computed, which two kernel sets round differently.)
  const bool picks = n.fn->kind == op_kind::reduce && !n.fn->fused &&
                     (n.fn->reduction == reduce_op::max || n.fn->reduction == reduce_op::min);
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    const ndarray& got = values[n.outputs[o]];
    const ndarray& want = ref_values[static_cast<std::size_t>(n.outputs[o])];
    if (auto m = detail::compare_arrays(got, want, scale.data() && o == scaled ? &scale : nullptr, picks))
      debug_fail(i, values, "output " + std::to_string(o) + " differs from the reference kernels: " +
                                detail::describe_mismatch(got, *m));
    if (m_plan.check_isfinite)
      for (int what : {0, 1})
        if (const auto bad = detail::first_bad(got, what); bad >= 0)
          debug_fail(i, values, "output " + std::to_string(o) + " has " + (what ? "Inf" : "NaN") + " at index " +
                                    detail::index_text(got.shape(), bad) + " (DebugMode.check_isfinite)");
  }
  // Outputs alias inputs only as declared: views may, in-place outputs must, others must not.
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    const ndarray& out = values[n.outputs[o]];
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      bool declared = n.fn->is_view();
      for (auto [dst, in] : n.fn->destroy_map) declared |= dst == static_cast<int>(o) && in == static_cast<int>(k);
      if (!declared && detail::overlaps(out, values[n.inputs[k]]))
        debug_fail(i, values, "output " + std::to_string(o) + " shares memory with input " + std::to_string(k) +
                                  ", which the node does not declare (view map or destroy map)");
    }
  }
}

inline void function_runtime::guard_inputs(const ndarray* values) const {
  auto check = [&](int s, const std::string& what) {
    if (detail::all_ordinary(values[s])) return;  // one pass for the three checks
    const char* names[3] = {"NaN", "Inf", "a value above 1e10 in magnitude"};
    for (int w = 0; w < 3; ++w)
      if (m_plan.guard[static_cast<std::size_t>(w)])
        if (const auto bad = detail::first_bad(values[s], w); bad >= 0)
          throw nan_guard_error("xsym NanGuardMode: function '" + m_name + "': " + what + " contains " + names[w] +
                                " at index " + detail::index_text(values[s].shape(), bad) +
                                " (it came from an input, before any node ran)");
  };
  for (int s : m_graph->inputs) check(s, "input '" + m_graph->slots[static_cast<std::size_t>(s)].name + "'");
  for (int s : m_shared_slots) check(s, "shared variable '" + m_graph->slots[static_cast<std::size_t>(s)].name + "'");
}

inline void function_runtime::guard_outputs(std::size_t i, const ndarray* values) const {
  const apply_node& n = m_graph->nodes[i];
  const char* names[3] = {"NaN", "Inf", "a value above 1e10 in magnitude"};
  // guard_inputs checked the function's inputs and shared variables, the nodes before this
  // one its other inputs but the constants: a constant holding the value is where it came from.
  auto origin = [&](int w) -> std::string {
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const int s = n.inputs[k];
      if (m_graph->slots[static_cast<std::size_t>(s)].kind != var_kind::constant) continue;
      if (const auto at = detail::first_bad(values[s], w); at >= 0)
        return " (it came from its input " + std::to_string(k) + ", the constant " + m_graph->slot_text(s) +
               ", which holds " + names[w] + " at index " + detail::index_text(values[s].shape(), at) + ")";
    }
    return " (its inputs had none: it came from this node)";
  };
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    if (detail::all_ordinary(values[n.outputs[o]])) continue;  // one pass for the three checks
    for (int w = 0; w < 3; ++w)
      if (m_plan.guard[static_cast<std::size_t>(w)])
        if (const auto bad = detail::first_bad(values[n.outputs[o]], w); bad >= 0)
          throw nan_guard_error("xsym NanGuardMode: function '" + m_name + "', Apply node " + std::to_string(i) + " " +
                                m_graph->node_text(n) + " produced " + names[w] + " in output " + std::to_string(o) +
                                " at index " + detail::index_text(values[n.outputs[o]].shape(), bad) + origin(w));
  }
}

// The whole function against its twin built without fusion, in-place or BLAS rewrites.
inline void function_runtime::check_against_reference(const ndarray* args, const shared_values_read& shared,
                                                      const ndarray* values) {
  std::vector<ndarray> outs, ups;
  m_reference->evaluate(args, outs, ups, &shared);
  auto fail = [&](const std::string& what) {
    throw debug_mode_error("xsym DebugMode: function '" + m_name + "': " + what);
  };
  // The twin took each AllReduce's result from the function's node: what the two reduced must agree.
  for (const auto& e : m_reference->m_collective_log.entries)
    if (!e.taken) continue;
    else if (auto m = detail::compare_arrays(e.input, e.twin_input))
      fail("the input of Apply node " + std::to_string(e.node) + " " + m_graph->node_text(static_cast<int>(e.node)) +
           " differs from the graph without optimizations (a rewrite changed the result): " +
           detail::describe_mismatch(e.input, *m));
  auto producer = [&](int s) {
    const int owner = m_graph->slots[static_cast<std::size_t>(s)].owner;
    return owner < 0 ? std::string() : " (computed by Apply node " + std::to_string(owner) + " " + m_graph->node_text(owner) + ")";
  };
  for (std::size_t o = 0; o < outs.size(); ++o)
    if (auto m = detail::compare_arrays(values[m_graph->outputs[o]], outs[o]))
      fail("output " + std::to_string(o) + producer(m_graph->outputs[o]) +
           " differs from the graph without optimizations (a rewrite changed the result): " +
           detail::describe_mismatch(values[m_graph->outputs[o]], *m));
  for (std::size_t u = 0; u < ups.size(); ++u)
    if (auto m = detail::compare_arrays(values[m_graph->updates[u].second], ups[u]))
      fail("the update of '" + m_graph->slot_text(m_graph->updates[u].first) +
           "' differs from the graph without optimizations: " + detail::describe_mismatch(values[m_graph->updates[u].second], *m));
}

XSYM_COLD_END
}  // namespace xsym

#endif
