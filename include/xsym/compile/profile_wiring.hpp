#ifndef XSYM_COMPILE_PROFILE_WIRING_HPP
#define XSYM_COMPILE_PROFILE_WIRING_HPP

// What a function hands the profiler: its compile-time facts once, then per call the node
// times, shapes and trace events.
#include "function_runtime.hpp"
#include "../profile/columns.hpp"

namespace xsym {

XSYM_COLD_BEGIN  // once per function
// The compile-time facts, once: profile scopes share them with the function's own profile.
inline void function_runtime::init_profile(const function_options& options, std::vector<rewrite_record> records,
                                           int nodes_before, const double (&seconds)[4]) {
  const bool profiling = profiling_compiled_in && (options.profile.value_or(config.profile.value()) || options.stats || m_plan.profile);
  auto facts = std::make_shared<function_facts>();
  facts->name = m_name;
  facts->graph = m_graph;
  facts->implementation = m_plan.reference_kernels ? "ref" : "cpu";
  facts->device_implementation = m_plan.gpu ? detail::device_hooks().implementation : "";
  for (const auto& t : m_thunks) {
    const bool typed = t.prog.typed || t.device_typed || (t.block_g && t.block_g->typed);  // OnePassGemv: its g
    facts->node_compiled.push_back(t.prog.jit[0] ? 1 : typed ? 2 : 0);
  }
  facts->compiled_library = m_jit.library;
  facts->compiled_now = m_jit.compiled > 0;
  facts->rewrite_seconds = seconds[1] - seconds[0];
  facts->validate_seconds = seconds[2] - seconds[1];
  facts->linker_seconds = seconds[3] - seconds[2];
  facts->rewrites = std::move(records);
  facts->nodes_before_rewrites = nodes_before;
  facts->gc = m_plan.gc;
  facts->dead_after = m_dead_after;
  facts->memory = config.profile_memory.value();
  facts->optimizer = config.profile_optimizer.value();
  facts->ignore_first_call = config.profiling.ignore_first_call.value();
  m_facts = std::move(facts);
  if (!profiling) return;
  m_stats = options.stats ? options.stats : std::make_shared<profile_stats>(m_name);
  m_profile = m_stats->add_function(m_facts);
  m_profile->skip_next_call = m_facts->ignore_first_call;
}
XSYM_COLD_END

// Shapes live in m_last_shapes until a profile takes a copy.
inline void function_runtime::copy_shapes(function_profile& p) {
  p.node_inputs = m_last_inputs;
  p.node_outputs = m_last_outputs;
}

inline void function_runtime::record_shapes(std::size_t i, const ndarray* values, bool inputs) {
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

inline function_runtime::recorded function_runtime::record_call(function_profile& p, std::uint64_t call_ticks,
                                                                 bool take_shapes) {
  if (p.skip_next_call) {
    p.skip_next_call = false;
    return recorded::skipped;
  }
  recorded r = recorded::counted;
  if (take_shapes && !m_last_inputs.empty()) {
    auto same_sizes = [&] {
      if (p.node_outputs.size() != m_last_outputs.size()) return false;
      for (std::size_t i = 0; i < m_last_outputs.size(); ++i) {
        if (p.node_outputs[i].size() != m_last_outputs[i].size()) return false;
        for (std::size_t o = 0; o < m_last_outputs[i].size(); ++o)
          if (p.node_outputs[i][o].nbytes() != m_last_outputs[i][o].nbytes()) return false;
      }
      return true;
    };
    if (!same_sizes()) r = recorded::new_sizes;
    detail::sum_sampled_work(p);  // the calls since the last sample ran at its shapes
    copy_shapes(p);
  }
  ++p.calls;
  for (std::size_t i = 0; i < m_scratch_ticks.size(); ++i) {
    p.node_ticks[i] += m_scratch_ticks[i];
    p.node_wait_ticks[i] += m_thunks[i].wait_ticks;
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
  return r;
}

}  // namespace xsym

#endif
