#ifndef XSYM_PROFILE_COLUMNS_HPP
#define XSYM_PROFILE_COLUMNS_HPP

// The report's columns, one row each: its header in the text report, its key in the JSON
// export, and how a table row gives its cell and its value. The text report (report.hpp) and
// the JSON export (export.hpp) both read these tables, so a column is added in one place.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profile_stats.hpp"
#include "roofline.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // reports are printed, not per call

namespace xsym::detail {

inline std::string fmt(const char* f, auto... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, f, args...);
  if (n < static_cast<int>(sizeof buf)) return buf;
  std::string out(static_cast<std::size_t>(n) + 1, '\0');  // a long name: the whole line
  std::snprintf(out.data(), out.size(), f, args...);
  out.pop_back();
  return out;
}

// Length of the valid UTF-8 sequence at s[i], 0 if it is not one (overlong forms, surrogates
// and code points past U+10FFFF are invalid too).
inline std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// A JSON string: names are the user's bytes, so invalid UTF-8 becomes U+FFFD (JSON must be UTF-8).
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const std::size_t n = utf8_length(s, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
      } else {
        out.append(s, i, n);
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt("\\u%04x", c);
        else out += c;
    }
  }
  return out + "\"";
}

inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt("%.9g", v);
}

inline std::string json_value_info(const value_info& v) {
  std::string s = "{\"dtype\": " + json_string(std::string(dtype_name(v.type))) + ", \"shape\": [";
  for (int d = 0; d < v.shape.rank; ++d) s += (d ? ", " : "") + std::to_string(v.shape[d]);
  s += "], \"strides\": [";
  for (int d = 0; d < v.shape.rank; ++d)
    s += (d ? ", " : "") + std::to_string(v.strides[static_cast<std::size_t>(d)] * static_cast<std::int64_t>(dtype_size(v.type)));
  return s + "], \"c_contiguous\": " + (v.c_contiguous ? "true" : "false") + "}";
}

inline std::string json_value_infos(const std::vector<value_info>& values) {
  std::string s = "[";
  for (const auto& v : values) s += (s.size() > 1 ? ", " : "") + json_value_info(v);
  return s + "]";
}

// A fused program's floating-point operations per element, from the op table.
inline int program_flops(const program& p) {
  int per_element = 0;
  for (const instruction& step : p.code) per_element += info(step.op).flops;
  return per_element;
}

// Floating-point operations of one call, from the shapes it saw (0 where unknown); an
// elementwise op's per element come from the op table.
inline double node_flops(const apply_node& n, const std::vector<value_info>& ins, const std::vector<value_info>& outs) {
  if (ins.empty() || outs.empty()) return 0;
  const double out = static_cast<double>(outs[0].shape.size());
  switch (n.fn->kind) {
    case op_kind::elemwise: return out * info(n.fn->scalar).flops;
    case op_kind::composite: return out * program_flops(*n.fn->fused);
    case op_kind::one_pass_gemv:  // two products over A, and the Composite per row
      return 4.0 * static_cast<double>(ins[0].shape.size()) + out * program_flops(*n.fn->fused);
    case op_kind::reduce: {  // one combine per element; a fused input's ops on each too
      if (!n.fn->fused) return static_cast<double>(ins[0].shape.size());
      double elements = 1;  // the inputs' broadcast shape: each dimension's largest extent
      for (int d = 0; d < ins[0].shape.rank; ++d) {
        std::int64_t e = 0;
        for (const value_info& v : ins) e = std::max(e, d < v.shape.rank ? v.shape[d] : 1);
        elements *= static_cast<double>(e);
      }
      return elements * (1 + program_flops(*n.fn->fused));
    }
    case op_kind::inc_rows: return static_cast<double>(ins[1].shape.size());
    case op_kind::inc_subtensor:  // one addition per element of the region; a fused value's ops
      if (!n.fn->fused && n.fn->set_values) return 0;
      try {
        return static_cast<double>(detail::region_size(n.fn->slices, ins[0].shape)) *
               (n.fn->fused ? program_flops(*n.fn->fused) : 1);
      } catch (const index_error&) {
        return 0;
      }
    case op_kind::arg_reduce: return static_cast<double>(ins[0].shape.size());  // one comparison each
    case op_kind::cumulative: return static_cast<double>(ins[0].shape.size());
    case op_kind::batched_dot: return 2.0 * out * static_cast<double>(ins[0].shape[2]);
    case op_kind::allreduce:  // this rank's share of combining the ranks' arrays
      return n.fn->reduction == reduce_op::sum || n.fn->reduction == reduce_op::prod ? out : 0;
    case op_kind::gemv: return 2.0 * static_cast<double>(ins[n.fn->accumulate ? 1 : 0].shape.size());
    case op_kind::dot22: return 2.0 * out * static_cast<double>(ins[n.fn->accumulate ? 1 : 0].shape[1]);
    case op_kind::dot:
      return ins[0].shape.rank == 2 && ins[1].shape.rank == 2 ? 2.0 * out * static_cast<double>(ins[0].shape[1])
                                                              : 2.0 * static_cast<double>(std::max(ins[0].shape.size(), ins[1].shape.size()));
    default: return 0;
  }
}

// Whether a node's output was a view of its input at the recorded layout: a reshape copies an
// input that is not C-contiguous (run_reshape).
inline bool acts_as_view(const apply_node& n, const std::vector<value_info>& ins) {
  return n.fn->is_view() && (n.fn->kind != op_kind::reshape || ins.empty() || ins[0].c_contiguous);
}

// Bytes a node must read and write at least once: its inputs and outputs (none for views
// and shape queries, which move no data).
inline double node_bytes(const apply_node& n, const std::vector<value_info>& ins, const std::vector<value_info>& outs) {
  if (acts_as_view(n, ins) || n.fn->kind == op_kind::shape_prod) return 0;
  // Gathers and scatters touch only the indexed rows of x (and the indices).
  if ((n.fn->kind == op_kind::take || n.fn->kind == op_kind::inc_rows) && (ins.size() < 2 || outs.empty())) return 0;
  if (n.fn->kind == op_kind::take)
    return 2.0 * static_cast<double>(outs[0].nbytes()) + static_cast<double>(ins[1].nbytes());
  if (n.fn->kind == op_kind::inc_rows)
    return 2.0 * static_cast<double>(ins[0].nbytes()) + 3.0 * static_cast<double>(ins[1].nbytes()) +
           static_cast<double>(ins[2].nbytes());
  double b = 0;
  for (std::size_t k = 0; k < ins.size(); ++k) {  // an array read twice (x * x) is moved once
    bool seen = false;
    for (std::size_t j = 0; j < k && k < n.inputs.size() && !seen; ++j) seen = n.inputs[j] == n.inputs[k];
    if (!seen) b += static_cast<double>(ins[k].nbytes());
  }
  for (const auto& v : outs) b += static_cast<double>(v.nbytes());
  return b;
}

/// Adds the calls since the profile's last shape sample, at that sample's shapes, to its work
/// sums: called before a new sample replaces the shapes, so rates are total work over total time.
inline void sum_sampled_work(function_profile& f) {
  const std::int64_t since = f.calls - f.summed_calls;
  if (since <= 0) return;
  const function_graph& g = f.graph();
  f.node_flops_sum.resize(g.nodes.size(), 0.0);
  f.node_bytes_sum.resize(g.nodes.size(), 0.0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    f.node_flops_sum[i] += node_flops(g.nodes[i], f.node_inputs[i], f.node_outputs[i]) * static_cast<double>(since);
    f.node_bytes_sum[i] += node_bytes(g.nodes[i], f.node_inputs[i], f.node_outputs[i]) * static_cast<double>(since);
  }
  f.summed_calls = f.calls;
}

/// Node i's flops and bytes over every call: the sums, and the calls since at the current shapes.
inline std::pair<double, double> node_work(const function_profile& f, std::size_t i) {
  double flops = i < f.node_flops_sum.size() ? f.node_flops_sum[i] : 0.0;
  double bytes = i < f.node_bytes_sum.size() ? f.node_bytes_sum[i] : 0.0;
  const std::int64_t rest = f.node_calls[i] - f.summed_calls;
  if (rest > 0) {
    const apply_node& n = f.graph().nodes[i];
    flops += node_flops(n, f.node_inputs[i], f.node_outputs[i]) * static_cast<double>(rest);
    bytes += node_bytes(n, f.node_inputs[i], f.node_outputs[i]) * static_cast<double>(rest);
  }
  return {flops, bytes};
}

/// One line of the Class or Ops section: a class or an op, summed over its Apply nodes.
struct summary_row {
  std::string key;
  std::string type;
  double time = 0;
  std::int64_t calls = 0;
  int applies = 0;
  double flops = 0, bytes = 0;  // over every call, each at its shapes (node_work)
  double share = 0, cumulative = 0;  // percent of the report's total, set when printed
  int type_width = 4;  // the widest <type> among the table's rows, so that "cpu/typed" keeps columns aligned
  double per_call() const { return calls ? time / static_cast<double>(calls) : 0.0; }
};

/// One line of the Apply section, and one node of the JSON export; a user region
/// (XSYM_PROFILE_SCOPE) in the text report has no function (fn null, no id).
struct apply_row {
  std::string label;  // the Apply name, prefixed by the function's when a report has several
  const function_profile* fn = nullptr;
  std::size_t node = 0;
  double time = 0;
  std::int64_t calls = 0;
  double share = 0, cumulative = 0;
  double flops = 0, bytes = 0;
  const machine_limits* limits = nullptr;  // profiling.roofline's probe, for <%BW> and <%peak>

  const apply_node& apply() const { return fn->graph().nodes[node]; }
  double per_call() const { return calls ? time / static_cast<double>(calls) : 0.0; }
  double gflops_per_s() const { return flops > 0 && per_call() > 0 ? flops / per_call() / 1e9 : NAN; }
  double gb_per_s() const { return bytes > 0 && per_call() > 0 ? bytes / per_call() / 1e9 : NAN; }
};

/// A report column: its text header ("" for a JSON-only column), its JSON key ("" for a
/// text-only one), its cell with the spaces before it, its JSON value ("" leaves the key out).
template <class Row>
struct column {
  std::string_view header;
  std::string_view key;
  std::string (*cell)(const Row&);
  std::string (*json)(const Row&);
  bool roofline = false;  // shown with profiling.roofline only
};

inline std::string no_cell(const auto&) { return {}; }
inline std::string cell_or_blank(double v, const char* f, std::size_t width) {
  return std::isfinite(v) ? fmt(f, v) : std::string(width, ' ');
}

inline constexpr column<summary_row> summary_columns[] = {
    {"<% time>", "", [](const summary_row& r) { return fmt("  %5.1f%%", r.share); }, no_cell},
    {"<sum %>", "", [](const summary_row& r) { return fmt("   %5.1f%%", r.cumulative); }, no_cell},
    {"<apply time>", "time_s", [](const summary_row& r) { return fmt("      %6.3fs", r.time); },
     [](const summary_row& r) { return json_number(r.time); }},
    {"<time per call>", "time_per_call_s", [](const summary_row& r) { return fmt("       %.2es", r.per_call()); },
     [](const summary_row& r) { return json_number(r.per_call()); }},
    {"<type>", "type", [](const summary_row& r) { return fmt("     %-*s", r.type_width, r.type.c_str()); },
     [](const summary_row& r) { return json_string(r.type); }},
    {"<#call>", "calls", [](const summary_row& r) { return fmt(" %6lld", static_cast<long long>(r.calls)); },
     [](const summary_row& r) { return std::to_string(r.calls); }},
    {"<#apply>", "applies", [](const summary_row& r) { return fmt("  %6d", r.applies); },
     [](const summary_row& r) { return std::to_string(r.applies); }},
    {"<name>", "name", [](const summary_row& r) { return "   " + r.key; }, [](const summary_row& r) { return json_string(r.key); }},
};

inline constexpr column<apply_row> apply_columns[] = {
    {"<% time>", "", [](const apply_row& r) { return fmt("  %5.1f%%", r.share); }, no_cell},
    {"<sum %>", "", [](const apply_row& r) { return fmt("   %5.1f%%", r.cumulative); }, no_cell},
    {"<apply time>", "time_s", [](const apply_row& r) { return fmt("      %6.3fs", r.time); },
     [](const apply_row& r) { return json_number(r.time); }},
    {"<time per call>", "time_per_call_s", [](const apply_row& r) { return fmt("       %.2es", r.per_call()); },
     [](const apply_row& r) { return json_number(r.per_call()); }},
    {"<#call>", "calls", [](const apply_row& r) { return fmt("   %6lld", static_cast<long long>(r.calls)); },
     [](const apply_row& r) { return std::to_string(r.calls); }},
    {"<id>", "id", [](const apply_row& r) { return r.fn ? fmt(" %5zu", r.node) : std::string("     -"); },
     [](const apply_row& r) { return std::to_string(r.node); }},
    {"<Mflops>", "flops", [](const apply_row& r) { return cell_or_blank(r.flops > 0 ? r.flops / 1e6 : NAN, " %8.3f", 9); },
     [](const apply_row& r) { return json_number(r.flops); }},
    {"<Gflops/s>", "gflops_per_s", [](const apply_row& r) { return cell_or_blank(r.gflops_per_s(), " %9.2f", 10); },
     [](const apply_row& r) { return json_number(r.gflops_per_s()); }},
    {"<GB/s>", "gb_per_s", [](const apply_row& r) { return cell_or_blank(r.gb_per_s(), " %7.2f", 8); },
     [](const apply_row& r) { return json_number(r.gb_per_s()); }},
    // Share of this machine's bandwidth and peak: near 100% means the node is at its limit.
    {"<%BW>", "",
     [](const apply_row& r) {
       const double gbs = r.gb_per_s();
       return cell_or_blank(std::isfinite(gbs) ? 100.0 * gbs * 1e9 / r.limits->bandwidth_for(r.bytes) : NAN, " %5.1f%%", 7);
     },
     no_cell, true},
    {"<%peak>", "",
     [](const apply_row& r) {
       const double gf = r.gflops_per_s();
       return cell_or_blank(std::isfinite(gf) ? 100.0 * gf * 1e9 / r.limits->peak_flops : NAN, " %6.1f%%", 8);
     },
     no_cell, true},
    {"<Apply name>", "apply", [](const apply_row& r) { return "  " + r.label; },
     [](const apply_row& r) { return json_string(r.fn->graph().node_text(r.apply())); }},
    {"", "op", no_cell, [](const apply_row& r) { return json_string(r.apply().op_name()); }},
    {"", "class", no_cell, [](const apply_row& r) { return json_string(r.apply().class_name()); }},
    {"", "implementation", no_cell, [](const apply_row& r) { return json_string(r.fn->facts->node_implementation(r.node)); }},
    {"", "bytes", no_cell, [](const apply_row& r) { return json_number(r.bytes); }},
    {"", "inplace", no_cell, [](const apply_row& r) { return std::string(r.apply().fn->is_inplace() ? "true" : "false"); }},
    {"", "view", no_cell,
     [](const apply_row& r) { return std::string(acts_as_view(r.apply(), r.fn->node_inputs[r.node]) ? "true" : "false"); }},
    {"", "inputs", no_cell, [](const apply_row& r) { return json_value_infos(r.fn->node_inputs[r.node]); }},
    {"", "outputs", no_cell, [](const apply_row& r) { return json_value_infos(r.fn->node_outputs[r.node]); }},
    {"", "absorbed", no_cell,
     [](const apply_row& r) {
       const op& o = *r.apply().fn;
       if (!o.fused) return std::string();
       std::string s = "[";
       for (const auto& a : o.fused->absorbed) s += (s.size() > 1 ? ", " : "") + json_string(a);
       return s + "]";
     }},
    {"", "wait_s", no_cell,
     [](const apply_row& r) {
       return r.apply().fn->kind == op_kind::allreduce ? json_number(r.fn->node_wait_time(r.node)) : std::string();
     }},
    {"", "ranks", no_cell, [](const apply_row& r) { return r.fn->ranks > 1 ? std::to_string(r.fn->ranks) : std::string(); }},
    {"", "rank_min_s", no_cell,
     [](const apply_row& r) { return r.fn->ranks > 1 ? json_number(r.fn->node_rank_min_s[r.node]) : std::string(); }},
    {"", "rank_max_s", no_cell,
     [](const apply_row& r) { return r.fn->ranks > 1 ? json_number(r.fn->node_rank_max_s[r.node]) : std::string(); }},
};

/// The header line of a table: the shown columns' headers, "<name>" as "<`noun` name>".
template <class Row, std::size_t N>
std::string header_line(const column<Row> (&cols)[N], bool roofline, std::string_view noun = "") {
  std::string s;
  for (const auto& c : cols) {
    if (c.header.empty() || (c.roofline && !roofline)) continue;
    if (!s.empty()) s += ' ';
    s += c.header == "<name>" ? "<" + std::string(noun) + " name>" : std::string(c.header);
  }
  return s + "\n";
}

/// A row's text line: the shown columns' cells.
template <class Row, std::size_t N>
std::string text_line(const column<Row> (&cols)[N], const Row& r, bool roofline) {
  std::string s;
  for (const auto& c : cols)
    if (!c.header.empty() && (!c.roofline || roofline)) s += c.cell(r);
  return s + "\n";
}

/// A row as a JSON object: the columns with a key and a value.
template <class Row, std::size_t N>
std::string json_object(const column<Row> (&cols)[N], const Row& r) {
  std::string s = "{";
  for (const auto& c : cols) {
    if (c.key.empty()) continue;
    const std::string v = c.json(r);
    if (v.empty()) continue;
    s += (s.size() > 1 ? ", \"" : "\"") + std::string(c.key) + "\": " + v;
  }
  return s + "}";
}

/// The Class and Ops sections' rows: every node of `fns` by class and by op, user regions
/// (XSYM_PROFILE_SCOPE) as the class xsym::UserRegion.
inline std::pair<std::vector<summary_row>, std::vector<summary_row>> summary_rows(
    const std::vector<std::shared_ptr<function_profile>>& fns,
    const std::vector<std::pair<std::string, profile_stats::region>>& regions) {
  std::map<std::string, summary_row> by_class, by_op;
  for (const auto& f : fns) {
    const function_graph& g = f->graph();
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const apply_node& n = g.nodes[i];
      for (auto* m : {&by_class, &by_op}) {
        // Ops are rows when they compare equal (the seed's rule): by the whole op, not by its
        // printed name, which shortens a long Composite's program to "...".
        auto& r = (*m)[m == &by_class ? n.class_name() : n.fn->signature()];
        r.key = m == &by_class ? n.class_name() : n.op_name();
        // A class or op whose nodes ran two ways lists both ("cpu/cxx").
        const std::string& impl = f->facts->node_implementation(i);
        if (r.type.empty()) r.type = impl;
        else if (("/" + r.type + "/").find("/" + impl + "/") == std::string::npos) r.type += "/" + impl;
        r.time += f->node_time(i);
        r.calls += f->node_calls[i];
        r.applies += 1;
        const auto [flops, bytes] = node_work(*f, i);
        r.flops += flops;
        r.bytes += bytes;
      }
    }
  }
  // A region is an Ops row of its own, apart from the ops: one named like an op is not that op.
  std::vector<summary_row> region_rows;
  for (const auto& [name, reg] : regions) {
    const double t = static_cast<double>(reg.ticks) * seconds_per_tick();
    auto& c = by_class["xsym::UserRegion"];
    c.key = "xsym::UserRegion";
    c.type = "user";
    c.time += t;
    c.calls += reg.calls;
    c.applies += 1;
    summary_row o;
    o.key = name;
    o.type = "user";
    o.time = t;
    o.calls = reg.calls;
    o.applies = 1;
    region_rows.push_back(std::move(o));
  }
  auto values = [](const std::map<std::string, summary_row>& m) {
    std::vector<summary_row> v;
    for (const auto& [k, r] : m) v.push_back(r);
    return v;
  };
  std::vector<summary_row> op_rows = values(by_op);
  for (auto& r : region_rows) op_rows.push_back(std::move(r));
  return {values(by_class), std::move(op_rows)};
}

/// One function's Apply rows, in node order; `prefixed` puts the function's name before each.
inline std::vector<apply_row> apply_rows(const function_profile& f, bool prefixed, const machine_limits* limits) {
  std::vector<apply_row> rows;
  const function_graph& g = f.graph();
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    apply_row r;
    r.label = prefixed ? f.name() + ": " + g.node_text(g.nodes[i]) : g.node_text(g.nodes[i]);
    r.fn = &f;
    r.node = i;
    r.time = f.node_time(i);
    r.calls = f.node_calls[i];
    if (r.calls) {  // the mean call: every call's work (at its shapes) over the calls
      const auto [flops, bytes] = node_work(f, i);
      r.flops = flops / static_cast<double>(r.calls);
      r.bytes = bytes / static_cast<double>(r.calls);
    } else {
      r.flops = node_flops(g.nodes[i], f.node_inputs[i], f.node_outputs[i]);
      r.bytes = node_bytes(g.nodes[i], f.node_inputs[i], f.node_outputs[i]);
    }
    r.limits = limits;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace xsym::detail
XSYM_COLD_END

#endif
