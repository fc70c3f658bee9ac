#ifndef XSYM_PROFILE_EXPORT_HPP
#define XSYM_PROFILE_EXPORT_HPP

// Machine-readable forms of a profile: JSON (every number of the text report), Chrome
// trace events (loads in Perfetto and chrome://tracing) and Graphviz DOT of the graph.
#include <fstream>
#include <ostream>
#include <string>

#include "report.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // exports run once, after profiling

namespace xsym {

namespace detail {
// Hex colour from white (no time) to red (all of it).
inline std::string heat(double share) {
  const int g = static_cast<int>(255 * (1.0 - std::clamp(share, 0.0, 1.0)));
  return fmt("#ff%02x%02x", g, g);
}

inline std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '<' || c == '>' || c == '|') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace detail

namespace detail {
inline void write_json(const std::string& message, const std::vector<std::shared_ptr<function_profile>>& fns,
                       const region_list& regions, std::ostream& os) {
  using detail::json_number;
  using detail::json_string;
  os << "{\n  \"message\": " << json_string(message) << ",\n  \"functions\": [";
  for (std::size_t fi = 0; fi < fns.size(); ++fi) {
    const function_profile& f = *fns[fi];
    os << (fi ? "," : "") << "\n    {\n      \"name\": " << json_string(f.name()) << ",\n";
    os << "      \"calls\": " << f.calls << ",\n";
    os << "      \"call_time_s\": " << json_number(f.call_time()) << ",\n";
    os << "      \"fn_time_s\": " << json_number(f.fn_time()) << ",\n";
    os << "      \"thunk_time_s\": " << json_number(f.thunk_time()) << ",\n";
    os << "      \"compile\": {\"rewrite_s\": " << json_number(f.facts->rewrite_seconds)
       << ", \"validate_s\": " << json_number(f.facts->validate_seconds) << ", \"linker_s\": " << json_number(f.facts->linker_seconds)
       << "},\n";
    os << "      \"implementation\": " << json_string(f.facts->implementation) << ",\n";
    os << "      \"device_implementation\": " << json_string(f.facts->device_implementation) << ",\n";
    os << "      \"compiled_library\": " << json_string(f.facts->compiled_library) << ",\n";
    const auto peak = detail::simulate_peak(f, true, f.facts->gc);
    os << "      \"memory\": {\"peak_current_bytes\": " << json_number(peak.first)
       << ", \"peak_no_inplace_bytes\": " << json_number(detail::simulate_peak(f, false, f.facts->gc).first)
       << ", \"peak_no_gc_bytes\": " << json_number(detail::simulate_peak(f, true, false).first)
       << ", \"device_peak_current_bytes\": " << json_number(peak.second)
       << ", \"measured_device_peak_bytes\": " << f.measured_device_peak_bytes
       << ", \"measured_peak_bytes\": " << f.measured_peak_bytes << "},\n";
    os << "      \"nodes\": [";
    const auto rows = detail::apply_rows(f, false, nullptr);
    for (std::size_t i = 0; i < rows.size(); ++i)
      os << (i ? "," : "") << "\n        " << detail::json_object(detail::apply_columns, rows[i]);
    os << "\n      ],\n      \"rewrites\": [";
    for (std::size_t r = 0; r < f.facts->rewrites.size(); ++r) {
      const auto& rw = f.facts->rewrites[r];
      os << (r ? "," : "") << "\n        {\"name\": " << json_string(rw.name) << ", \"time_s\": " << json_number(rw.seconds)
         << ", \"applied\": " << rw.applied << ", \"nodes_before\": " << rw.nodes_before
         << ", \"nodes_after\": " << rw.nodes_after << "}";
    }
    os << "\n      ]\n    }";
  }
  os << "\n  ],";
  // The Class and Ops sections, with user regions, as the text report sums them.
  const auto [classes, ops] = detail::summary_rows(fns, regions);
  for (const auto* section : {&classes, &ops}) {
    os << "\n  \"" << (section == &classes ? "classes" : "ops") << "\": [";
    for (std::size_t i = 0; i < section->size(); ++i)
      os << (i ? "," : "") << "\n    " << detail::json_object(detail::summary_columns, (*section)[i]);
    os << "\n  ],";
  }
  os << "\n  \"regions\": [";
  for (std::size_t r = 0; r < regions.size(); ++r)
    os << (r ? ", " : "") << "{\"name\": " << json_string(regions[r].first)
       << ", \"time_s\": " << json_number(static_cast<double>(regions[r].second.ticks) * detail::seconds_per_tick())
       << ", \"calls\": " << regions[r].second.calls << "}";
  os << "]\n}\n";
}
}  // namespace detail

/// @brief Writes every number of the report as JSON: functions, nodes, memory, rewrites, regions.
inline void write_json(const profile_stats& stats, std::ostream& os) {
  detail::write_json(stats.message(), stats.snapshot(), stats.regions(), os);
}

/// @brief Chrome trace events, one per recorded node run (stats.enable_trace() first).
inline void write_chrome_trace(const profile_stats& stats, std::ostream& os) {
  const double us = detail::seconds_per_tick() * 1e6;
  std::uint64_t origin = ~std::uint64_t{0};
  const auto fns = stats.snapshot();
  for (const auto& f : fns)
    for (const auto& e : f->events) origin = std::min(origin, e.start);
  os << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [";
  bool first = true;
  for (std::size_t fi = 0; fi < fns.size(); ++fi) {
    const function_profile& f = *fns[fi];
    for (const auto& e : f.events) {
      os << (first ? "\n" : ",\n") << "{\"name\": " << detail::json_string(f.facts->graph->nodes[e.node].op_name())
         << ", \"cat\": " << detail::json_string(f.name()) << ", \"ph\": \"X\", \"pid\": 1, \"tid\": " << e.thread
         << ", \"ts\": " << detail::json_number(static_cast<double>(e.start - origin) * us)
         << ", \"dur\": " << detail::json_number(static_cast<double>(e.duration) * us)
         << ", \"args\": {\"apply\": " << detail::json_string(f.facts->graph->node_text(static_cast<int>(e.node)))
         << ", \"id\": " << e.node << "}}";
      first = false;
    }
  }
  os << "\n]}\n";
}

/// @brief Graphviz DOT of a function's graph; with a profile, nodes are shaded by share of time.
inline void write_dot(const function_graph& g, std::ostream& os, const function_profile* prof = nullptr) {
  os << "digraph xsym {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  const double total = prof ? prof->thunk_time() : 0;
  for (std::size_t s = 0; s < g.slots.size(); ++s) {
    const slot& v = g.slots[s];
    if (v.owner >= 0 || v.kind == var_kind::apply) continue;  // computed values are nodes; fused-away ones are gone
    os << "  s" << s << " [shape=ellipse, label=\"" << detail::dot_escape(g.slot_text(static_cast<int>(s))) << "\\n"
       << dtype_name(v.type) << "\"];\n";
  }
  for (const auto& n : g.nodes) {
    const double t = prof ? prof->node_time(static_cast<std::size_t>(n.id)) : 0;
    const double share = total > 0 ? t / total : 0;
    os << "  n" << n.id << " [shape=box, style=filled, fillcolor=\"" << detail::heat(share) << "\", label=\""
       << detail::dot_escape(n.op_name());
    if (prof) os << "\\n" << detail::fmt("%.1f%% (%.2es)", 100 * share, t);
    os << "\"];\n";
  }
  auto source = [&](int s) {
    const slot& v = g.slots[static_cast<std::size_t>(s)];
    return v.owner >= 0 ? "n" + std::to_string(v.owner) : "s" + std::to_string(s);
  };
  for (const auto& n : g.nodes)
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const slot& v = g.slots[static_cast<std::size_t>(n.inputs[k])];
      const bool multi = v.owner >= 0 && g.nodes[static_cast<std::size_t>(v.owner)].outputs.size() > 1;
      os << "  " << source(n.inputs[k]) << " -> n" << n.id << " [label=\""
         << (multi ? "out " + std::to_string(v.owner_output) + " -> " : std::string()) << k << "\"];\n";
    }
  for (std::size_t o = 0; o < g.outputs.size(); ++o)
    os << "  out" << o << " [shape=plaintext, label=\"output " << o << "\"];\n  " << source(g.outputs[o]) << " -> out" << o
       << ";\n";
  for (std::size_t u = 0; u < g.updates.size(); ++u)
    os << "  upd" << u << " [shape=plaintext, label=\"update " << detail::dot_escape(g.slot_text(g.updates[u].first))
       << "\"];\n  " << source(g.updates[u].second) << " -> upd" << u << " [style=dashed];\n";
  os << "}\n";
}

}  // namespace xsym
XSYM_COLD_END

#endif
