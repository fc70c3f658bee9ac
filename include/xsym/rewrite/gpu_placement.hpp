#ifndef XSYM_REWRITE_GPU_PLACEMENT_HPP
#define XSYM_REWRITE_GPU_PLACEMENT_HPP

#include <map>
#include <memory>

#include "../graph/fgraph.hpp"
#include "rewrites.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

/// device=cuda, after every other rewrite: each Apply node becomes its GPU op; function
/// inputs reach the device through GpuFromHost nodes and outputs come back through
/// HostFromGpu nodes; shared variables and constants live on the device (no transfer per call).
inline void gpu_placement_pass(function_graph& g, rewrite_record& rec) {
  std::vector<apply_node> body = std::move(g.nodes);
  std::vector<apply_node> head, tail;
  auto transfer = [](bool to_device) {
    auto o = std::make_shared<op>();
    o->kind = op_kind::transfer;
    o->to_device = to_device;
    return std::shared_ptr<const op>(std::move(o));
  };
  const auto up = transfer(true), down = transfer(false);
  for (auto& s : g.slots) s.on_device = s.kind != var_kind::input;
  for (auto& n : body) {
    auto o = std::make_shared<op>(*n.fn);
    o->on_gpu = true;
    n.fn = std::move(o);
  }
  // A device copy of each host slot that device code reads, made once per call.
  std::map<int, int> device_copy;
  auto device_slot_of = [&](int s) {
    if (g.slots[static_cast<std::size_t>(s)].on_device) return s;
    if (auto it = device_copy.find(s); it != device_copy.end()) return it->second;
    slot d = g.slots[static_cast<std::size_t>(s)];
    d.kind = var_kind::apply;
    d.name.clear();
    d.on_device = true;
    g.slots.push_back(std::move(d));
    const int ds = static_cast<int>(g.slots.size()) - 1;
    apply_node t;
    t.fn = up;
    t.inputs = {s};
    t.outputs = {ds};
    head.push_back(std::move(t));
    device_copy[s] = ds;
    return ds;
  };
  for (auto& n : body)
    for (int& in : n.inputs) in = device_slot_of(in);
  for (auto& [target, value] : g.updates) value = device_slot_of(value);
  std::map<int, int> host_copy;
  for (int& o : g.outputs) {
    if (!g.slots[static_cast<std::size_t>(o)].on_device) continue;
    if (auto it = host_copy.find(o); it != host_copy.end()) {
      o = it->second;
      continue;
    }
    slot h = g.slots[static_cast<std::size_t>(o)];
    h.kind = var_kind::apply;
    h.on_device = false;
    if (h.source && h.source->kind == var_kind::shared) h.name.clear();
    g.slots.push_back(std::move(h));
    const int hs = static_cast<int>(g.slots.size()) - 1;
    apply_node t;
    t.fn = down;
    t.inputs = {o};
    t.outputs = {hs};
    tail.push_back(std::move(t));
    host_copy[o] = hs;
    o = hs;
  }
  g.nodes.clear();
  for (auto* part : {&head, &body, &tail})
    for (auto& n : *part) g.nodes.push_back(std::move(n));
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    apply_node& n = g.nodes[i];
    n.id = static_cast<int>(i);
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      slot& s = g.slots[static_cast<std::size_t>(n.outputs[o])];
      s.owner = n.id;
      s.owner_output = static_cast<int>(o);
    }
  }
  rec.applied = static_cast<int>(head.size() + tail.size());
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
