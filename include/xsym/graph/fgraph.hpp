#ifndef XSYM_GRAPH_FGRAPH_HPP
#define XSYM_GRAPH_FGRAPH_HPP

#include <memory>
#include <sstream>
#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "../config/cold.hpp"
#include "../expr/op.hpp"
#include "../expr/variable.hpp"

namespace xsym {

/// @brief A value in a compiled function's graph (Theano's Variable).
struct slot {
  dtype type = dtype::float64;
  int rank = 0;
  std::uint8_t broadcastable = 0;  // bit d: dimension d is always 1
  var_kind kind = var_kind::apply;
  std::string name;   // user name of an input or shared variable; empty otherwise
  int owner = -1;     // index of the Apply node that computes it
  int owner_output = 0;
  var_ptr source;     // the symbolic variable (constants and shared values live there)
  bool on_device = false;  // its values live in GPU memory (device=cuda)
};

/// @brief One step of a compiled function: an op applied to input slots, writing output slots.
struct apply_node {
  int id = 0;  // position in the topological order
  std::shared_ptr<const op> fn;
  std::vector<int> inputs;
  std::vector<int> outputs;

  const op& get_op() const { return *fn; }
  std::string op_name() const { return fn->name(); }
  std::string class_name() const { return fn->class_name(); }
};

XSYM_COLD_BEGIN  // graph text and queries: building, reports, debugprint
namespace detail {
inline std::string constant_text(const ndarray& c) {
  auto num = [&](std::int64_t i) {
    const double v = c.flat_as_double(i);
    return c.type() == dtype::bool_ ? std::string(v != 0 ? "True" : "False") : format_float_for(c.type(), v);
  };
  if (c.rank() == 0) return "TensorConstant{" + num(0) + "}";
  bool uniform = true;
  for (std::int64_t i = 1; i < c.size() && uniform; ++i) uniform = c.flat_as_double(i) == c.flat_as_double(0);
  if (uniform && c.size() > 0) return "TensorConstant{" + to_string(c.shape()) + " of " + num(0) + "}";
  if (c.size() <= 8) {
    std::string s = "TensorConstant{[";
    for (std::int64_t i = 0; i < c.size(); ++i) s += (i ? " " : "") + num(i);
    return s + "]}";
  }
  return "TensorConstant{" + to_string(c.shape()) + " " + std::string(dtype_name(c.type())) + "}";
}
}  // namespace detail

/// @brief A compiled function's graph: slots, and Apply nodes in topological order.
struct function_graph {
  std::vector<slot> slots;
  std::vector<apply_node> nodes;
  std::vector<int> inputs;                      // slot of each function input
  std::vector<int> outputs;                     // slot of each function output
  std::vector<std::pair<int, int>> updates;     // (shared slot, new value slot)

  /// @brief How a slot is printed as an argument: "x", "Elemwise{add,no_inplace}.0", "TensorConstant{2.0}".
  std::string slot_text(int s) const {
    const slot& v = slots[static_cast<std::size_t>(s)];
    switch (v.kind) {
      case var_kind::input:
      case var_kind::shared: return v.name.empty() ? std::string("<") + std::string(dtype_name(v.type)) + ">" : v.name;
      case var_kind::constant: return detail::constant_text(v.source->constant);
      case var_kind::apply: break;
    }
    if (!v.name.empty()) return v.name;
    return nodes[static_cast<std::size_t>(v.owner)].op_name() + "." + std::to_string(v.owner_output);
  }

  /// @brief "Elemwise{add,no_inplace}(x, y)": the node as the profile's Apply section prints it.
  std::string node_text(const apply_node& n) const {
    std::string s = n.op_name() + "(";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", " : "") + slot_text(n.inputs[i]);
    return s + ")";
  }
  std::string node_text(int i) const { return node_text(nodes[static_cast<std::size_t>(i)]); }

  /// @brief For every slot, the nodes that read it.
  std::vector<std::vector<int>> clients() const {
    std::vector<std::vector<int>> c(slots.size());
    for (const auto& n : nodes)
      for (int in : n.inputs) c[static_cast<std::size_t>(in)].push_back(n.id);
    return c;
  }
};

/// @brief After a rewrite replaced or reordered nodes: ids in the new order, and each slot's
/// owner (-1 for values no node computes any more).
inline void renumber_nodes(function_graph& g) {
  for (auto& s : g.slots) s.owner = -1;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    g.nodes[i].id = static_cast<int>(i);
    for (std::size_t o = 0; o < g.nodes[i].outputs.size(); ++o) {
      g.slots[static_cast<std::size_t>(g.nodes[i].outputs[o])].owner = static_cast<int>(i);
      g.slots[static_cast<std::size_t>(g.nodes[i].outputs[o])].owner_output = static_cast<int>(o);
    }
  }
}

/// @brief The slots a function hands back, its outputs and its updates' new values: a rewrite
/// may not fold them into a node that no longer writes them.
inline std::unordered_set<int> kept_slots(const function_graph& g) {
  std::unordered_set<int> kept(g.outputs.begin(), g.outputs.end());
  for (auto [target, value] : g.updates) kept.insert(value);
  return kept;
}

/// @brief Drops the nodes with these ids (a rewrite absorbed them into others) and renumbers.
inline void remove_nodes(function_graph& g, const std::vector<int>& ids) {
  if (ids.empty()) return;
  std::vector<apply_node> order;
  for (apply_node& m : g.nodes)
    if (std::find(ids.begin(), ids.end(), m.id) == ids.end()) order.push_back(std::move(m));
  g.nodes = std::move(order);
  renumber_nodes(g);
}

/// @brief Prints the graph from its outputs down, one line per node, as Theano's debugprint does.
inline void debugprint(const function_graph& g, std::ostream& os) {
  std::vector<std::string> ids(g.nodes.size());
  std::vector<std::string> slot_ids(g.slots.size());
  int next = 0;
  auto make_id = [&]() {
    std::string s;
    int n = next++;
    do {
      s.insert(s.begin(), static_cast<char>('A' + n % 26));
      n = n / 26 - 1;
    } while (n >= 0);
    return s;
  };
  std::vector<bool> shown(g.nodes.size(), false);
  auto walk = [&](auto&& self, int s, const std::string& prefix, bool last, bool root) -> void {
    const slot& v = g.slots[static_cast<std::size_t>(s)];
    std::string& id = v.owner >= 0 ? ids[static_cast<std::size_t>(v.owner)] : slot_ids[static_cast<std::size_t>(s)];
    if (id.empty()) id = make_id();
    const std::string branch = root ? "" : (last ? "└─ " : "├─ ");
    std::string label = v.owner >= 0 ? g.nodes[static_cast<std::size_t>(v.owner)].op_name() : g.slot_text(s);
    if (v.owner >= 0 && g.nodes[static_cast<std::size_t>(v.owner)].outputs.size() > 1)
      label += "." + std::to_string(v.owner_output);
    os << prefix << branch << label << " [id " << id << "]";
    if (v.owner >= 0) os << " " << v.owner;
    os << "\n";
    if (v.owner < 0) return;
    const std::string child_prefix = prefix + (root ? "" : (last ? "   " : "│  "));
    if (shown[static_cast<std::size_t>(v.owner)]) {
      os << child_prefix << "└─ ···\n";
      return;
    }
    shown[static_cast<std::size_t>(v.owner)] = true;
    const auto& ins = g.nodes[static_cast<std::size_t>(v.owner)].inputs;
    for (std::size_t i = 0; i < ins.size(); ++i) self(self, ins[i], child_prefix, i + 1 == ins.size(), false);
  };
  for (int o : g.outputs) walk(walk, o, "", true, true);
  for (auto [target, value] : g.updates) {
    os << "update " << g.slot_text(target) << ":\n";
    walk(walk, value, "", true, true);
  }
}

XSYM_COLD_END

}  // namespace xsym

#endif
