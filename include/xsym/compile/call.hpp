#ifndef XSYM_COMPILE_CALL_HPP
#define XSYM_COMPILE_CALL_HPP

// The call loop: arguments bound, every thunk run (timed, checked or plain), outputs
// converted, updates applied, and the errors that name the Apply node.
#include <memory>
#include <optional>
#include <type_traits>

#include "function_runtime.hpp"

namespace xsym {

template <class Bind, class Convert>
auto function_runtime::call_with(Bind&& bind, Convert&& convert, const ndarray* dests) {
  using B = std::remove_reference_t<Bind>;
  using C = std::remove_reference_t<Convert>;
  using R = std::remove_cvref_t<std::invoke_result_t<C&, const ndarray*>>;
  const bind_ref b{[](void* f, ndarray* values, const std::vector<int>& inputs) { (*static_cast<B*>(f))(values, inputs); },
                   const_cast<std::remove_const_t<B>*>(std::addressof(bind))};
  if constexpr (std::is_void_v<R>) {
    run_call(b, {[](void* f, const ndarray* out) { (*static_cast<C*>(f))(out); },
                 const_cast<std::remove_const_t<C>*>(std::addressof(convert))},
             dests);
  } else {
    // Convert's result is made while the call holds the outputs, and moved out after.
    struct converted {
      C* convert;
      std::optional<R> result;
    } c{std::addressof(convert), std::nullopt};
    run_call(b, {[](void* p, const ndarray* out) {
                   auto& k = *static_cast<converted*>(p);
                   k.result.emplace((*k.convert)(out));
                 },
                 &c},
             dests);
    return std::move(*c.result);
  }
}

#if XSYM_RUNTIME_DEFINITIONS
XSYM_RUNTIME_INLINE void function_runtime::run_call(bind_ref bind, convert_ref convert, const ndarray* dests) {
  std::lock_guard lock(m_mutex);
  for (const auto& [comm, nodes] : m_collectives) comm->begin_call(nodes);
  // One predictable branch when profiling is off; nothing at all when compiled out.
  const bool timed = profiling_compiled_in && (m_profile || detail::any_scope_active());
  const std::uint64_t c0 = timed ? detail::ticks() : 0;
  ndarray* values = m_values.data();
  try {
    bind.fn(bind.bind, values, m_graph->inputs);
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
  const bool memory = timed && m_facts->memory;  // the function's own profile or a scope's
  // This thread's allocations: another thread's calls neither show in the peak nor reset it.
  const auto device_allocated = m_plan.gpu ? detail::device_hooks().thread_allocated : nullptr;
  detail::call_peak host_peak(memory ? detail::thread_memory().get() : nullptr);
  detail::call_peak device_call_peak(memory && device_allocated ? &device_allocated() : nullptr);
  const shared_unlock unlock_at_exit{this};
  read_shared(values, true);
  const bool sample = timed && sample_this_call(values);
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
    // The checks of DebugMode, NanGuardMode and MonitorMode run profiled or not.
    // DebugMode runs the unoptimised twin on the same arguments and shared values (another
    // thread may replace a shared value this call only reads before the twin runs); a
    // MonitorMode callback's get_value reads them too.
    std::vector<ndarray> args;
    shared_values_read shared_read;
    const bool callbacks = m_checked && (m_monitor_pre || m_monitor_post);
    if (m_checked && m_plan.debug) {
      m_reference->m_collective_log.entries.clear();
      for (int s : m_graph->inputs) args.push_back(values[s]);
    }
    if ((m_checked && m_plan.debug) || callbacks)
      for (int s : m_shared_slots) shared_read.emplace_back(m_graph->slots[static_cast<std::size_t>(s)].source->shared.get(), values[s]);
    std::optional<detail::callback_values> in_callbacks;
    if (callbacks) in_callbacks.emplace(&shared_read);
    if (m_checked && m_plan.nan_guard) guard_inputs(values);
    if (timed) {
      const std::uint64_t f0 = detail::ticks();
      m_fn_start = f0;
      std::uint64_t t = f0;
      for (; i < m_thunks.size(); ++i) {
        if (sample) record_shapes(i, values, true);  // before: an in-place node consumes its input
        if (m_device_timer) m_device_timer->node_begin(i);
        if (m_checked) run_checked(i, values);
        else m_thunks[i].run(m_thunks[i], values);
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
      for (; i < m_thunks.size(); ++i) {
        run_checked(i, values);
        if (m_plan.gc) release_dead(i);
      }
    } else {
      for (; i < m_thunks.size(); ++i) {
        m_thunks[i].run(m_thunks[i], values);
        if (m_plan.gc) release_dead(i);
      }
    }
    if (m_checked && m_plan.debug) check_against_reference(args.data(), shared_read, values);
  } catch (const detail::callback_exception& e) {
    release_all_but_constants();
    std::rethrow_exception(e.error);  // the user's own, after the cleanup; nothing is updated
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
  // An update's value that is an argument or a view of one is read after the outputs are
  // copied into their destinations: where a destination overlaps it, it is taken aside first.
  if (dests && !m_is_reference) take_updates_aside(dests, values);
  // One output is read in place; several are gathered (their slots need not be adjacent).
  try {
    if (m_graph->outputs.size() == 1) {
      convert.fn(convert.convert, &values[m_graph->outputs[0]]);
    } else {
      for (std::size_t o = 0; o < m_graph->outputs.size(); ++o) m_out[o] = values[m_graph->outputs[o]];
      convert.fn(convert.convert, m_out.data());
      for (auto& o : m_out) o.release();
    }
  } catch (...) {
    // Nothing is updated; nothing keeps a pointer to the caller's memory.
    for (auto& o : m_out) o.release();
    release_after_call();
    throw;
  }
  if (!m_is_reference && (!m_shared_slots.empty() || !m_graph->updates.empty())) apply_updates(values);
  unlock_shared();
  release_after_call();
  if (timed) {
    const std::int64_t peak = host_peak.finish();
    const std::int64_t device_peak = device_call_peak.finish();
    // The measured peak pairs with the simulated ones, which replay the last recorded sizes:
    // the most over the calls since those sizes were first recorded (the first call at new
    // sizes allocates; later ones take their buffers back from the pool).
    auto measured = [&](function_profile& p, recorded r) {
      if (r == recorded::skipped) return;
      const bool restart = r == recorded::new_sizes;
      if (memory) p.measured_peak_bytes = std::max(restart ? 0 : p.measured_peak_bytes, peak);
      if (memory && device_allocated)
        p.measured_device_peak_bytes = std::max(restart ? 0 : p.measured_device_peak_bytes, device_peak);
    };
    const std::uint64_t call_ticks = detail::ticks() - c0;
    ++m_sample_calls;
    if (sample) m_sampled_shapes.swap(m_pending_shapes);  // only now: a call that threw recorded nothing
    if (m_profile) {
      std::lock_guard hold(m_profile->mutex.m);
      measured(*m_profile, record_call(*m_profile, call_ticks, sample));
    }
    detail::for_each_active_scope([&](profile_scope& scope) {
      function_profile& p = scope.record_for(m_facts);
      std::lock_guard hold(p.mutex.m);
      measured(p, record_call(p, call_ticks, sample || p.calls == 0));
    });
  }
}
#endif  // XSYM_RUNTIME_DEFINITIONS

// Whether a profiled call records every node's shapes (the profile's shapes, flops and memory):
// calls 1, 2, 3, 5, 9, ... (recording costs a call), any call whose inputs or shared values
// changed shape since the last recorded one, and a function's first call in a profile_scope.
inline bool function_runtime::sample_this_call(const ndarray* values) {
  const std::size_t n_in = m_graph->inputs.size(), n = n_in + m_shared_slots.size();
  auto shape_of = [&](std::size_t k) -> const shape_t& {
    return values[static_cast<std::size_t>(k < n_in ? m_graph->inputs[k] : m_shared_slots[k - n_in])].shape();
  };
  bool sample = (m_sample_calls & (m_sample_calls - 1)) == 0 || m_sampled_shapes.size() != n;
  for (std::size_t k = 0; k < n && !sample; ++k) sample = !(shape_of(k) == m_sampled_shapes[k]);
  if (!sample)
    detail::for_each_active_scope([&](profile_scope& scope) { sample = sample || !scope.has_record(m_facts.get()); });
  if (sample) {  // the sampled shapes once the call is recorded
    m_pending_shapes.resize(n);
    for (std::size_t k = 0; k < n; ++k) m_pending_shapes[k] = shape_of(k);
  }
  return sample;
}

// The checks that make this call's result the call loop's: the same kernel on the same
// arrays, one span of n elements, no streaming and no threads (elemwise_node's choices).
inline bool function_runtime::run_direct(const std::byte* const* args, std::byte* dest, std::int64_t n) const {
  const direct_kernel& d = m_direct;
  if (profiling_compiled_in && (m_profile || detail::any_scope_active())) return false;
  if (n < d.min_elements || n >= d.max_elements || n * d.bytes_per_element >= cpu::streaming_min_bytes()) return false;
  if (d.direct) return d.direct(d.leaves, args, dest, n);  // a typed kernel
  if (d.jit_direct) return d.jit_direct(d.arg.data(), d.constant.data(), args, dest, n);  // cxx's, its checks unrolled
  return run_direct_step(args, dest, n);  // a lone op
}

// Out of line: its arrays of arguments would give the typed kernel's path a frame to set up.
[[gnu::noinline]] inline bool function_runtime::run_direct_step(const std::byte* const* args, std::byte* dest,
                                                                std::int64_t n) const {
  const direct_kernel& d = m_direct;
  const auto out_lo = reinterpret_cast<std::intptr_t>(dest);
  const std::intptr_t out_hi = out_lo + n * d.elem_bytes;
  const std::byte* in[limits::max_registers];
  for (int k = 0; k < d.n_in; ++k) {
    const int a = d.arg[static_cast<std::size_t>(k)];
    if (a < 0) {
      in[k] = d.constant[static_cast<std::size_t>(k)];
      continue;
    }
    const auto lo = reinterpret_cast<std::intptr_t>(args[a]);
    const std::int64_t len = (d.one_value >> k) & 1u ? d.elem_bytes : n * d.elem_bytes;
    if (lo < out_hi && out_lo < lo + len) return false;  // the call loop computes beside the destination
    in[k] = args[a];
  }
  if (d.jit) {
    std::byte* const out[1] = {dest};
    d.jit(in, out, n, false);
    return true;
  }
  const cpu::compiled_step& st = *d.step;  // as run_span's lone op
  const void* step_args[cpu::detail::max_chain_links + 1];
  st.run(dest, step_args, cpu::detail::bind_step_args(st, in, d.one_value, step_args), n, false);
  return true;
}

inline void function_runtime::release_dead(std::size_t node) {
  for (int s : m_dead_after[node]) m_pool.give(m_values[static_cast<std::size_t>(s)]);
}

// Inputs, shared values and views are not kept: a kept reference would pin user memory or
// stop buffer reuse.
inline void function_runtime::release_after_call() {
  release_destinations();
  for (int s : m_graph->inputs) m_values[static_cast<std::size_t>(s)].release();
  for (int s : m_shared_slots) m_values[static_cast<std::size_t>(s)].release();
  for (int s : m_view_slots) m_values[static_cast<std::size_t>(s)].release();
  // Output buffers are kept for the next call (they are results, not intermediates), and so
  // are the pooled ones: the next call reuses them instead of asking malloc (and the kernel,
  // for large buffers) again. Within a call, gc still bounds the peak.
}

inline void function_runtime::release_all_but_constants() {
  release_destinations();
  for (std::size_t s = 0; s < m_values.size(); ++s)
    if (m_graph->slots[s].kind != var_kind::constant) m_values[s].release();
}

// Every update is computed before any is applied: values read the old shared state. The
// targets' locks are held since read_shared.
inline void function_runtime::apply_updates(ndarray* values) {
  // This call's references to shared values are done with (unless one is itself an update
  // value): dropping them lets an old buffer be recognised as ours alone and reused.
  for (int s : m_shared_slots) {
    bool is_value = false;
    for (auto [t, v] : m_graph->updates) is_value |= v == s;
    if (!is_value) values[s].release();
  }
  const auto& updates = m_graph->updates;
  for (std::size_t u = 0; u < updates.size(); ++u) {
    const auto [target, value] = updates[u];
    auto& sv = *m_graph->slots[static_cast<std::size_t>(target)].source->shared;
    ndarray& v = values[value];
    // Two variables updated to one expression share its slot: only the last takes the buffer.
    bool read_later = false;
    for (std::size_t k = u + 1; k < updates.size(); ++k) read_later |= updates[k].second == value;
    const bool owned_here = !read_later && m_graph->slots[static_cast<std::size_t>(value)].kind == var_kind::apply &&
                            v.owner() && v.owner().use_count() == 1 && v.is_c_contiguous();
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

// Each shared variable's current value into its slot, under the locks of all of them at once:
// set_value and other functions' updates replace them concurrently, and a call sees all of
// another call's updates or none. With hold_updated, the variables this function updates stay
// locked until unlock_shared (after its updates): calls that update one variable run one
// after another. The value moves to where this function reads it first: to the device once
// (it stays there, as Theano's GPU shared variables do), or a host copy for a CPU function.
inline void function_runtime::read_shared(ndarray* values, bool hold_updated) {
  for (std::size_t i = 0; i < m_shared_locks.size(); ++i) {
    m_shared_locks[i]->mutex.lock();
    m_shared_held[i] = 1;
  }
  for (int s : m_shared_slots) {
    auto& sv = *m_graph->slots[static_cast<std::size_t>(s)].source->shared;
    if (m_graph->slots[static_cast<std::size_t>(s)].on_device != sv.value.on_device()) place_shared(s, sv);
    values[s] = sv.value;
  }
  for (std::size_t i = 0; i < m_shared_locks.size(); ++i)
    if (!hold_updated || !m_shared_updated[i]) {
      m_shared_locks[i]->mutex.unlock();
      m_shared_held[i] = 0;
    }
}

inline void function_runtime::unlock_shared() {
  for (std::size_t i = 0; i < m_shared_locks.size(); ++i)
    if (m_shared_held[i]) {
      m_shared_locks[i]->mutex.unlock();
      m_shared_held[i] = 0;
    }
}

// Called with sv's lock held.
inline void function_runtime::place_shared(int s, shared_value& sv) {
  if (m_graph->slots[static_cast<std::size_t>(s)].on_device) {
    if (!sv.value.on_device()) sv.value = detail::device_hooks().to_device(sv.value);
  } else if (sv.value.on_device()) {
    sv.value = detail::device_hooks().to_host(sv.value);
  }
}

XSYM_COLD_BEGIN
inline void function_runtime::evaluate(const ndarray* args, std::vector<ndarray>& outs, std::vector<ndarray>& ups,
                                       const shared_values_read* shared) {
  std::lock_guard lock(m_mutex);
  for (const auto& [comm, nodes] : m_collectives) comm->begin_call(nodes);
  ndarray* values = m_values.data();
  for (std::size_t i = 0; i < m_graph->inputs.size(); ++i) values[m_graph->inputs[i]] = args[i];
  const shared_unlock unlock_at_exit{this};
  if (!shared) read_shared(values, false);
  // The values a checked call read, where it read them (host or device). The twin takes no
  // lock of its own for them: it runs while that call holds the locks of the variables it
  // updates, and taking others after those could wait for a call that waits for this one.
  for (std::size_t k = 0; shared && k < m_shared_slots.size(); ++k) {
    const int s = m_shared_slots[k];
    const slot& sl = m_graph->slots[static_cast<std::size_t>(s)];
    const ndarray* read = nullptr;
    for (const auto& [sv, v] : *shared)
      if (sv == sl.source->shared.get()) read = &v;
    if (!read) {  // a variable the call's rewrites dropped: read now
      std::lock_guard hold(sl.source->shared->mutex);
      place_shared(s, *sl.source->shared);
      values[s] = sl.source->shared->value;
      continue;
    }
    values[s] = sl.on_device == read->on_device() ? *read
                : sl.on_device                  ? detail::device_hooks().to_device(*read)
                                                : detail::device_hooks().to_host(*read);
  }
  for (std::size_t i = 0; i < m_thunks.size(); ++i) m_thunks[i].run(m_thunks[i], values);
  for (int s : m_graph->outputs) outs.push_back(detail::deep_copy(values[s]));
  for (auto [t, v] : m_graph->updates) ups.push_back(detail::deep_copy(values[v]));
  release_all_but_constants();
}

[[noreturn]] inline void function_runtime::throw_not_broadcastable(std::size_t input, int dim, const shape_t& got) const {
  const slot& s = m_graph->slots[static_cast<std::size_t>(m_graph->inputs[input])];
  throw shape_error("xsym: function '" + m_name + "': input " + std::to_string(input) + " ('" + s.name +
                    "') is declared broadcastable in dimension " + std::to_string(dim) + " (always 1) but got shape " +
                    to_string(got));
}

[[noreturn]] inline void function_runtime::throw_node_error(std::size_t i, const std::exception& e) {
  std::string where = "xsym: function '" + m_name + "'";
  if (i < m_graph->nodes.size()) {
    where += ", Apply node " + std::to_string(i) + " " + m_graph->node_text(static_cast<int>(i));
    const auto& src = m_graph->slots[static_cast<std::size_t>(m_graph->nodes[i].outputs[0])].source;
    if (src && src->where.line()) where += " (made at " + detail::site_text(src->where) + ")";
  }
  const std::string msg = where + ": " + e.what();
  if (dynamic_cast<const shape_error*>(&e)) throw shape_error(msg);
  if (dynamic_cast<const index_error*>(&e)) throw index_error(msg);
  if (dynamic_cast<const assertion_error*>(&e)) throw assertion_error(msg);
  throw std::runtime_error(msg);
}

XSYM_COLD_END
}  // namespace xsym

#endif
