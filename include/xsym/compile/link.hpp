#ifndef XSYM_COMPILE_LINK_HPP
#define XSYM_COMPILE_LINK_HPP

// The linker: one thunk per Apply node (the CPU kernels, or the GPU backend's through its
// hooks), fused programs compiled when cxx is set, and when each intermediate dies (gc).
#include <algorithm>
#include <limits>
#include <unordered_set>

#include "function_runtime.hpp"

namespace xsym {

XSYM_COLD_BEGIN
namespace detail {
// Bit k: the elementwise node's input k is one value for the whole node (rank 0, or every
// dimension broadcastable), as run_span takes it for whole arrays.
inline std::uint64_t one_value_inputs(const function_graph& g, const apply_node& n, const thunk& t,
                                      std::size_t first = 0) {
  std::uint64_t bits = 0;
  for (std::size_t k = first; k < n.inputs.size() && k - first < 64; ++k) {
    const unsigned all = (1u << g.slots[static_cast<std::size_t>(n.inputs[k])].rank) - 1u;
    if ((t.slot_bcast[k] & all) == all) bits |= std::uint64_t{1} << (k - first);
  }
  return bits;
}
// The same for the Composite a OnePassGemv runs on each group of rows: u and the per-row
// vectors are arrays, the inputs of shape (1,) one value (one_pass_rows).
inline std::uint64_t one_pass_one_value_inputs(const apply_node& n, const thunk& t) {
  const op& o = *n.fn;
  const std::size_t first = o.accumulate ? 3 : 2;
  std::uint64_t bits = 0;
  for (int reg = 0, j = 0; reg < o.fused->n_inputs && reg < 64; ++reg) {
    if (reg == o.pass_u) continue;
    if (t.slot_bcast[first + static_cast<std::size_t>(j++)] != 0) bits |= std::uint64_t{1} << reg;
  }
  return bits;
}
}  // namespace detail

inline std::vector<detail::thunk> function_runtime::bind_thunks(bool reference, bool naive_products) {
  const function_graph& g = *m_graph;
  m_values.assign(g.slots.size(), ndarray{});
  m_out.assign(g.outputs.size(), ndarray{});
  if (m_dest_of_slot.size() != g.slots.size()) m_dest_of_slot.assign(g.slots.size(), nullptr);
  m_dest_slots.assign(g.outputs.size(), -1);
  m_n_dest_slots = 0;
  // Outputs a node may write straight into an into(...) destination: host values computed
  // here, and not an update's new value (that buffer goes to the shared variable).
  m_direct_output.assign(g.outputs.size(), 0);
  for (std::size_t o = 0; o < g.outputs.size(); ++o) {
    const slot& sl = g.slots[static_cast<std::size_t>(g.outputs[o])];
    bool ok = sl.kind == var_kind::apply && !sl.on_device;
    for (auto [t, v] : g.updates) ok &= v != g.outputs[o];
    m_direct_output[o] = ok;
  }
  m_inputs_broadcastable = false;
  for (int in : g.inputs) m_inputs_broadcastable |= g.slots[static_cast<std::size_t>(in)].broadcastable != 0;
  m_pool.free.reserve(g.slots.size());
  for (std::size_t s = 0; s < g.slots.size(); ++s)
    if (g.slots[s].kind == var_kind::constant)
      m_values[s] = g.slots[s].on_device ? detail::device_hooks().to_device(g.slots[s].source->constant)
                                         : g.slots[s].source->constant;
  std::vector<detail::thunk> thunks(g.nodes.size());
  for (const apply_node& n : g.nodes) {
    detail::thunk& t = thunks[static_cast<std::size_t>(n.id)];
    t.node = &n;
    t.pool = &m_pool;
    t.par = m_plan.par;
    t.naive_products = naive_products;
    t.dests = m_dest_of_slot.data();  // DebugMode's reference copies clear it
    for (int in : n.inputs) t.slot_bcast.push_back(g.slots[static_cast<std::size_t>(in)].broadcastable);
    t.out_type = g.slots[static_cast<std::size_t>(n.outputs[0])].type;
    if (n.fn->on_gpu || n.fn->kind == op_kind::transfer) {
      detail::gpu_runtime().bind(t, g, n);
      continue;
    }
    switch (n.fn->kind) {
      case op_kind::elemwise:
      case op_kind::composite: {
        // A single Elemwise op runs as a one-instruction program: one executor for fused and unfused.
        auto prog = detail::node_program(g, n);
        t.prog = reference ? cpu::compile_program<false>(prog) : cpu::compile_program<true>(prog);
        if (!reference) cpu::bind_typed_kernel(t.prog, detail::one_value_inputs(g, n, t));
        t.run = &detail::run_elemwise;
        break;
      }
      case op_kind::one_pass_gemv:
        // The reference runs the three steps: DebugMode checks the one pass against them.
        t.prog = reference ? cpu::compile_program<false>(n.fn->fused) : cpu::compile_program<true>(n.fn->fused);
        if (!reference) {
          const std::uint64_t one_value = detail::one_pass_one_value_inputs(n, t);
          cpu::bind_typed_kernel(t.prog, one_value);
          // g alone, for the blocks of a matrix the caches keep (exec/cpu_nodes.hpp): kept where
          // a typed tree's kernel computes it, or cxx compiles it (compile_kernels).
          t.block_g = std::make_shared<cpu::compiled_program>(
              cpu::compile_program<true>(cpu::detail::output_program(*n.fn->fused, n.fn->pass_g)));
          if (cpu::bind_typed_kernel(*t.block_g, one_value)) cpu::bind_typed_blocks(*t.block_g, one_value);
          else if (m_plan.cxx.empty()) t.block_g.reset();
        }
        t.run = reference ? &detail::run_one_pass_steps : &detail::run_one_pass_gemv;
        break;
      case op_kind::dimshuffle: t.run = &detail::run_dimshuffle; break;
      case op_kind::reduce:
        if (n.fn->fused) {  // careduce_fusion: the inputs are the program's
          t.prog = reference ? cpu::compile_program<false>(n.fn->fused) : cpu::compile_program<true>(n.fn->fused);
          if (!reference) {
            const std::uint64_t one_value = detail::one_value_inputs(g, n, t);
            cpu::bind_typed_kernel(t.prog, one_value);
            cpu::bind_typed_sum(t.prog, one_value);
          }
          t.run = reference ? &detail::run_reduce_steps : &detail::run_reduce_fused;
        } else {
          t.run = naive_products ? &detail::run_reduce_naive : &detail::run_reduce;
        }
        break;
      case op_kind::dot:
      case op_kind::gemv:
      case op_kind::dot22: t.run = naive_products ? &detail::run_dot_family_naive : &detail::run_dot_family; break;
      case op_kind::shape_prod: t.run = &detail::run_shape_prod; break;
      case op_kind::allreduce: t.run = &detail::run_allreduce; break;
      case op_kind::take: t.run = &detail::run_take; break;
      case op_kind::arg_reduce: t.run = &detail::run_arg_reduce; break;
      case op_kind::inc_rows: t.run = &detail::run_inc_rows; break;
      case op_kind::subtensor: t.run = &detail::run_subtensor; break;
      case op_kind::inc_subtensor:
        if (n.fn->fused) {  // set_subtensor_fusion: the program's inputs follow x
          t.prog = reference ? cpu::compile_program<false>(n.fn->fused) : cpu::compile_program<true>(n.fn->fused);
          if (!reference) cpu::bind_typed_kernel(t.prog, detail::one_value_inputs(g, n, t, 1));
          t.run = reference ? &detail::run_inc_subtensor_steps : &detail::run_inc_subtensor_fused;
        } else {
          t.run = &detail::run_inc_subtensor;
        }
        break;
      case op_kind::reshape: t.run = &detail::run_reshape; break;
      case op_kind::join: t.run = &detail::run_join; break;
      case op_kind::join_part: t.run = &detail::run_join_part; break;
      case op_kind::alloc: t.run = &detail::run_alloc; break;
      case op_kind::batched_dot: t.run = &detail::run_batched_dot; break;
      case op_kind::check: t.run = &detail::run_check; break;
      case op_kind::arange: t.run = &detail::run_arange; break;
      case op_kind::cumulative: t.run = &detail::run_cumulative; break;
      case op_kind::transfer: break;  // bound by the GPU backend above
    }
    t.out_type = g.slots[static_cast<std::size_t>(n.outputs[0])].type;
  }
  if (!reference && !m_plan.cxx.empty()) compile_kernels(thunks);
  for (detail::thunk& t : thunks) {
    t.one_element_path = t.run == &detail::run_elemwise && !t.prog.jit[0] && !t.prog.jit[1] &&
                         t.prog.reg_types.size() <= cpu::detail::max_registers && t.node->outputs.size() <= 8 &&
                         !t.node->inputs.empty();
    if (!t.one_element_path) continue;
    for (const cpu::compiled_step& st : t.prog.steps) {
      unsigned inputs = 0;
      for (int j = 0; j < st.arity; ++j)
        if (st.args[j] < t.prog.prog->n_inputs) inputs |= 1u << j;
      t.one_element_inputs.push_back(inputs);
    }
  }
  // With gc, each intermediate is released after its last reader runs.
  const auto clients = g.clients();
  m_dead_after.assign(g.nodes.size(), {});
  std::unordered_set<int> keep(g.outputs.begin(), g.outputs.end());
  for (auto [target, value] : g.updates) keep.insert(value);
  for (std::size_t s = 0; s < g.slots.size(); ++s) {
    if (g.slots[s].kind != var_kind::apply || g.slots[s].owner < 0 || keep.count(static_cast<int>(s))) continue;
    const auto& c = clients[s];
    const int last = c.empty() ? g.slots[s].owner : *std::max_element(c.begin(), c.end());
    m_dead_after[static_cast<std::size_t>(last)].push_back(static_cast<int>(s));
  }
  for (std::size_t s = 0; s < g.slots.size(); ++s)
    if (g.slots[s].owner >= 0 && g.nodes[static_cast<std::size_t>(g.slots[s].owner)].fn->is_view())
      m_view_slots.push_back(static_cast<int>(s));
  m_scratch_ticks.assign(g.nodes.size(), 0);
  return thunks;
}

// cxx: each fused program of two or more steps becomes compiled loops (backend/cpu/jit.hpp),
// one for whole arrays, where the inputs broadcastable in every dimension (constants) are one
// value, and one for row-by-row spans, where those broadcastable in the last dimension are.
inline void function_runtime::compile_kernels(std::vector<detail::thunk>& thunks) {
  const function_graph& g = *m_graph;
  std::vector<cpu::jit_request> requests;
  for (detail::thunk& t : thunks) {
    // One instruction is already one pass of a precompiled kernel.
    if (t.prog.prog == nullptr || t.prog.prog->code.size() < 2) continue;
    cpu::jit_request r{&t.prog, {0, 0}};
    if (t.run == &detail::run_elemwise || t.run == &detail::run_inc_subtensor_fused || t.run == &detail::run_reduce_fused) {
      const std::size_t first = t.run == &detail::run_elemwise ? 0 : 1;  // IncSubtensor's x is not the program's
      r.scalar_bits[0] = detail::one_value_inputs(g, *t.node, t, first);
      for (std::size_t k = first; k < t.node->inputs.size() && k - first < 64; ++k) {  // the rows' one values
        const slot& in = g.slots[static_cast<std::size_t>(t.node->inputs[k])];
        const unsigned last = in.rank > 0 ? 1u << (in.rank - 1) : 0u;
        if ((t.slot_bcast[k] & last) == last) r.scalar_bits[1] |= std::uint64_t{1} << (k - first);
      }
    } else if (t.run == &detail::run_one_pass_gemv) {
      r.scalar_bits[0] = r.scalar_bits[1] = detail::one_pass_one_value_inputs(*t.node, t);
      // g alone (bind_thunks), its loop for the blocks of a matrix the caches keep
      requests.push_back({t.block_g.get(), {r.scalar_bits[0], r.scalar_bits[0]}, true});
    } else {
      continue;
    }
    requests.push_back(r);
  }
  try {
    m_jit = cpu::jit_compile(requests, {m_plan.cxx, m_plan.cxxflags, m_plan.compiledir});
  } catch (const cpu::jit_error& e) {
    throw compile_error("xsym::function '" + m_name + "': " + e.what());
  }
}

// into(...)'s short path (m_direct): decided once, here, from what the call loop would do.
inline void function_runtime::plan_direct() {
  m_direct = {};
  const function_graph& g = *m_graph;
  if (m_is_reference || m_checked || m_plan.gpu || g.nodes.empty() || g.outputs.size() != 1 ||
      !g.updates.empty() || !m_shared_slots.empty() || !m_direct_output[0] || m_inputs_broadcastable)
    return;
  // One elementwise node, after any DimShuffle{x,...} of a rank-0 input that only it reads: a
  // view of the input's one value, which the kernel reads as one value in its place.
  const std::size_t last = g.nodes.size() - 1;
  const auto clients = g.clients();
  auto broadcast_of_input = [&](const apply_node& b) {
    const int out = b.outputs[0];
    return b.fn->kind == op_kind::dimshuffle && b.inputs.size() == 1 && b.outputs.size() == 1 &&
           g.slots[static_cast<std::size_t>(b.inputs[0])].rank == 0 &&
           std::find(g.inputs.begin(), g.inputs.end(), b.inputs[0]) != g.inputs.end() &&
           std::all_of(b.fn->pattern.begin(), b.fn->pattern.end(), [](int d) { return d < 0; }) &&
           clients[static_cast<std::size_t>(out)] == std::vector<int>{static_cast<int>(last)};
  };
  for (std::size_t i = 0; i < last; ++i)
    if (!broadcast_of_input(g.nodes[i])) return;
  const detail::thunk& t = m_thunks[last];
  const apply_node& n = g.nodes[last];
  const cpu::compiled_program& cp = t.prog;
  // The kernel run_span would take for whole arrays, in its order: cxx's loops, a typed
  // kernel, or a lone op's step.
  const bool jit = cp.jit[0] != nullptr;
  const bool typed = !jit && cp.typed && !cp.typed_faulty;
  const bool lone = !jit && !cp.typed && cp.direct && cp.steps.size() == 1;
  if (t.run != &detail::run_elemwise || !(jit || typed || lone) || n.outputs.size() != 1 ||
      n.outputs[0] != g.outputs[0] || n.inputs.size() > limits::max_registers)
    return;
  direct_kernel d;
  d.n_in = static_cast<int>(n.inputs.size());
  d.elem_bytes = cp.out_bytes[0];
  d.bytes_per_element = d.elem_bytes;
  for (int k = 0; k < d.n_in; ++k) {
    const int s = n.inputs[static_cast<std::size_t>(k)];
    const slot& sl = g.slots[static_cast<std::size_t>(s)];
    const bool broadcast = sl.owner >= 0 && static_cast<std::size_t>(sl.owner) < last;  // of a rank-0 input
    const bool one = jit     ? (cp.jit_scalar_bits[0] >> k) & 1u
                     : typed ? (cp.typed_scalar_bits >> k) & 1u
                             : sl.kind == var_kind::constant || broadcast;
    if (sl.type != g.slots[static_cast<std::size_t>(n.outputs[0])].type) return;
    if (one) d.one_value |= std::uint64_t{1} << k;
    if (sl.kind == var_kind::constant) {
      const ndarray& c = m_values[static_cast<std::size_t>(s)];
      if (!one || c.size() != 1) return;
      d.arg[static_cast<std::size_t>(k)] = -1;
      d.constant[static_cast<std::size_t>(k)] = c.data();
      continue;
    }
    const int from = broadcast ? g.nodes[static_cast<std::size_t>(sl.owner)].inputs[0] : s;
    const auto in = std::find(g.inputs.begin(), g.inputs.end(), from);
    const int rank = g.slots[static_cast<std::size_t>(from)].rank;
    if (in == g.inputs.end() || (one && rank != 0) || (!one && rank == 0)) return;
    d.arg[static_cast<std::size_t>(k)] = static_cast<int>(in - g.inputs.begin());
    if (!one) d.bytes_per_element += d.elem_bytes;
  }
  d.max_elements = t.par.threads > 1 ? t.par.elemwise_minsize : std::numeric_limits<std::int64_t>::max();
  if (typed) {
    d.direct = cp.typed_direct;
    for (std::size_t j = 0; j < cp.typed_map.size(); ++j) {
      d.leaves.arg[j] = d.arg[cp.typed_map[j]];
      d.leaves.constant[j] = d.constant[cp.typed_map[j]];
    }
  } else {
    d.step = jit ? nullptr : &cp.steps[0];
    d.jit = jit ? cp.jit[0] : nullptr;
    d.jit_direct = jit ? cp.jit_direct : nullptr;
    d.min_elements = 2;  // one element: run_elemwise_one's path, not the step's
  }
  m_direct = d;
}

XSYM_COLD_END
}  // namespace xsym

#endif
