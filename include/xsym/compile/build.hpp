#ifndef XSYM_COMPILE_BUILD_HPP
#define XSYM_COMPILE_BUILD_HPP

// Building a function: the rewrite pipeline (pipeline.hpp) on the symbolic graph, the graph
// of slots and Apply nodes with its own rewrites, the linker, DebugMode's twin, the profile.
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "../backend/cpu/register_kernels.hpp"
#include "function_runtime.hpp"
#include "link.hpp"
#include "pipeline.hpp"
#include "profile_wiring.hpp"

namespace xsym {

XSYM_COLD_BEGIN
inline void function_runtime::build_graph(const std::vector<var_ptr>& input_vars, const std::vector<var_ptr>& roots, std::size_t n_outputs,
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
  std::vector<std::pair<shared_value*, bool>> locks;
  for (int s : m_shared_slots) locks.push_back({g->slots[static_cast<std::size_t>(s)].source->shared.get(), false});
  for (auto [t, v] : g->updates) locks.push_back({g->slots[static_cast<std::size_t>(t)].source->shared.get(), true});
  std::sort(locks.begin(), locks.end(), [](const auto& a, const auto& b) {
    return std::less<>()(a.first, b.first) || (a.first == b.first && a.second > b.second);  // updated first
  });
  for (auto [sv, updated] : locks) {
    if (!m_shared_locks.empty() && m_shared_locks.back() == sv) continue;
    m_shared_locks.push_back(sv);
    m_shared_updated.push_back(updated);
  }
  m_shared_held.assign(m_shared_locks.size(), 0);
  m_graph = std::move(g);
}

XSYM_COLD_END
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
  const detail::suspend_test_values no_test_values;  // the nodes rewrites make are not the user's
  double seconds[4];       // rewrites, graph built and rewritten, linked
  seconds[0] = detail::wall_seconds();
  m_plan = detail::resolve_plan(options);
  m_is_reference = options.is_reference;
  std::vector<var_ptr> roots = output_vars;
  for (auto& [target, value] : update_vars) roots.push_back(value);
  const int nodes_before = detail::count_applies(roots);
  std::vector<rewrite_record> records;
  roots = detail::run_vars_rewrites(m_plan.rewrite_rows, m_plan.rewrites, std::move(roots), records);
  seconds[1] = detail::wall_seconds();
  build_graph(input_vars, roots, output_vars.size(), update_vars, options);
  detail::run_graph_rewrites(m_plan.rewrite_rows, m_plan.rewrites, *std::const_pointer_cast<function_graph>(m_graph),
                             records);
  seconds[2] = detail::wall_seconds();
  m_thunks = bind_thunks(m_plan.reference_kernels);
  for (std::size_t i = 0; i < m_graph->nodes.size(); ++i) {
    const apply_node& n = m_graph->nodes[i];
    if (n.fn->kind != op_kind::allreduce) continue;
    if (options.replays_collectives) {  // DebugMode's twin communicates nothing: it replays the function's results
      m_thunks[i].run = &detail::run_allreduce_replay;
      m_thunks[i].replay = &m_collective_log;
      continue;
    }
    auto at = std::find_if(m_collectives.begin(), m_collectives.end(), [&](const auto& c) { return c.first == n.fn->comm.get(); });
    if (at == m_collectives.end()) m_collectives.emplace_back(n.fn->comm.get(), 1);
    else ++at->second;
  }
  if (m_plan.gpu && detail::gpu_runtime().make_timer) m_device_timer = detail::gpu_runtime().make_timer(*m_graph);
  if (m_plan.debug) {
    m_ref_thunks = bind_thunks(true, true);  // products and reductions on loops of their own
    // The reference is the plain FAST_COMPILE graph on the reference kernels: a rewrite the
    // function's optimizer, including or requiring adds (option or flag) would be in both
    // graphs and go unseen, and so would the vectorized kernels of another linker. What the
    // function excludes stays excluded: leaving a rewrite out never makes the reference wrong.
    function_options ref = options;
    ref.mode = "FAST_COMPILE";
    ref.optimizer.reset();
    ref.linker.reset();
    ref.including = std::string();
    ref.requiring = std::string();
    ref.profile = false;
    ref.stats = nullptr;
    ref.is_reference = true;
    ref.replays_collectives = true;
    ref.ignore_unused_inputs = true;
    m_reference = std::make_unique<function_runtime>(m_name + " (DebugMode reference)", input_vars, output_vars,
                                                     update_vars, ref);
  }
  m_monitor_pre = options.monitor_pre;
  m_monitor_post = options.monitor_post;
  m_checked = m_plan.debug || m_plan.nan_guard || m_plan.monitor;
  plan_direct();
  seconds[3] = detail::wall_seconds();
  init_profile(options, std::move(records), nodes_before, seconds);
}
#endif  // XSYM_RUNTIME_DEFINITIONS
XSYM_COLD_END

}  // namespace xsym

#endif
