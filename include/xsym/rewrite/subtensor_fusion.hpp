#ifndef XSYM_REWRITE_SUBTENSOR_FUSION_HPP
#define XSYM_REWRITE_SUBTENSOR_FUSION_HPP

// set_subtensor_fusion: set_subtensor(x[slices], e) with e elementwise (a Composite or one op)
// read by nothing else becomes one IncSubtensor node that runs e's program into its output's
// region (exec/cpu_nodes.hpp, inc_subtensor_fused_node): e's result never has an array of its
// own, and only x's elements outside the region are copied. This is numpy's
// `u[1:-1, 1:-1] = stencil(u)` at the cost of the stencil alone.
#include <algorithm>
#include <unordered_set>

#include "../graph/fgraph.hpp"
#include "multi_fusion.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

inline void set_subtensor_fusion_pass(function_graph& g, rewrite_record& rec) {
  const std::unordered_set<int> kept = kept_slots(g);
  const auto clients = g.clients();
  std::vector<int> absorbed;  // ids of the elementwise nodes taken in
  for (apply_node& n : g.nodes) {
    const op& o = *n.fn;
    if (o.kind != op_kind::inc_subtensor || !o.set_values || o.fused || o.on_gpu || n.inputs.size() != 2) continue;
    const int v = n.inputs[1];
    const slot& vs = g.slots[static_cast<std::size_t>(v)];
    if (vs.owner < 0 || kept.count(v) || v == n.inputs[0]) continue;
    const apply_node& e = g.nodes[static_cast<std::size_t>(vs.owner)];
    if ((e.fn->kind != op_kind::elemwise && e.fn->kind != op_kind::composite) || e.outputs.size() != 1 ||
        !e.fn->destroy_map.empty() || e.fn->on_gpu)
      continue;
    if (clients[static_cast<std::size_t>(v)].size() != 1 ||
        vs.type != g.slots[static_cast<std::size_t>(n.inputs[0])].type)
      continue;
    if (e.inputs.size() + 1 > limits::max_registers) continue;
    op f = o;
    f.fused = node_program(g, e);
    f.value_broadcastable = vs.broadcastable;
    rec.notes.push_back(g.node_text(e) + " runs into the region of " + g.node_text(n));
    ++rec.applied;
    n.fn = std::make_shared<const op>(std::move(f));
    std::vector<int> inputs{n.inputs[0]};
    inputs.insert(inputs.end(), e.inputs.begin(), e.inputs.end());
    n.inputs = std::move(inputs);
    absorbed.push_back(e.id);
  }
  remove_nodes(g, absorbed);
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
