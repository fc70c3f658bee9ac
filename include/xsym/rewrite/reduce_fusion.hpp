#ifndef XSYM_REWRITE_REDUCE_FUSION_HPP
#define XSYM_REWRITE_REDUCE_FUSION_HPP

// careduce_fusion: a reduction (sum, mean, prod, max, min) whose input is a float elementwise
// node's one output, read by nothing else, becomes one CAReduce node that runs the elementwise
// program a block of rows at a time and reduces each block while it is in the cache
// (exec/cpu_nodes.hpp, reduce_fused_node): mean((x - y)**2) or sum(x * y, 1) read their
// operands once and never write the elementwise result to memory (PyTensor's CAReduce fusion).
#include <algorithm>
#include <unordered_set>

#include "../graph/fgraph.hpp"
#include "multi_fusion.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

inline void careduce_fusion_pass(function_graph& g, rewrite_record& rec) {
  const std::unordered_set<int> kept = kept_slots(g);
  const auto clients = g.clients();
  std::vector<int> absorbed;  // ids of the elementwise nodes taken in
  for (apply_node& n : g.nodes) {
    const op& o = *n.fn;
    if (o.kind != op_kind::reduce || o.fused || o.on_gpu || n.inputs.size() != 1) continue;
    const int v = n.inputs[0];
    const slot& vs = g.slots[static_cast<std::size_t>(v)];
    if (vs.owner < 0 || kept.count(v) || vs.rank == 0 || clients[static_cast<std::size_t>(v)].size() != 1) continue;
    // Floats only: their sums already accumulate in double, so a block's partial sum loses nothing.
    if (vs.type != dtype::float32 && vs.type != dtype::float64) continue;
    const apply_node& e = g.nodes[static_cast<std::size_t>(vs.owner)];
    if ((e.fn->kind != op_kind::elemwise && e.fn->kind != op_kind::composite) || e.outputs.size() != 1 ||
        !e.fn->destroy_map.empty() || e.fn->on_gpu || e.inputs.empty() || e.inputs.size() > limits::max_registers)
      continue;
    op f = o;
    auto prog = std::make_shared<program>(*node_program(g, e));
    if (e.fn->kind == op_kind::elemwise) {  // a lone op's text as a Composite's: the typed sums' pattern
      std::vector<std::string> args;
      for (std::size_t j = 0; j < e.inputs.size(); ++j) args.push_back("i" + std::to_string(j));
      prog->text = composite_term(e.fn->scalar, vs.type, args, scalar_op::identity);
    }
    f.fused = std::move(prog);
    rec.notes.push_back(g.node_text(e) + " is reduced as it is computed by " + g.node_text(n));
    ++rec.applied;
    n.fn = std::make_shared<const op>(std::move(f));
    n.inputs = e.inputs;
    absorbed.push_back(e.id);
  }
  remove_nodes(g, absorbed);
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
