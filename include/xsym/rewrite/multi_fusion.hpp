#ifndef XSYM_REWRITE_MULTI_FUSION_HPP
#define XSYM_REWRITE_MULTI_FUSION_HPP

// multi_output_fusion: elementwise nodes joined by an edge, with the same broadcast pattern
// (hence the same shape at run time), become one Composite with several outputs. This is
// what fuses a value read by many elementwise users (p_1 in the logistic regression) with
// its users, which tree fusion cannot do.
#include <functional>
#include <numeric>

#include "../config/limits.hpp"
#include "../graph/fgraph.hpp"
#include "rewrites.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // rewrites run when a function is built

namespace xsym::detail {

inline std::shared_ptr<const program> node_program(const function_graph& g, const apply_node& n) {
  if (n.fn->kind == op_kind::composite) return n.fn->fused;
  auto p = std::make_shared<program>();
  p->n_inputs = static_cast<int>(n.inputs.size());
  for (int in : n.inputs) p->reg_types.push_back(g.slots[static_cast<std::size_t>(in)].type);
  instruction ins{};
  ins.op = n.fn->scalar;
  ins.out_type = g.slots[static_cast<std::size_t>(n.outputs[0])].type;
  ins.in_type = ins.op == scalar_op::switch_ ? p->reg_types[1] : p->reg_types[0];
  for (std::size_t j = 0; j < n.inputs.size(); ++j) ins.args[j] = static_cast<int>(j);
  ins.dst = p->n_inputs;
  p->reg_types.push_back(ins.out_type);
  p->code.push_back(ins);
  p->outputs = {ins.dst};
  p->text = std::string(info(ins.op).name);
  p->absorbed = {n.fn->name()};
  return p;
}

inline constexpr std::size_t max_fused_outputs = limits::max_outputs;

inline void multi_output_fusion_pass(function_graph& g, rewrite_record& rec) {
  const std::size_t n_nodes = g.nodes.size();
  auto elementwise = [&](std::size_t i) {
    const auto k = g.nodes[i].fn->kind;
    return (k == op_kind::elemwise || k == op_kind::composite) && g.nodes[i].outputs.size() == 1;
  };
  std::vector<int> group(n_nodes);
  std::iota(group.begin(), group.end(), 0);
  std::function<int(int)> find = [&](int a) {
    return group[static_cast<std::size_t>(a)] == a ? a : group[static_cast<std::size_t>(a)] = find(group[static_cast<std::size_t>(a)]);
  };
  std::vector<std::vector<int>> members_of(n_nodes);
  for (std::size_t i = 0; i < n_nodes; ++i) members_of[i] = {static_cast<int>(i)};
  std::vector<std::size_t> registers_of(n_nodes);
  for (std::size_t i = 0; i < n_nodes; ++i)
    registers_of[i] = elementwise(i) ? node_program(g, g.nodes[i])->reg_types.size() : 0;
  const auto clients = g.clients();
  std::vector<char> kept(g.slots.size(), 0);
  for (int s : g.outputs) kept[static_cast<std::size_t>(s)] = 1;
  for (auto [t, v] : g.updates) kept[static_cast<std::size_t>(v)] = 1;
  // Merging two groups must keep the graph of groups acyclic: no path from the merged group
  // back to itself through other groups (a node outside feeding it from its own outputs).
  auto acyclic_after_merge = [&](int ga, int gb) {
    std::vector<char> seen(n_nodes, 0);
    std::vector<int> stack;
    auto push_consumers = [&](int grp) {
      for (int i : members_of[static_cast<std::size_t>(grp)])
        for (int s : g.nodes[static_cast<std::size_t>(i)].outputs)
          for (int c : clients[static_cast<std::size_t>(s)]) {
            const int h = find(c);
            if (h == ga || h == gb) continue;
            if (!seen[static_cast<std::size_t>(h)]) {
              seen[static_cast<std::size_t>(h)] = 1;
              stack.push_back(h);
            }
          }
    };
    push_consumers(ga);
    push_consumers(gb);
    while (!stack.empty()) {
      const int h = stack.back();
      stack.pop_back();
      for (int i : members_of[static_cast<std::size_t>(h)])
        for (int s : g.nodes[static_cast<std::size_t>(i)].outputs)
          for (int c : clients[static_cast<std::size_t>(s)]) {
            const int k = find(c);
            if (k == ga || k == gb) return false;
            if (!seen[static_cast<std::size_t>(k)]) {
              seen[static_cast<std::size_t>(k)] = 1;
              stack.push_back(k);
            }
          }
    }
    return true;
  };
  // Outputs the merged group would need: values read outside it or kept by the function.
  auto outputs_after_merge = [&](int ga, int gb) {
    std::size_t n = 0;
    for (int grp : {ga, gb})
      for (int i : members_of[static_cast<std::size_t>(grp)]) {
        const int s = g.nodes[static_cast<std::size_t>(i)].outputs[0];
        bool outside = kept[static_cast<std::size_t>(s)] != 0;
        for (int c : clients[static_cast<std::size_t>(s)]) {
          const int h = find(c);
          outside |= h != ga && h != gb;
        }
        n += outside;
      }
    return n;
  };
  for (std::size_t c = 0; c < n_nodes; ++c) {
    if (!elementwise(c)) continue;
    const slot& out = g.slots[static_cast<std::size_t>(g.nodes[c].outputs[0])];
    for (int in : g.nodes[c].inputs) {
      const slot& s = g.slots[static_cast<std::size_t>(in)];
      if (s.owner < 0 || !elementwise(static_cast<std::size_t>(s.owner))) continue;
      if (s.rank != out.rank || s.broadcastable != out.broadcastable) continue;
      const int ga = find(s.owner), gb = find(static_cast<int>(c));
      if (ga == gb) continue;
      if (registers_of[static_cast<std::size_t>(ga)] + registers_of[static_cast<std::size_t>(gb)] > limits::max_fusion_registers) {
        rec.notes.push_back("not merged: " + g.node_text(s.owner) + " with its user would exceed the register limit");
        continue;
      }
      if (outputs_after_merge(ga, gb) > max_fused_outputs) {
        rec.notes.push_back("not merged: " + g.node_text(s.owner) + " with its user would need more than " +
                            std::to_string(max_fused_outputs) + " outputs");
        continue;
      }
      if (!acyclic_after_merge(ga, gb)) {
        rec.notes.push_back("not merged: " + g.node_text(s.owner) + " feeds its user also through a non-elementwise node");
        continue;
      }
      group[static_cast<std::size_t>(gb)] = ga;
      auto& ma = members_of[static_cast<std::size_t>(ga)];
      auto& mb = members_of[static_cast<std::size_t>(gb)];
      ma.insert(ma.end(), mb.begin(), mb.end());
      mb.clear();
      std::sort(ma.begin(), ma.end());  // topological: node ids are in topological order
      registers_of[static_cast<std::size_t>(ga)] += registers_of[static_cast<std::size_t>(gb)];
    }
  }
  // Build one Composite per group of two or more nodes, at the position of its last node.
  std::vector<std::vector<int>> members(n_nodes);
  for (std::size_t i = 0; i < n_nodes; ++i) members[static_cast<std::size_t>(find(static_cast<int>(i)))].push_back(static_cast<int>(i));
  std::vector<apply_node> new_nodes;
  std::vector<int> replaced_at(n_nodes, -1);  // group leader -> index in new_nodes
  std::vector<char> absorbed_node(n_nodes, 0);
  for (std::size_t leader = 0; leader < n_nodes; ++leader) {
    const auto& m = members[leader];
    if (m.size() < 2) continue;
    std::vector<char> member(n_nodes, 0);
    for (int i : m) member[static_cast<std::size_t>(i)] = 1;
    auto prog = std::make_shared<program>();
    std::unordered_map<int, int> reg_of_slot;
    std::vector<int> ext_inputs;
    // External inputs first.
    for (int i : m)
      for (int in : g.nodes[static_cast<std::size_t>(i)].inputs) {
        const int owner = g.slots[static_cast<std::size_t>(in)].owner;
        if ((owner >= 0 && member[static_cast<std::size_t>(owner)]) || reg_of_slot.count(in)) continue;
        reg_of_slot[in] = static_cast<int>(ext_inputs.size());
        ext_inputs.push_back(in);
        prog->reg_types.push_back(g.slots[static_cast<std::size_t>(in)].type);
      }
    prog->n_inputs = static_cast<int>(ext_inputs.size());
    std::vector<int> out_slots;
    std::unordered_map<std::string, int> computed;
    for (int i : m) {
      const apply_node& n = g.nodes[static_cast<std::size_t>(i)];
      const auto sub = node_program(g, n);
      std::vector<int> remap(sub->reg_types.size());
      for (int r = 0; r < sub->n_inputs; ++r) remap[static_cast<std::size_t>(r)] = reg_of_slot.at(n.inputs[static_cast<std::size_t>(r)]);
      for (std::size_t r = static_cast<std::size_t>(sub->n_inputs); r < sub->reg_types.size(); ++r) {
        remap[r] = static_cast<int>(prog->reg_types.size());
        prog->reg_types.push_back(sub->reg_types[r]);
      }
      for (instruction ins : sub->code) {
        const int arity = info(ins.op).arity;
        for (int j = 0; j < 3; ++j) ins.args[j] = j < arity ? remap[static_cast<std::size_t>(ins.args[j])] : 0;
        // The same op on the same registers is computed once (the parts repeat subexpressions).
        const std::string key = std::to_string(static_cast<int>(ins.op)) + "/" + std::to_string(static_cast<int>(ins.in_type)) +
                                "/" + std::to_string(static_cast<int>(ins.out_type)) + "/" + std::to_string(ins.args[0]) + "," +
                                std::to_string(ins.args[1]) + "," + std::to_string(ins.args[2]);
        if (auto it = computed.find(key); it != computed.end()) {
          remap[static_cast<std::size_t>(ins.dst)] = it->second;
          continue;
        }
        ins.dst = remap[static_cast<std::size_t>(ins.dst)];
        computed.emplace(key, ins.dst);
        prog->code.push_back(ins);
      }
      for (const auto& a : sub->absorbed) prog->absorbed.push_back(a);
      const int out_slot = n.outputs[0];
      reg_of_slot[out_slot] = remap[static_cast<std::size_t>(sub->outputs[0])];
      bool outside = kept[static_cast<std::size_t>(out_slot)] != 0;
      for (int cl : clients[static_cast<std::size_t>(out_slot)]) outside |= !member[static_cast<std::size_t>(cl)];
      if (outside) out_slots.push_back(out_slot);
      absorbed_node[static_cast<std::size_t>(i)] = 1;
    }
    for (int s : out_slots) prog->outputs.push_back(reg_of_slot.at(s));
    const auto texts = register_texts(*prog);
    for (std::size_t o = 0; o < prog->outputs.size(); ++o)
      prog->text += (o ? ", " : "") + texts[static_cast<std::size_t>(prog->outputs[o])];
    apply_node n;
    op c;
    c.kind = op_kind::composite;
    c.fused = prog;
    n.fn = std::make_shared<const op>(std::move(c));
    n.inputs = ext_inputs;
    n.outputs = out_slots;
    ++rec.applied;
    rec.notes.push_back("merged " + std::to_string(m.size()) + " elementwise nodes into one Composite with " +
                        std::to_string(out_slots.size()) + " outputs");
    replaced_at[static_cast<std::size_t>(m.back())] = static_cast<int>(new_nodes.size());
    new_nodes.push_back(std::move(n));
  }
  if (new_nodes.empty()) return;
  // New order: the old one, with each group where all its inputs are ready, and every node
  // after the producers of its inputs (a topological sort that keeps the old order otherwise).
  std::vector<apply_node> pending;
  for (std::size_t i = 0; i < n_nodes; ++i) {
    if (replaced_at[i] >= 0) pending.push_back(new_nodes[static_cast<std::size_t>(replaced_at[i])]);
    else if (!absorbed_node[i]) pending.push_back(g.nodes[i]);
  }
  std::vector<char> ready(g.slots.size(), 1);
  for (const auto& n : pending)
    for (int o : n.outputs) ready[static_cast<std::size_t>(o)] = 0;
  std::vector<apply_node> order;
  std::vector<char> placed(pending.size(), 0);
  while (order.size() < pending.size()) {
    bool progress = false;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (placed[i]) continue;
      bool ok = true;
      for (int in : pending[i].inputs) ok &= ready[static_cast<std::size_t>(in)] != 0;
      if (!ok) continue;
      placed[i] = 1;
      for (int o : pending[i].outputs) ready[static_cast<std::size_t>(o)] = 1;
      order.push_back(pending[i]);
      progress = true;
      break;  // restart from the front: earlier nodes keep their place
    }
    if (!progress) throw std::logic_error("xsym: multi_output_fusion produced a cycle");
  }
  g.nodes = std::move(order);
  renumber_nodes(g);
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
