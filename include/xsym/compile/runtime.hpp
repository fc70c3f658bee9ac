#ifndef XSYM_COMPILE_RUNTIME_HPP
#define XSYM_COMPILE_RUNTIME_HPP

#include <atomic>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "../backend/cpu/blas.hpp"
#include "../backend/cpu/elemwise.hpp"
#include "../backend/cpu/jit.hpp"
#include "../backend/cpu/reduce.hpp"
#include "../backend/cpu/register_kernels.hpp"
#include "../config/cold.hpp"
#include "../graph/fgraph.hpp"
#include "../profile/profile_stats.hpp"
#include "../profile/scope.hpp"
#include "../rewrite/inplace.hpp"
#include "../rewrite/multi_fusion.hpp"
#include "../rewrite/canonicalize.hpp"
#include "../rewrite/gpu_placement.hpp"
#include "checks.hpp"
#include "options.hpp"

namespace xsym {

namespace detail {
namespace testing {
/// Test-only: a rewrite that runs in FAST_RUN after the others and may be deliberately
/// wrong, to prove that DebugMode catches a wrong rewrite.
inline std::function<std::vector<var_ptr>(const std::vector<var_ptr>&)>& extra_fast_run_rewrite() {
  static std::function<std::vector<var_ptr>(const std::vector<var_ptr>&)> f;
  return f;
}
}  // namespace testing

/// The lock that serialises calls of one function: an uncontended lock and unlock are one
/// atomic operation each, inline (std::mutex goes through pthread: ~16 ns per call here);
/// a waiting thread sleeps in the kernel (futex) rather than spinning.
class call_lock {
 public:
  void lock() {
    int expected = 0;
    if (m_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return;
    // 2: locked, and someone may be waiting, so the unlock must wake a waiter.
    while (m_state.exchange(2, std::memory_order_acquire) != 0) m_state.wait(2, std::memory_order_relaxed);
  }
  void unlock() {
    if (m_state.exchange(0, std::memory_order_release) == 2) m_state.notify_one();
  }

 private:
  std::atomic<int> m_state{0};
};

/// Buffers released during a call, handed to later nodes instead of going back to malloc.
struct buffer_pool {
  struct entry {
    std::shared_ptr<std::byte> owner;
    std::size_t capacity;
    bool on_device;
  };
  std::vector<entry> free;

  void give(ndarray& a) {
    if (a.owner() && a.owner().use_count() == 1 && a.capacity() > 0) {
      const std::size_t capacity = a.capacity();
      const bool on_device = a.on_device();
      free.push_back({a.take_owner(), capacity, on_device});  // moved: no reference-count update
      return;
    }
    a.release();
  }
  bool take(ndarray& slot, dtype t, const shape_t& shape, std::size_t bytes, bool on_device = false) {
    for (std::size_t i = 0; i < free.size(); ++i) {
      if (free[i].on_device != on_device || free[i].capacity < bytes || free[i].capacity > 2 * bytes + 64) continue;
      slot = ndarray::in_buffer(t, shape, std::move(free[i].owner), free[i].capacity, on_device);
      free[i] = std::move(free.back());
      free.pop_back();
      return true;
    }
    return false;
  }
};

/// One Apply node bound to its kernel.
struct thunk {
  void (*run)(const thunk&, ndarray* values) = nullptr;
  const apply_node* node = nullptr;
  cpu::compiled_program prog;  // elementwise nodes
  bool one_element_path = false;  // run_elemwise_one may run it (see there)
  std::vector<unsigned> one_element_inputs;  // for it, per step: bit j, argument j is an input
  std::vector<std::uint8_t> slot_bcast;  // inputs' broadcastable patterns
  dtype out_type = dtype::float64;
  cpu::parallelism par;  // openmp=True: threads for large elementwise nodes and products
  buffer_pool* pool = nullptr;
  // Per slot, the caller's memory an output is written into during an into(...) call (null
  // for every slot otherwise); owned by the runtime, null for reference thunks.
  const ndarray* const* dests = nullptr;
  std::shared_ptr<const void> device_state;  // GPU backend: the node's data in device memory
};

/// Per-node device timing (CUDA events), installed by the GPU backend under CUDA.
class device_timer {
 public:
  virtual ~device_timer() = default;
  virtual void node_begin(std::size_t node) = 0;
  virtual void node_end(std::size_t node) = 0;
  /// Waits for the device; replaces the host ticks of device nodes with their device times.
  virtual void collect(std::uint64_t* node_ticks) = 0;
};

/// What the GPU backend adds to the runtime when it is included (null otherwise).
struct gpu_runtime_hooks {
  void (*bind)(thunk& t, const function_graph& g, const apply_node& n) = nullptr;
  std::unique_ptr<device_timer> (*make_timer)(const function_graph& g) = nullptr;
};
inline gpu_runtime_hooks& gpu_runtime() {
  static gpu_runtime_hooks h;
  return h;
}

// Gives `slot` a C-contiguous buffer of that shape, reusing the one it holds when nothing
// else refers to it (so a no-gc function allocates nothing in steady state).
inline void prepare_output(ndarray& slot, dtype t, const shape_t& shape, buffer_pool* pool = nullptr,
                           bool on_device = false) {
  // A warm call: last call's buffer, of this dtype and shape, ours alone.
  if (slot.type() == t && slot.shape() == shape && slot.on_device() == on_device && slot.is_c_contiguous() &&
      slot.owner().use_count() == 1 && slot.data() == slot.owner().get())
    return;
  const auto bytes = static_cast<std::size_t>(shape.size()) * dtype_size(t);
  if (slot.owner() && slot.owner().use_count() == 1 && slot.on_device() == on_device && slot.capacity() >= bytes &&
      slot.capacity() <= 2 * bytes + 64) {
    slot.reuse_buffer(t, shape);
    return;
  }
  if (pool && pool->take(slot, t, shape, bytes, on_device)) return;
  slot = on_device ? ndarray::empty_on_device(t, shape) : ndarray::empty(t, shape);
}

// The caller's memory for this output slot when an into(...) call bound some, with this dtype
// and shape: the slot's own buffer goes to the pool (the next plain call takes it back) and the
// node writes straight into the caller's array. Only ever a host, C-contiguous destination that
// overlaps no input or shared value (the runtime checked when it bound it).
inline bool take_destination(const thunk& t, int slot, ndarray& out, dtype type, const shape_t& shape) {
  if (!t.dests) return false;
  const ndarray* d = t.dests[slot];
  if (!d || d->type() != type || !(d->shape() == shape)) return false;
  if (t.pool && out.owner()) t.pool->give(out);
  out = *d;
  return true;
}

// An elementwise node on either backend: outputs prepared (or an input taken over in place),
// then `exec(ins, outs)` runs the kernel.
template <bool OnDevice, class Exec>
void elemwise_node(const thunk& t, ndarray* values, Exec&& exec) {
  const apply_node& n = *t.node;
  const ndarray* ins[64];
  const std::size_t n_in = n.inputs.size();
  const int* in_slots = n.inputs.data();
  for (std::size_t k = 0; k < n_in; ++k) ins[k] = &values[in_slots[k]];
  const shape_t shape = cpu::broadcast_shape(ins, t.slot_bcast.data(), static_cast<int>(n_in));
  if (n.outputs.size() > 8) throw std::logic_error("xsym: a fused node has more than 8 outputs");
  ndarray* outs[8] = {};
  ndarray* destroyed = nullptr;
  ndarray spare;  // only an in-place node uses it
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    ndarray& out = values[n.outputs[o]];
    if constexpr (!OnDevice) {
      if (take_destination(t, n.outputs[o], out,
                           t.prog.prog->reg_types[static_cast<std::size_t>(t.prog.prog->outputs[o])], shape)) {
        outs[o] = &out;
        continue;
      }
    }
    if (o == 0 && !n.fn->destroy_map.empty()) {
      // The input dies here: take its buffer when it has the output's shape and is ours alone.
      ndarray& victim = values[n.inputs[static_cast<std::size_t>(n.fn->destroy_map[0].second)]];
      if (victim.shape() == shape && victim.is_c_contiguous() && victim.owner() && victim.owner().use_count() == 1) {
        spare = std::move(out);  // the buffer this output had goes to the input's producer
        out = victim;            // the input is still read below; it is replaced once the node has run
        destroyed = &victim;
        outs[o] = &out;
        continue;
      }
    }
    prepare_output(out, t.prog.prog->reg_types[static_cast<std::size_t>(t.prog.prog->outputs[o])], shape, t.pool,
                   OnDevice);
    outs[o] = &out;
  }
  exec(ins, outs);
  // The consumed input's slot keeps the spare buffer, so its producer reuses it next call.
  if (destroyed) *destroyed = std::move(spare);
}

// Copies a value into a destination in the caller's memory (same dtype and shape, any strides),
// unless the node already wrote it there.
inline void copy_into_destination(const ndarray& value, const ndarray& dst) {
  if (value.size() == 0) return;
  // Written in place, or the output is the very array the caller passed. Checked before
  // on_host, whose copy costs two reference-count updates per call; a device value never is.
  bool same = !value.on_device() && value.data() == dst.data();
  for (int d = 0; same && d < dst.rank(); ++d) same = dst.shape(d) == 1 || value.stride(d) == dst.stride(d);
  if (same) return;
  ndarray src = on_host(value);
  if (overlaps(src, dst)) src = deep_copy(src);  // e.g. an input's transpose written back into that input
  const std::size_t es = dtype_size(dst.type());
  if (src.is_c_contiguous() && dst.is_c_contiguous()) {
    if (src.nbytes()) std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  const ndarray c = src.contiguous();
  const std::byte* p = c.data();
  for_each_offset(dst.shape(), dst.strides(), [&](std::int64_t off) {
    std::memcpy(dst.data() + off * static_cast<std::int64_t>(es), p, es);
    p += es;
  });
}

// Every input one element (a function of scalars held in arrays, as in the seeds' call-overhead
// example): the steps run once, on the kernels run_program would call with n = 1, so the
// results are the same bits, without broadcasting, span or block bookkeeping. An in-place node
// writes its own buffer here (for one element, taking over its input's saves nothing; the
// update of a shared scalar, b - 0.01 * gb, is one). Compiled (cxx) programs and any input of
// more than one element take the general path.
inline bool run_elemwise_one(const thunk& t, ndarray* values) {
  const cpu::compiled_program& cp = t.prog;
  const apply_node& n = *t.node;
  const std::size_t n_in = n.inputs.size();
  const ndarray& first = values[n.inputs[0]];
  const int rank = first.rank();
  const void* reg[cpu::detail::max_registers];
  for (std::size_t k = 0; k < n_in; ++k) {
    const ndarray& a = values[n.inputs[k]];
    if (a.rank() != rank || a.size() != 1) return false;
    reg[k] = a.data();
  }
  const program& p = *cp.prog;
  ndarray* outs[8];
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    ndarray& out = values[n.outputs[o]];
    const dtype type = p.reg_types[static_cast<std::size_t>(p.outputs[o])];
    if (!take_destination(t, n.outputs[o], out, type, first.shape())) prepare_output(out, type, first.shape(), t.pool);
    outs[o] = &out;
  }
  alignas(8) unsigned char scratch[cpu::detail::max_registers][8];
  const void* args[cpu::detail::max_chain_links + 1];
  const unsigned* input_args = t.one_element_inputs.data();  // per step, its arguments that are inputs
  for (const cpu::compiled_step& st : cp.steps) {
    const unsigned mask = *input_args++;
    for (int j = 0; j < st.arity; ++j) args[j] = (mask >> j) & 1u ? reg[st.args[j]] : scratch[st.args[j]];
    if (!st.chain) st.kernel(scratch[st.dst], args, mask, 1);
    else st.chain_one(scratch[st.dst], args, st.chain_codes, st.links);
  }
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    const auto r = static_cast<std::size_t>(p.outputs[o]);
    const void* from = r < n_in ? reg[r] : scratch[r];
    std::byte* to = outs[o]->data();
    switch (cp.out_bytes[o]) {  // a fixed-size copy is a move, not a call
      case 8: std::memcpy(to, from, 8); break;
      case 4: std::memcpy(to, from, 4); break;
      case 1: std::memcpy(to, from, 1); break;
      default: std::memcpy(to, from, static_cast<std::size_t>(cp.out_bytes[o])); break;
    }
  }
  return true;
}

inline void run_elemwise(const thunk& t, ndarray* values) {
  if (t.one_element_path && run_elemwise_one(t, values)) return;
  elemwise_node<false>(t, values, [&](const ndarray* const* ins, ndarray* const* outs) { cpu::run_program(t.prog, ins, outs, t.par); });
}

inline void run_dimshuffle(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  const auto& pattern = n.fn->pattern;
  shape_t s;
  s.rank = static_cast<int>(pattern.size());
  std::array<std::int64_t, max_rank> st{};
  for (int i = 0; i < s.rank; ++i) {
    const int p = pattern[static_cast<std::size_t>(i)];
    s[i] = p < 0 ? 1 : in.shape(p);
    st[static_cast<std::size_t>(i)] = p < 0 ? 0 : in.stride(p);
  }
  values[n.outputs[0]] = in.view(s, st);
}

inline void run_reduce(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  shape_t s;
  const auto& axes = n.fn->axes;
  for (int d = 0; d < in.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) s[s.rank++] = in.shape(d);
  ndarray& out = values[n.outputs[0]];
  const dtype type = t.node->fn->reduction == reduce_op::mean || t.node->fn->reduction == reduce_op::sum ||
                             t.node->fn->reduction == reduce_op::prod
                         ? reduce_result_type(n.fn->reduction, in.type())
                         : in.type();
  if (!take_destination(t, n.outputs[0], out, type, s)) prepare_output(out, type, s, t.pool);
  cpu::run_reduce(*n.fn, in, out);
}

inline void run_dot_family(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& a = values[n.inputs[0]];
  const ndarray& b = values[n.inputs[1]];
  ndarray& out = values[n.outputs[0]];
  const op& o = *n.fn;
  shape_t s;
  if (o.kind == op_kind::dot22 && o.accumulate) {
    // out = y0 + alpha * A B, in y0's buffer when it dies here.
    const ndarray& y0 = values[n.inputs[0]];
    const ndarray& A = values[n.inputs[1]];
    const ndarray& B = values[n.inputs[2]];
    if (y0.rank() != 2 || y0.shape(0) != A.shape(0) || y0.shape(1) != B.shape(1))
      throw shape_error("Gemm: the accumulated matrix has shape " + to_string(y0.shape()) + " but the product is " +
                        std::to_string(A.shape(0)) + " x " + std::to_string(B.shape(1)));
    ndarray& y0_slot = values[n.inputs[0]];
    if (o.is_inplace() && y0.is_c_contiguous() && y0.owner() && y0.owner().use_count() == 1) {
      out = std::move(y0_slot);
    } else {
      prepare_output(out, y0.type(), y0.shape(), t.pool);
      const ndarray c = y0.contiguous();
      if (out.nbytes()) std::memcpy(out.data(), c.data(), out.nbytes());  // an empty y0 may have no buffer
    }
    cpu::run_dot22(A, B, out, o.alpha, true);
  } else if (o.kind == op_kind::gemv && o.accumulate) {
    // out = beta * y0 + alpha * op(A) x, in y0's buffer when it dies here; else y0 is read
    // where it is (a shared variable's value, weight decay folded in as beta: no copy of it).
    const ndarray& y0 = values[n.inputs[0]];
    const ndarray& A = values[n.inputs[1]];
    const ndarray& xv = values[n.inputs[2]];
    const std::int64_t m = o.transpose_a ? A.shape(1) : A.shape(0);
    if (y0.rank() != 1 || y0.shape(0) != m)
      throw shape_error("Gemv: the accumulated vector has shape " + to_string(y0.shape()) + " but the product has " +
                        std::to_string(m) + " rows");
    ndarray& y0_slot = values[n.inputs[0]];
    if (o.is_inplace() && y0.is_c_contiguous() && y0.owner() && y0.owner().use_count() == 1) {
      out = std::move(y0_slot);
      cpu::run_gemv(A, o.transpose_a, xv, out, o.alpha, true, t.par, nullptr, o.beta);
    } else {
      s.rank = 1;
      s[0] = m;
      prepare_output(out, y0.type(), s, t.pool);
      ndarray y0_copy;
      const ndarray& c = y0.is_c_contiguous() ? y0 : (y0_copy = y0.contiguous());
      cpu::run_gemv(A, o.transpose_a, xv, out, o.alpha, true, t.par, &c, o.beta);
    }
  } else if (o.kind == op_kind::gemv) {
    s.rank = 1;
    s[0] = o.transpose_a ? a.shape(1) : a.shape(0);
    prepare_output(out, a.type(), s, t.pool);
    cpu::run_gemv(a, o.transpose_a, b, out, 1.0, false, t.par);
  } else if (a.rank() == 1 && b.rank() == 1) {
    prepare_output(out, a.type(), s, t.pool);
    cpu::run_dot(a, b, out);
  } else if (a.rank() == 2 && b.rank() == 1) {
    s.rank = 1;
    s[0] = a.shape(0);
    prepare_output(out, a.type(), s, t.pool);
    cpu::run_gemv(a, false, b, out, 1.0, false, t.par);
  } else if (a.rank() == 1 && b.rank() == 2) {
    s.rank = 1;
    s[0] = b.shape(1);
    prepare_output(out, a.type(), s, t.pool);
    cpu::run_gemv(b, true, a, out, 1.0, false, t.par);
  } else {
    s.rank = 2;
    s[0] = a.shape(0);
    s[1] = b.shape(1);
    prepare_output(out, a.type(), s, t.pool);
    cpu::run_dot22(a, b, out);
  }
}

inline void run_shape_prod(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  std::int64_t count = 1;
  for (int a : n.fn->axes) count *= in.shape(a);
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, shape_t{}, t.pool);
  xsym::detail::visit_dtype(out.type(), [&](auto z) { *out.data_as<decltype(z)>() = static_cast<decltype(z)>(count); });
}

}  // namespace detail

/// @brief A built function: its graph, one thunk per Apply node, and the values between them.
class function_runtime {
 public:
  /// @brief Rewrites the graph of outputs and updates, then binds one thunk per Apply node.
  function_runtime(std::string name, const std::vector<var_ptr>& input_vars, const std::vector<var_ptr>& output_vars,
                   const std::vector<std::pair<var_ptr, var_ptr>>& update_vars, const function_options& options);

  const function_graph& graph() const { return *m_graph; }
  const std::string& name() const { return m_name; }
  const std::shared_ptr<profile_stats>& stats() const { return m_stats; }
  const detail::resolved_plan& plan() const { return m_plan; }
  /// @brief What cxx did for this function: kernels compiled, whether from the cache, the library.
  const cpu::jit_stats& compiled_kernels() const { return m_jit; }

  /// @brief Runs the function on args (one per input, in order) and returns convert(outputs),
  /// called while the function's buffers are still reserved for this call.
  template <class Convert>
  auto call(const ndarray* args, Convert&& convert) {
    return call_with(
        [args](ndarray* values, const std::vector<int>& inputs) {
          for (std::size_t i = 0; i < inputs.size(); ++i) values[inputs[i]] = args[i];
        },
        std::forward<Convert>(convert));
  }

  /// @brief As call, but bind(values, input_slots) writes input i's value straight into
  /// values[input_slots[i]] under the lock (no array of arguments is built and copied).
  /// When bind or an input check throws, no node has run and the inputs are released.
  template <class Bind, class Convert>
  auto call_with(Bind&& bind, Convert&& convert, const ndarray* dests = nullptr) {
    std::lock_guard lock(m_mutex);
    // One predictable branch when profiling is off; nothing at all when compiled out.
    const bool timed = profiling_compiled_in && (m_profile || detail::any_scope_active());
    const std::uint64_t c0 = timed ? detail::ticks() : 0;
    ndarray* values = m_values.data();
    try {
      bind(values, m_graph->inputs);
      for (std::size_t i = 0; m_inputs_broadcastable && i < m_graph->inputs.size(); ++i) {
        const slot& s = m_graph->slots[static_cast<std::size_t>(m_graph->inputs[i])];
        if (!s.broadcastable) continue;
        const ndarray& a = values[m_graph->inputs[i]];
        for (int d = 0; d < s.rank; ++d)
          if (((s.broadcastable >> d) & 1u) && a.shape(d) != 1) throw_not_broadcastable(i, d, a.shape());
      }
    } catch (...) {
      release_after_call();
      throw;
    }
    const bool memory = m_profile && m_profile->memory;
    const std::int64_t mem0 = memory ? allocated().current : 0;
    if (memory) reset_peak_memory();
    const auto device_allocated = m_plan.gpu ? detail::device_hooks().allocated : nullptr;
    const std::int64_t device_mem0 = memory && device_allocated ? device_allocated().current : 0;
    const bool sample = timed && (m_sample_calls & (m_sample_calls - 1)) == 0;
    read_shared(values);
    if (dests) {
      try {
        bind_destinations(dests);
      } catch (...) {
        release_after_call();
        throw;
      }
    }
    std::size_t i = 0;
    try {
      if (timed) {
        const std::uint64_t f0 = detail::ticks();
        m_fn_start = f0;
        std::uint64_t t = f0;
        for (; i < m_thunks.size(); ++i) {
          if (sample) record_shapes(i, values, true);  // before: an in-place node consumes its input
          if (m_device_timer) m_device_timer->node_begin(i);
          m_thunks[i].run(m_thunks[i], values);
          if (m_device_timer) m_device_timer->node_end(i);
          const std::uint64_t t1 = detail::ticks();
          m_scratch_ticks[i] = t1 - t;
          if (sample) record_shapes(i, values, false);
          if (m_plan.gc) release_dead(i);
          t = sample ? detail::ticks() : t1;
        }
        if (m_device_timer) m_device_timer->collect(m_scratch_ticks.data());
        m_fn_ticks_last = t - f0;
      } else if (m_checked) {
        std::vector<ndarray> args;  // DebugMode runs the unoptimised twin on the same arguments
        if (m_plan.debug)
          for (int s : m_graph->inputs) args.push_back(values[s]);
        if (m_plan.nan_guard) guard_inputs(values);
        for (; i < m_thunks.size(); ++i) {
          run_checked(i, values);
          if (m_plan.gc) release_dead(i);
        }
        if (m_plan.debug) check_against_reference(args.data(), values);
      } else {
        for (; i < m_thunks.size(); ++i) {
          m_thunks[i].run(m_thunks[i], values);
          if (m_plan.gc) release_dead(i);
        }
      }
    } catch (const debug_mode_error&) {
      release_all_but_constants();
      throw;
    } catch (const nan_guard_error&) {
      release_all_but_constants();
      throw;
    } catch (const std::exception& e) {
      release_all_but_constants();
      throw_node_error(i, e);
    }
    // One output is read in place; several are gathered (their slots need not be adjacent).
    auto result = [&] {
      try {
        if (m_graph->outputs.size() == 1) return convert(static_cast<const ndarray*>(&values[m_graph->outputs[0]]));
        for (std::size_t o = 0; o < m_graph->outputs.size(); ++o) m_out[o] = values[m_graph->outputs[o]];
        auto r = convert(static_cast<const ndarray*>(m_out.data()));
        for (auto& o : m_out) o.release();
        return r;
      } catch (...) {
        // Nothing is updated; nothing keeps a pointer to the caller's memory.
        for (auto& o : m_out) o.release();
        release_after_call();
        throw;
      }
    }();
    if (!m_is_reference && (!m_shared_slots.empty() || !m_graph->updates.empty())) apply_updates(values);
    release_after_call();
    if (timed) {
      if (memory) m_profile->measured_peak_bytes = std::max(m_profile->measured_peak_bytes, allocated().peak - mem0);
      if (memory && device_allocated)
        m_profile->measured_device_peak_bytes =
            std::max(m_profile->measured_device_peak_bytes, device_allocated().peak - device_mem0);
      const std::uint64_t call_ticks = detail::ticks() - c0;
      ++m_sample_calls;
      if (m_profile) record_call(*m_profile, call_ticks, sample);
      detail::for_each_active_scope([&](profile_scope& scope) {
        function_profile& p = scope.record_for(this, m_name, m_graph, m_scope_model);
        record_call(p, call_ticks, sample || p.calls == 0);
      });
    }
    return result;
  }

  /// @brief Runs the function and writes output o into dests[o] (host arrays in the caller's
  /// memory, any strides, each of its output's dtype and rank). An output whose node can write
  /// it straight into its destination does so (no copy); the others are copied in at the end.
  /// Throws shape_error (and updates nothing) when a destination's shape differs from its
  /// output's, std::invalid_argument when two destinations share memory.
  template <class Bind>
  void call_into(Bind&& bind, const ndarray* dests) {
    call_with(
        std::forward<Bind>(bind), [&](const ndarray* out) { return finish_into(out, dests); }, dests);
  }

 private:
  // Marks the outputs that their nodes may write straight into the caller's memory: host,
  // C-contiguous, of the output's dtype, not an update's new value (that buffer goes to the
  // shared variable), and overlapping no input or shared value (a node would overwrite what a
  // later node still reads). The others are copied in by finish_into.
  void bind_destinations(const ndarray* dests) {
    const auto& outs = m_graph->outputs;
    for (std::size_t o = 0; o < outs.size(); ++o) {
      const ndarray& d = dests[o];
      const detail::byte_range range = detail::bytes_of(d);
      for (std::size_t p = 0; p < o; ++p)
        if (range.overlaps(detail::bytes_of(dests[p])))
          throw std::invalid_argument("xsym: function '" + m_name + "': into(...): the destinations of outputs " +
                                      std::to_string(p) + " and " + std::to_string(o) + " share memory");
      const int s = outs[o];
      const slot& sl = m_graph->slots[static_cast<std::size_t>(s)];
      if (!m_direct_output[o] || m_dest_of_slot[static_cast<std::size_t>(s)] || d.type() != sl.type ||
          range.lo == range.hi || !d.is_c_contiguous())
        continue;
      bool ok = true;
      for (int in : m_graph->inputs) ok = ok && !range.overlaps(detail::bytes_of(m_values[static_cast<std::size_t>(in)]));
      for (int sh : m_shared_slots)
        ok = ok && !range.overlaps(detail::bytes_of(m_values[static_cast<std::size_t>(sh)]));
      if (!ok) continue;
      m_dest_of_slot[static_cast<std::size_t>(s)] = &d;
      m_dest_slots[m_n_dest_slots++] = s;
    }
  }

  // Copies the outputs that were not written in place into their destinations (after checking
  // every shape, so a wrong one leaves the others untouched where they were not written yet).
  int finish_into(const ndarray* out, const ndarray* dests) {
    const std::size_t n = m_graph->outputs.size();
    for (std::size_t o = 0; o < n; ++o)
      if (!(out[o].shape() == dests[o].shape()))
        throw shape_error("xsym: function '" + m_name + "': output " + std::to_string(o) + " has shape " +
                          to_string(out[o].shape()) + " but its destination in into(...) has shape " +
                          to_string(dests[o].shape()) + " (a destination is not resized: give it the output's shape)");
    if (n == 1) {
      detail::copy_into_destination(out[0], dests[0]);
      return 0;
    }
    // An output read from memory that another destination receives (an input passed through,
    // or a view of one, whose array is also a destination) is taken aside before any is written.
    std::vector<ndarray> aside;
    for (std::size_t o = 0; o < n; ++o)
      for (std::size_t p = 0; p < n; ++p)
        if (p != o && detail::overlaps(out[o], dests[p])) {
          if (aside.empty()) aside.resize(n);
          aside[o] = detail::deep_copy(detail::on_host(out[o]));
          break;
        }
    for (std::size_t o = 0; o < n; ++o)
      detail::copy_into_destination(aside.empty() || !aside[o].has_value() ? out[o] : aside[o], dests[o]);
    return 0;
  }

  XSYM_COLD_BEGIN  // building: once per function
  void build_graph(const std::vector<var_ptr>& input_vars, const std::vector<var_ptr>& roots, std::size_t n_outputs,
                   const std::vector<std::pair<var_ptr, var_ptr>>& update_vars, const function_options& options) {
    auto g = std::make_shared<function_graph>();
    std::unordered_map<std::uint64_t, int> slot_of;
    auto add_slot = [&](const var_ptr& v) {
      slot s;
      s.type = v->type;
      s.rank = v->rank;
      s.broadcastable = v->broadcastable;
      s.kind = v->kind;
      s.name = v->name;
      s.source = v;
      g->slots.push_back(std::move(s));
      const int id = static_cast<int>(g->slots.size()) - 1;
      slot_of[v->id] = id;
      return id;
    };
    std::unordered_set<std::uint64_t> declared;
    for (std::size_t i = 0; i < input_vars.size(); ++i) {
      const var_ptr& v = input_vars[i];
      if (v->kind != var_kind::input)
        throw compile_error("xsym::function '" + m_name + "': inputs(...) entry " + std::to_string(i) + " ('" +
                            v->name + "') is not a symbolic input (a shared variable, constant or expression)");
      if (!declared.insert(v->id).second)
        throw compile_error("xsym::function '" + m_name + "': input '" + v->name + "' is listed twice");
      g->inputs.push_back(add_slot(v));
    }
    for (const var_ptr& v : detail::topo_order(roots)) {
      if (slot_of.count(v->id)) continue;
      if (v->kind == var_kind::input)
        throw compile_error("xsym::function '" + m_name + "': the outputs depend on input '" + v->name +
                            "', which is not in inputs(...)");
      const int s = add_slot(v);
      if (v->kind == var_kind::shared) m_shared_slots.push_back(s);
      if (v->kind != var_kind::apply) continue;
      apply_node n;
      n.id = static_cast<int>(g->nodes.size());
      n.fn = v->fn;
      for (const auto& in : v->inputs) n.inputs.push_back(slot_of.at(in->id));
      n.outputs.push_back(s);
      g->slots[static_cast<std::size_t>(s)].owner = n.id;
      g->nodes.push_back(std::move(n));
    }
    if (!options.ignore_unused_inputs) {
      const auto clients = g->clients();
      for (std::size_t i = 0; i < input_vars.size(); ++i) {
        const int s = g->inputs[i];
        const bool is_output = std::find(roots.begin(), roots.end(), input_vars[i]) != roots.end();
        if (clients[static_cast<std::size_t>(s)].empty() && !is_output)
          throw compile_error("xsym::function '" + m_name + "': input '" + input_vars[i]->name +
                              "' is not used by any output or update (pass xsym::ignore_unused_inputs{} to allow it)");
      }
    }
    for (std::size_t o = 0; o < n_outputs; ++o) g->outputs.push_back(slot_of.at(roots[o]->id));
    std::unordered_set<std::uint64_t> targets;
    for (std::size_t u = 0; u < update_vars.size(); ++u) {
      const var_ptr& target = update_vars[u].first;
      if (target->kind != var_kind::shared)
        throw compile_error("xsym::function '" + m_name + "': update target '" + target->name + "' is not a shared variable");
      if (!targets.insert(target->id).second)
        throw compile_error("xsym::function '" + m_name + "': shared variable '" + target->name + "' is updated twice");
      int ts;
      if (auto it = slot_of.find(target->id); it != slot_of.end()) {
        ts = it->second;
      } else {
        ts = add_slot(target);
      }
      g->updates.push_back({ts, slot_of.at(roots[n_outputs + u]->id)});
    }
    m_graph = std::move(g);
  }

  std::vector<detail::thunk> bind_thunks(bool reference) {
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
          t.run = &detail::run_elemwise;
          break;
        }
        case op_kind::dimshuffle: t.run = &detail::run_dimshuffle; break;
        case op_kind::reduce: t.run = &detail::run_reduce; break;
        case op_kind::dot:
        case op_kind::gemv:
        case op_kind::dot22: t.run = &detail::run_dot_family; break;
        case op_kind::shape_prod: t.run = &detail::run_shape_prod; break;
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
  void compile_kernels(std::vector<detail::thunk>& thunks) {
    const function_graph& g = *m_graph;
    std::vector<cpu::jit_request> requests;
    for (detail::thunk& t : thunks) {
      // One instruction is already one pass of a precompiled kernel.
      if (t.run != &detail::run_elemwise || t.prog.prog->code.size() < 2) continue;
      cpu::jit_request r{&t.prog, {0, 0}};
      for (std::size_t k = 0; k < t.node->inputs.size() && k < 64; ++k) {
        const slot& in = g.slots[static_cast<std::size_t>(t.node->inputs[k])];
        const unsigned all = (1u << in.rank) - 1u, last = in.rank > 0 ? 1u << (in.rank - 1) : 0u;
        if ((t.slot_bcast[k] & all) == all) r.scalar_bits[0] |= std::uint64_t{1} << k;
        if ((t.slot_bcast[k] & last) == last) r.scalar_bits[1] |= std::uint64_t{1} << k;
      }
      requests.push_back(r);
    }
    try {
      m_jit = cpu::jit_compile(requests, {m_plan.cxx, m_plan.cxxflags, m_plan.compiledir});
    } catch (const cpu::jit_error& e) {
      throw compile_error("xsym::function '" + m_name + "': " + e.what());
    }
  }
  XSYM_COLD_END

  void release_dead(std::size_t node) {
    for (int s : m_dead_after[node]) m_pool.give(m_values[static_cast<std::size_t>(s)]);
  }

  // Inputs, shared values and views are not kept: a kept reference would pin user memory or
  // stop buffer reuse.
  void release_after_call() {
    release_destinations();
    for (int s : m_graph->inputs) m_values[static_cast<std::size_t>(s)].release();
    for (int s : m_shared_slots) m_values[static_cast<std::size_t>(s)].release();
    for (int s : m_view_slots) m_values[static_cast<std::size_t>(s)].release();
    // Output buffers are kept for the next call (they are results, not intermediates), and so
    // are the pooled ones: the next call reuses them instead of asking malloc (and the kernel,
    // for large buffers) again. Within a call, gc still bounds the peak.
  }

  // Slots that held the caller's memory during an into(...) call keep no pointer to it.
  void release_destinations() {
    for (std::size_t i = 0; i < m_n_dest_slots; ++i) {
      const auto s = static_cast<std::size_t>(m_dest_slots[i]);
      m_values[s].release();
      m_dest_of_slot[s] = nullptr;
    }
    m_n_dest_slots = 0;
  }

  void release_all_but_constants() {
    release_destinations();
    for (std::size_t s = 0; s < m_values.size(); ++s)
      if (m_graph->slots[s].kind != var_kind::constant) m_values[s].release();
  }

  // Every update is computed before any is applied: values read the old shared state.
  void apply_updates(ndarray* values) {
    // This call's references to shared values are done with (unless one is itself an update
    // value): dropping them lets an old buffer be recognised as ours alone and reused.
    for (int s : m_shared_slots) {
      bool is_value = false;
      for (auto [t, v] : m_graph->updates) is_value |= v == s;
      if (!is_value) values[s].release();
    }
    for (auto [target, value] : m_graph->updates) {
      auto& sv = *m_graph->slots[static_cast<std::size_t>(target)].source->shared;
      ndarray& v = values[value];
      const bool owned_here = m_graph->slots[static_cast<std::size_t>(value)].kind == var_kind::apply && v.owner() &&
                              v.owner().use_count() == 1 && v.is_c_contiguous();
      std::lock_guard lock(sv.mutex);
      if (owned_here) {
        // Hand the fresh buffer to the shared variable and keep the old one for the next call.
        ndarray old = std::move(sv.value);
        sv.value = std::move(v);
        // The old value was readable by other threads: it is reused only when theirs are done.
        const bool reusable = detail::sole_owner_after_others(old.owner());
        if (!m_plan.gc && reusable) {
          v = std::move(old);
        } else {
          v.release();
          // With gc, the old buffer goes to the pool: the node whose buffer became the new
          // value (an in-place product, say) takes it next call instead of asking malloc.
          if (m_plan.gc && reusable) m_pool.give(old);
        }
      } else if (v.on_device()) {
        sv.value = detail::device_hooks().copy_on_device(v);  // a fresh buffer: never alias another value
      } else {
        sv.value = v.contiguous();
        if (sv.value.owner() == v.owner()) sv.value = detail::cast_array(v, v.type());  // never alias another value
      }
    }
  }

  // Each shared variable's current value into its slot, under the variable's lock: set_value
  // and other functions' updates replace it concurrently. The value moves to where this
  // function reads it first: to the device once (it stays there, as Theano's GPU shared
  // variables do), or a host copy for a CPU function.
  void read_shared(ndarray* values) {
    for (int s : m_shared_slots) {
      auto& sv = *m_graph->slots[static_cast<std::size_t>(s)].source->shared;
      std::lock_guard lock(sv.mutex);
      if (m_graph->slots[static_cast<std::size_t>(s)].on_device != sv.value.on_device()) place_shared(s, sv);
      values[s] = sv.value;
    }
  }

  // Called with sv's lock held.
  void place_shared(int s, shared_value& sv) {
    if (m_graph->slots[static_cast<std::size_t>(s)].on_device) {
      if (!sv.value.on_device()) sv.value = detail::device_hooks().to_device(sv.value);
    } else if (sv.value.on_device()) {
      sv.value = detail::device_hooks().to_host(sv.value);
    }
  }

  node_event event_for(std::size_t i, const ndarray* values, bool with_outputs) const {
    node_event e;
    e.graph = m_graph.get();
    e.node = &m_graph->nodes[i];
    for (int s : e.node->inputs) e.inputs.push_back(&values[s]);
    if (with_outputs)
      for (int s : e.node->outputs) e.outputs.push_back(&values[s]);
    return e;
  }

  // One node under DebugMode, NanGuardMode or MonitorMode.
  void run_checked(std::size_t i, ndarray* values) {
    const apply_node& n = m_graph->nodes[i];
    if (m_monitor_pre) m_monitor_pre(event_for(i, values, false));
    else if (m_plan.monitor && !m_monitor_post) print_monitor(i, values, false);
    std::vector<ndarray> snapshot, ref_in;
    if (m_plan.debug)
      for (int s : n.inputs) {
        snapshot.push_back(detail::deep_copy(values[s]));
        ref_in.push_back(detail::deep_copy(values[s]));
      }
    m_thunks[i].run(m_thunks[i], values);
    if (m_plan.debug) debug_check_node(i, values, snapshot, ref_in);
    if (m_plan.nan_guard) guard_outputs(i, values);
    if (m_monitor_post) m_monitor_post(event_for(i, values, true));
    else if (m_plan.monitor && !m_monitor_pre) print_monitor(i, values, true);
  }

  XSYM_COLD_BEGIN  // DebugMode and MonitorMode: checking, not speed
  // Flag-only MonitorMode: each node and a summary of its values on stderr.
  void print_monitor(std::size_t i, const ndarray* values, bool after) const {
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

  [[noreturn]] void debug_fail(std::size_t i, const ndarray* values, const std::string& what) const {
    const apply_node& n = m_graph->nodes[i];
    std::string shapes;
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      shapes += (k ? ", " : "") + to_string(values[n.inputs[k]].shape());
    throw debug_mode_error("xsym DebugMode: function '" + m_name + "', Apply node " + std::to_string(i) + " " +
                           m_graph->node_text(n) + " (input shapes " + shapes + "): " + what);
  }

  // |beta y0| + |alpha| |op(A)| |x| for a product node (y0 when it accumulates), from the reference
  // kernels run on absolute values; an empty array for any other node.
  ndarray product_scale(std::size_t i, const std::vector<ndarray>& ref_in) const {
    const apply_node& n = m_graph->nodes[i];
    const op& o = *n.fn;
    const bool product = o.kind == op_kind::dot || o.kind == op_kind::gemv || o.kind == op_kind::dot22;
    if (!product || n.outputs.size() != 1 || !is_float(ref_in[0].type())) return {};
    const bool accumulates = o.accumulate && (o.kind == op_kind::gemv || o.kind == op_kind::dot22);
    std::vector<ndarray> ref_values(m_graph->slots.size());
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      ndarray a;
      ref_in[k].copy_contiguous_into(a);
      xsym::detail::visit_dtype(a.type(), [&](auto z) {
        using T = decltype(z);
        if constexpr (std::is_floating_point_v<T>) {
          T* p = a.data_as<T>();
          for (std::int64_t e = 0; e < a.size(); ++e) p[e] = accumulates && k == 0 ? T(0) : std::abs(p[e]);
        }
      });
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

  void debug_check_node(std::size_t i, ndarray* values, const std::vector<ndarray>& snapshot, std::vector<ndarray>& ref_in) {
    const apply_node& n = m_graph->nodes[i];
    // The same node with the reference kernels, on copies of its inputs.
    std::vector<ndarray> ref_values(m_graph->slots.size());
    for (std::size_t k = 0; k < n.inputs.size(); ++k) ref_values[static_cast<std::size_t>(n.inputs[k])] = ref_in[k];
    detail::thunk ref = m_ref_thunks[i];
    ref.pool = nullptr;
    ref.dests = nullptr;
    ref.run(ref, ref_values.data());
    const ndarray scale = product_scale(i, ref_in);
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      const ndarray& got = values[n.outputs[o]];
      const ndarray& want = ref_values[static_cast<std::size_t>(n.outputs[o])];
      if (auto m = detail::compare_arrays(got, want, scale.data() && o == 0 ? &scale : nullptr))
        debug_fail(i, values, "output " + std::to_string(o) + " differs from the reference kernels: " +
                                  detail::describe_mismatch(got, *m));
      if (m_plan.check_isfinite)
        for (int what : {0, 1})
          if (const auto bad = detail::first_bad(got, what); bad >= 0)
            debug_fail(i, values, "output " + std::to_string(o) + " has " + (what ? "Inf" : "NaN") + " at index " +
                                      detail::index_text(got.shape(), bad) + " (DebugMode.check_isfinite)");
    }
    // Inputs outside the destroy map must be untouched.
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      bool destroyed = false;
      for (auto [o, in] : n.fn->destroy_map) destroyed |= in == static_cast<int>(k);
      if (destroyed) continue;
      const ndarray& now = values[n.inputs[k]];
      if (!now.has_value()) continue;
      if (auto m = detail::compare_arrays(now, snapshot[k]); m && (m->layout || m->max_abs > 0))
        debug_fail(i, values, "input " + std::to_string(k) + " changed although the node does not declare it destroyed: " +
                                  detail::describe_mismatch(now, *m));
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

  void guard_inputs(const ndarray* values) const {
    auto check = [&](int s, const std::string& what) {
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

  void guard_outputs(std::size_t i, const ndarray* values) const {
    const apply_node& n = m_graph->nodes[i];
    const char* names[3] = {"NaN", "Inf", "a value above 1e10 in magnitude"};
    for (std::size_t o = 0; o < n.outputs.size(); ++o)
      for (int w = 0; w < 3; ++w)
        if (m_plan.guard[static_cast<std::size_t>(w)])
          if (const auto bad = detail::first_bad(values[n.outputs[o]], w); bad >= 0)
            throw nan_guard_error("xsym NanGuardMode: function '" + m_name + "', Apply node " + std::to_string(i) + " " +
                                  m_graph->node_text(n) + " produced " + names[w] + " in output " + std::to_string(o) +
                                  " at index " + detail::index_text(values[n.outputs[o]].shape(), bad) +
                                  " (its inputs had none: it came from this node)");
  }

  // The whole function against its twin built without fusion, in-place or BLAS rewrites.
  void check_against_reference(const ndarray* args, const ndarray* values) {
    std::vector<ndarray> outs, ups;
    m_reference->evaluate(args, outs, ups);
    auto fail = [&](const std::string& what) {
      throw debug_mode_error("xsym DebugMode: function '" + m_name + "': " + what);
    };
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

 public:
  /// @brief Runs the graph without applying updates; returns copies of outputs and update values.
  void evaluate(const ndarray* args, std::vector<ndarray>& outs, std::vector<ndarray>& ups) {
    std::lock_guard lock(m_mutex);
    ndarray* values = m_values.data();
    for (std::size_t i = 0; i < m_graph->inputs.size(); ++i) values[m_graph->inputs[i]] = args[i];
    read_shared(values);
    for (std::size_t i = 0; i < m_thunks.size(); ++i) m_thunks[i].run(m_thunks[i], values);
    for (int s : m_graph->outputs) outs.push_back(detail::deep_copy(values[s]));
    for (auto [t, v] : m_graph->updates) ups.push_back(detail::deep_copy(values[v]));
    release_all_but_constants();
  }
  XSYM_COLD_END

 private:
  // Shapes live in m_last_shapes until a profile takes a copy.
  void copy_shapes(function_profile& p) {
    p.node_inputs = m_last_inputs;
    p.node_outputs = m_last_outputs;
  }

  void record_shapes(std::size_t i, const ndarray* values, bool inputs) {
    auto info_of = [](const ndarray& a) {
      value_info v;
      v.type = a.type();
      v.shape = a.shape();
      v.strides = a.strides();
      v.c_contiguous = a.is_c_contiguous();
      return v;
    };
    const apply_node& n = m_graph->nodes[i];
    if (m_last_inputs.size() != m_graph->nodes.size()) {
      m_last_inputs.assign(m_graph->nodes.size(), {});
      m_last_outputs.assign(m_graph->nodes.size(), {});
    }
    auto& ins = m_last_inputs[i];
    auto& outs = m_last_outputs[i];
    if (inputs) {
      ins.clear();
      for (int s : n.inputs) ins.push_back(info_of(values[s]));
    } else {
      outs.clear();
      for (int s : n.outputs) outs.push_back(info_of(values[s]));
    }
  }

  void record_call(function_profile& p, std::uint64_t call_ticks, bool take_shapes) {
    if (p.skip_next_call) {
      p.skip_next_call = false;
      return;
    }
    if (take_shapes && !m_last_inputs.empty()) copy_shapes(p);
    ++p.calls;
    for (std::size_t i = 0; i < m_scratch_ticks.size(); ++i) {
      p.node_ticks[i] += m_scratch_ticks[i];
      ++p.node_calls[i];
    }
    p.fn_ticks += m_fn_ticks_last;
    p.call_ticks += call_ticks;
    if (p.events.size() < p.max_trace_events) {
      if (p.events.capacity() == 0) p.events.reserve(std::min<std::size_t>(p.max_trace_events, 1 << 16));
      static std::atomic<std::uint32_t> thread_counter{0};
      thread_local const std::uint32_t thread_id = thread_counter++;
      std::uint64_t t = m_fn_start;
      for (std::size_t i = 0; i < m_scratch_ticks.size() && p.events.size() < p.max_trace_events; ++i) {
        p.events.push_back({static_cast<std::uint32_t>(i), thread_id, t, m_scratch_ticks[i]});
        t += m_scratch_ticks[i];
      }
    }
  }

  XSYM_COLD_BEGIN  // the error paths
  [[noreturn]] void throw_not_broadcastable(std::size_t input, int dim, const shape_t& got) const {
    const slot& s = m_graph->slots[static_cast<std::size_t>(m_graph->inputs[input])];
    throw shape_error("xsym: function '" + m_name + "': input " + std::to_string(input) + " ('" + s.name +
                      "') is declared broadcastable in dimension " + std::to_string(dim) + " (always 1) but got shape " +
                      to_string(got));
  }

  [[noreturn]] void throw_node_error(std::size_t i, const std::exception& e) {
    std::string where = "xsym: function '" + m_name + "'";
    if (i < m_graph->nodes.size())
      where += ", Apply node " + std::to_string(i) + " " + m_graph->node_text(static_cast<int>(i));
    const std::string msg = where + ": " + e.what();
    if (dynamic_cast<const shape_error*>(&e)) throw shape_error(msg);
    throw std::runtime_error(msg);
  }
  XSYM_COLD_END

  std::string m_name;
  detail::resolved_plan m_plan;
  cpu::jit_stats m_jit;
  std::shared_ptr<const function_graph> m_graph;
  std::vector<detail::thunk> m_thunks;
  std::vector<ndarray> m_values;
  std::vector<ndarray> m_out;
  std::vector<const ndarray*> m_dest_of_slot;  // into(...): per slot, the caller's array its node writes
  std::vector<int> m_dest_slots;               // the slots bound in this call: the first m_n_dest_slots
  std::size_t m_n_dest_slots = 0;
  std::vector<std::uint8_t> m_direct_output;   // per output: may be written straight into a destination
  bool m_inputs_broadcastable = false;         // some input is declared broadcastable (checked per call)
  detail::buffer_pool m_pool;
  std::vector<int> m_shared_slots;
  std::vector<int> m_view_slots;
  std::vector<std::vector<int>> m_dead_after;
  std::vector<std::uint64_t> m_scratch_ticks;
  std::unique_ptr<detail::device_timer> m_device_timer;  // CUDA events per node (GPU backend, CUDA builds)
  std::uint64_t m_fn_ticks_last = 0;
  std::shared_ptr<profile_stats> m_stats;
  std::shared_ptr<function_profile> m_profile;
  std::vector<detail::thunk> m_ref_thunks;           // DebugMode: reference kernels per node
  std::unique_ptr<function_runtime> m_reference;      // DebugMode: the unoptimised twin
  monitor_callback m_monitor_pre, m_monitor_post;
  bool m_checked = false;
  bool m_is_reference = false;
  function_profile m_scope_model;  // compile facts copied into each scope's record
  std::vector<std::vector<value_info>> m_last_inputs, m_last_outputs;
  std::int64_t m_sample_calls = 0;
  std::uint64_t m_fn_start = 0;
  detail::call_lock m_mutex;
};

XSYM_COLD_BEGIN  // building a function runs once
// Building a function reaches every rewrite and kernel: compiled once with XSYM_COMPILED_LIB.
#if XSYM_RUNTIME_DEFINITIONS
XSYM_RUNTIME_INLINE function_runtime::function_runtime(std::string name, const std::vector<var_ptr>& input_vars,
                                                       const std::vector<var_ptr>& output_vars,
                                                       const std::vector<std::pair<var_ptr, var_ptr>>& update_vars,
                                                       const function_options& options)
    : m_name(std::move(name)) {
#ifdef XSYM_COMPILED_LIB
  cpu::register_all_kernels();  // the compiled runtime serves programs of any element type
#endif
  config.ensure_loaded();  // reading XSYM_FLAGS and rc files is not rewrite time
  const double t0 = detail::wall_seconds();
  m_plan = detail::resolve_plan(options);
  m_is_reference = options.is_reference;
  std::vector<var_ptr> roots = output_vars;
  for (auto& [target, value] : update_vars) roots.push_back(value);
  const int nodes_before = detail::count_applies(roots);
  std::vector<rewrite_record> records;
  auto run_pass = [&](const char* pass_name, auto&& pass) {
    if (!m_plan.rewrites.count(pass_name)) return;
    rewrite_record rec;
    rec.name = pass_name;
    rec.nodes_before = detail::count_applies(roots);
    const double s0 = detail::wall_seconds();
    roots = pass(roots, rec);
    rec.seconds = detail::wall_seconds() - s0;
    rec.nodes_after = detail::count_applies(roots);
    records.push_back(std::move(rec));
  };
  run_pass("stabilize", detail::stabilize_pass);
  run_pass("canonicalize", detail::canonicalize_pass);
  run_pass("constant_folding", detail::constant_folding_pass);
  run_pass("merge", detail::merge_pass);
  run_pass("blas", detail::blas_pass);
  run_pass("gemv_accumulate", detail::gemv_accumulate_pass);
  run_pass("gemv_scale_fold", detail::gemv_scale_fold_pass);
  if (detail::testing::extra_fast_run_rewrite() && m_plan.rewrites.count("elemwise_fusion"))
    roots = detail::testing::extra_fast_run_rewrite()(roots);
  run_pass("elemwise_fusion", detail::fusion_pass);
  const double t1 = detail::wall_seconds();
  build_graph(input_vars, roots, output_vars.size(), update_vars, options);
  if (m_plan.rewrites.count("multi_output_fusion")) {
    rewrite_record rec;
    rec.name = "multi_output_fusion";
    rec.nodes_before = static_cast<int>(m_graph->nodes.size());
    const double s0 = detail::wall_seconds();
    detail::multi_output_fusion_pass(*std::const_pointer_cast<function_graph>(m_graph), rec);
    rec.seconds = detail::wall_seconds() - s0;
    rec.nodes_after = static_cast<int>(m_graph->nodes.size());
    records.push_back(std::move(rec));
  }
  if (m_plan.rewrites.count("inplace_elemwise")) {
    rewrite_record rec;
    rec.name = "inplace_elemwise";
    rec.nodes_before = rec.nodes_after = static_cast<int>(m_graph->nodes.size());
    const double s0 = detail::wall_seconds();
    detail::inplace_pass(*std::const_pointer_cast<function_graph>(m_graph), rec);
    rec.seconds = detail::wall_seconds() - s0;
    records.push_back(std::move(rec));
  }
  if (m_plan.gpu) {
    rewrite_record rec;
    rec.name = "gpu_placement";
    rec.nodes_before = static_cast<int>(m_graph->nodes.size());
    const double s0 = detail::wall_seconds();
    detail::gpu_placement_pass(*std::const_pointer_cast<function_graph>(m_graph), rec);
    rec.seconds = detail::wall_seconds() - s0;
    rec.nodes_after = static_cast<int>(m_graph->nodes.size());
    records.push_back(std::move(rec));
  }
  const double t2 = detail::wall_seconds();
  m_thunks = bind_thunks(m_plan.reference_kernels);
  if (m_plan.gpu && detail::gpu_runtime().make_timer) m_device_timer = detail::gpu_runtime().make_timer(*m_graph);
  if (m_plan.debug) {
    m_ref_thunks = bind_thunks(true);
    function_options ref = options;
    ref.mode = "FAST_COMPILE";
    ref.profile = false;
    ref.stats = nullptr;
    ref.is_reference = true;
    ref.ignore_unused_inputs = true;
    m_reference = std::make_unique<function_runtime>(m_name + " (DebugMode reference)", input_vars, output_vars,
                                                     update_vars, ref);
  }
  m_monitor_pre = options.monitor_pre;
  m_monitor_post = options.monitor_post;
  m_checked = m_plan.debug || m_plan.nan_guard || m_plan.monitor;
  const double t3 = detail::wall_seconds();

  const bool profiling = profiling_compiled_in && (options.profile.value_or(config.profile.value()) || options.stats);
  // Scopes need the compile-time facts even of functions that are not profiled themselves.
  m_scope_model.implementation = m_plan.reference_kernels ? "ref" : "cpu";
  m_scope_model.device_implementation = m_plan.gpu ? detail::device_hooks().implementation : "";
  for (const auto& t : m_thunks) m_scope_model.node_compiled.push_back(t.prog.jit[0] != nullptr);
  m_scope_model.compiled_library = m_jit.library;
  m_scope_model.compiled_now = m_jit.compiled > 0;
  m_scope_model.rewrite_seconds = t1 - t0;
  m_scope_model.validate_seconds = t2 - t1;
  m_scope_model.linker_seconds = t3 - t2;
  m_scope_model.gc = m_plan.gc;
  m_scope_model.dead_after = m_dead_after;
  if (profiling) {
    m_stats = options.stats ? options.stats : std::make_shared<profile_stats>(m_name);
    m_profile = m_stats->add_function(m_name, m_graph);
    m_profile->implementation = m_plan.reference_kernels ? "ref" : "cpu";
    m_profile->device_implementation = m_scope_model.device_implementation;
    m_profile->node_compiled = m_scope_model.node_compiled;
    m_profile->compiled_library = m_scope_model.compiled_library;
    m_profile->compiled_now = m_scope_model.compiled_now;
    m_profile->rewrite_seconds = t1 - t0;
    m_profile->validate_seconds = t2 - t1;
    m_profile->linker_seconds = t3 - t2;
    m_profile->rewrites = std::move(records);
    m_profile->nodes_before_rewrites = nodes_before;
    m_profile->skip_next_call = config.profiling.ignore_first_call.value();
    m_profile->gc = m_plan.gc;
    m_profile->dead_after = m_dead_after;
    m_profile->memory = config.profile_memory.value();
    m_profile->optimizer = config.profile_optimizer.value();
  }
}
XSYM_COLD_END
#endif  // XSYM_RUNTIME_DEFINITIONS

}  // namespace xsym

#endif
