#ifndef XSYM_REWRITE_INPLACE_HPP
#define XSYM_REWRITE_INPLACE_HPP

#include <algorithm>
#include <unordered_set>

#include "../graph/fgraph.hpp"
#include "rewrites.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

/// inplace: an elementwise node writes its output into an input buffer that dies there.
/// Never a function input, a shared variable, a constant, a view, a value read later, or an
/// input broadcast along a dimension of the output.
inline void inplace_pass(function_graph& g, rewrite_record& rec) {
  const auto clients = g.clients();
  const std::unordered_set<int> kept = kept_slots(g);
  for (apply_node& n : g.nodes) {
    // Accumulating products and IncSubtensor write into their first input only.
    const bool product = (n.fn->kind == op_kind::gemv || n.fn->kind == op_kind::dot22) && n.fn->accumulate;
    const bool first_only = product || n.fn->kind == op_kind::inc_subtensor;
    if (n.fn->kind != op_kind::elemwise && n.fn->kind != op_kind::composite && !first_only) continue;
    const slot& out = g.slots[static_cast<std::size_t>(n.outputs[0])];
    for (std::size_t k = 0; k < (first_only ? 1 : n.inputs.size()); ++k) {
      const int s = n.inputs[k];
      const slot& in = g.slots[static_cast<std::size_t>(s)];
      if (in.kind != var_kind::apply || kept.count(s) || in.type != out.type || in.rank != out.rank) continue;
      // A product reads its operands while it writes the first input: the same value as one of
      // them (u - c * dot(M, u)) would be overwritten under it. (IncSubtensor copies a value
      // that is its own x first.)
      if (product && std::count(n.inputs.begin(), n.inputs.end(), s) > 1) continue;
      // An input of extent 1 where the output has more (keepdims' row against a matrix)
      // cannot hold the output: Theano's same broadcastable pattern.
      if ((in.broadcastable & ~out.broadcastable) != 0) continue;
      const apply_node& producer = g.nodes[static_cast<std::size_t>(in.owner)];
      if (producer.fn->is_view()) continue;
      const auto& c = clients[static_cast<std::size_t>(s)];
      if (std::any_of(c.begin(), c.end(), [&](int id) { return id != n.id; })) continue;
      op o = *n.fn;
      o.destroy_map = {{0, static_cast<int>(k)}};
      n.fn = std::make_shared<const op>(std::move(o));
      ++rec.applied;
      rec.notes.push_back("node " + std::to_string(n.id) + " writes into input " + std::to_string(k));
      break;
    }
  }
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
