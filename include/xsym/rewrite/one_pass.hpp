#ifndef XSYM_REWRITE_ONE_PASS_HPP
#define XSYM_REWRITE_ONE_PASS_HPP

// one_pass_gemv: dot(A.T, g), where g is an output of an elementwise node that reads
// u = dot(A, x) and values of one element or one per row of A, becomes one OnePassGemv node
// (backend/cpu/one_pass.hpp) that reads A once: a gradient step's two products and its
// elementwise work between them, as hand-written code cannot do without fusing them by hand.
#include <algorithm>
#include <unordered_set>

#include "../graph/fgraph.hpp"
#include "multi_fusion.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

// The matrix a product reads transposed: its operand's A for Aᵀ (a transposing gemv, or a
// gemv on DimShuffle{1,0}(A)); -1 otherwise.
inline int transposed_matrix(const function_graph& g, const apply_node& b) {
  if (b.fn->transpose_a) return -1;  // the blas rewrite writes Aᵀ as a DimShuffle
  const int mat = b.inputs[b.fn->accumulate ? 1 : 0];
  const slot& s = g.slots[static_cast<std::size_t>(mat)];
  if (s.owner < 0) return -1;
  const apply_node& t = g.nodes[static_cast<std::size_t>(s.owner)];
  if (t.fn->kind != op_kind::dimshuffle || t.fn->pattern != std::vector<int>{1, 0}) return -1;
  return t.inputs[0];
}

inline void one_pass_gemv_pass(function_graph& g, rewrite_record& rec) {
  const std::unordered_set<int> kept = kept_slots(g);
  bool changed = true;
  while (changed) {
    changed = false;
    const auto clients = g.clients();
    for (const apply_node& b : g.nodes) {
      if (b.fn->kind != op_kind::gemv || b.fn->on_gpu) continue;
      const int a = transposed_matrix(g, b);
      if (a < 0) continue;
      const dtype type = g.slots[static_cast<std::size_t>(a)].type;
      if (type != dtype::float32 && type != dtype::float64) continue;
      const slot& gs = g.slots[static_cast<std::size_t>(b.inputs[b.fn->accumulate ? 2 : 1])];
      if (gs.owner < 0) continue;
      const apply_node& c = g.nodes[static_cast<std::size_t>(gs.owner)];
      if (c.fn->kind != op_kind::elemwise && c.fn->kind != op_kind::composite) continue;
      if (!c.fn->destroy_map.empty()) continue;
      bool rows = true;  // every value of the elementwise node is a vector (one per row, or one)
      for (int s : c.inputs) rows &= g.slots[static_cast<std::size_t>(s)].rank == 1;
      for (int s : c.outputs) rows &= g.slots[static_cast<std::size_t>(s)].rank == 1;
      if (!rows) continue;
      // u = dot(A, x): read by the elementwise node alone, once.
      int pass_u = -1, au = -1;
      for (std::size_t r = 0; r < c.inputs.size(); ++r) {
        const int s = c.inputs[r];
        const slot& us = g.slots[static_cast<std::size_t>(s)];
        if (us.owner < 0 || us.type != type || kept.count(s)) continue;
        const apply_node& p = g.nodes[static_cast<std::size_t>(us.owner)];
        if (p.fn->kind != op_kind::gemv || p.fn->accumulate || p.fn->transpose_a || p.fn->on_gpu || p.inputs[0] != a) continue;
        const auto& cl = clients[static_cast<std::size_t>(s)];
        if (cl.size() != 1 || std::count(c.inputs.begin(), c.inputs.end(), s) != 1) continue;
        pass_u = static_cast<int>(r);
        au = p.id;
      }
      if (pass_u < 0) continue;
      // The accumulated vector must be ready before the elementwise node (nothing it reads may
      // depend on the node's outputs).
      if (b.fn->accumulate) {
        const slot& y0 = g.slots[static_cast<std::size_t>(b.inputs[0])];
        if (y0.owner >= c.id) continue;
      }
      auto prog = std::make_shared<program>(*node_program(g, c));
      prog->absorbed.insert(prog->absorbed.begin(), g.nodes[static_cast<std::size_t>(au)].op_name());
      prog->absorbed.push_back(b.op_name());
      op o;
      o.kind = op_kind::one_pass_gemv;
      o.fused = prog;
      o.pass_u = pass_u;
      o.pass_g = gs.owner_output;
      o.accumulate = b.fn->accumulate;
      o.alpha = b.fn->alpha;
      o.beta = b.fn->beta;
      apply_node n;
      n.fn = std::make_shared<const op>(std::move(o));
      n.inputs = {a, g.nodes[static_cast<std::size_t>(au)].inputs[1]};
      if (b.fn->accumulate) n.inputs.push_back(b.inputs[0]);
      for (std::size_t r = 0; r < c.inputs.size(); ++r)
        if (static_cast<int>(r) != pass_u) n.inputs.push_back(c.inputs[r]);
      n.outputs = c.outputs;
      n.outputs.push_back(b.outputs[0]);
      rec.notes.push_back("one pass over " + g.slot_text(a) + ": " + g.node_text(au) + ", " + g.node_text(c) + " and " +
                          g.node_text(b));
      ++rec.applied;
      // In the elementwise node's place: its inputs, A, x and y0 are ready there, and every
      // reader of the product comes after the product did.
      const int bid = b.id, cid = c.id;
      // The transpose goes too when the product was its only reader.
      const int mat = b.inputs[b.fn->accumulate ? 1 : 0];
      const int tid = clients[static_cast<std::size_t>(mat)].size() == 1 && !kept.count(mat)
                          ? g.slots[static_cast<std::size_t>(mat)].owner
                          : -1;
      std::vector<apply_node> order;
      for (const apply_node& m : g.nodes) {
        if (m.id == au || m.id == bid || m.id == tid) continue;
        order.push_back(m.id == cid ? n : m);
      }
      g.nodes = std::move(order);
      renumber_nodes(g);
      changed = true;
      break;
    }
  }
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
