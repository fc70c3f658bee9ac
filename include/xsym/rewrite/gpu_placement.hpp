#ifndef XSYM_REWRITE_GPU_PLACEMENT_HPP
#define XSYM_REWRITE_GPU_PLACEMENT_HPP

#include <map>
#include <memory>

#include "../graph/fgraph.hpp"
#include "rewrites.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

/// Ops without a device kernel: with device=cuda they stay on the CPU, between the transfers
/// that bring their inputs to host memory and their results back (shown in the graph and the
/// profile as HostFromGpu and GpuFromHost nodes).
inline bool runs_on_host(op_kind k) {
  switch (k) {
    case op_kind::allreduce:  // MPI reduces host memory (no CUDA-aware MPI)
    case op_kind::take:
    case op_kind::inc_rows:
    case op_kind::arg_reduce:
    case op_kind::inc_subtensor:
    case op_kind::join:
    case op_kind::alloc:
    case op_kind::arange:
    case op_kind::cumulative:
    case op_kind::batched_dot:
    case op_kind::check: return true;
    default: return false;
  }
}

/// device=cuda, after every other rewrite: each Apply node becomes its GPU op, or stays on the
/// CPU where it has no device kernel; a value crosses between them through a GpuFromHost or
/// HostFromGpu node placed before its first reader on the other side (one per value and
/// direction). Function inputs start in host memory; shared variables and constants live on
/// the device (no transfer per call); outputs come back through HostFromGpu nodes.
inline void gpu_placement_pass(function_graph& g, rewrite_record& rec) {
  std::vector<apply_node> body = std::move(g.nodes);
  g.nodes.clear();
  auto transfer = [](bool to_device) {
    auto o = std::make_shared<op>();
    o->kind = op_kind::transfer;
    o->to_device = to_device;
    return std::shared_ptr<const op>(std::move(o));
  };
  const auto up = transfer(true), down = transfer(false);
  for (auto& s : g.slots) s.on_device = s.kind != var_kind::input;
  int transfers = 0;
  // A copy of slot s on the other side, made once per call before its first reader.
  std::map<int, int> copies[2];  // [to_device]
  auto copy_of = [&](int s, bool to_device) {
    if (g.slots[static_cast<std::size_t>(s)].on_device == to_device) return s;
    if (auto it = copies[to_device].find(s); it != copies[to_device].end()) return it->second;
    slot c = g.slots[static_cast<std::size_t>(s)];
    c.kind = var_kind::apply;
    c.on_device = to_device;
    if (to_device || (c.source && c.source->kind == var_kind::shared)) c.name.clear();
    g.slots.push_back(std::move(c));
    const int cs = static_cast<int>(g.slots.size()) - 1;
    apply_node t;
    t.fn = to_device ? up : down;
    t.inputs = {s};
    t.outputs = {cs};
    g.nodes.push_back(std::move(t));
    ++transfers;
    copies[to_device][s] = cs;
    return cs;
  };
  for (auto& n : body) {
    const bool host = runs_on_host(n.fn->kind);
    if (!host) {
      auto o = std::make_shared<op>(*n.fn);
      o->on_gpu = true;
      n.fn = std::move(o);
    }
    for (int& in : n.inputs) in = copy_of(in, !host);
    for (int o : n.outputs) g.slots[static_cast<std::size_t>(o)].on_device = !host;
    g.nodes.push_back(std::move(n));
  }
  for (auto& [target, value] : g.updates) value = copy_of(value, true);
  for (int& o : g.outputs) o = copy_of(o, false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    apply_node& n = g.nodes[i];
    n.id = static_cast<int>(i);
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      slot& s = g.slots[static_cast<std::size_t>(n.outputs[o])];
      s.owner = n.id;
      s.owner_output = static_cast<int>(o);
    }
  }
  rec.applied = transfers;
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
