#ifndef XSYM_PROFILE_REPORT_HPP
#define XSYM_PROFILE_REPORT_HPP

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../config/config.hpp"
#include "columns.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // reports are printed, not per call

namespace xsym {

/// @brief How much of a report to print (defaults come from the profiling.* flags).
struct report_limits {
  std::int64_t n_ops = 20;
  std::int64_t n_apply = 20;
  static report_limits from_config() {
    return {config.profiling.n_ops.value(), config.profiling.n_apply.value()};
  }
};

namespace detail {
// Reorders `items` from the largest key to the smallest, ties kept in their order. Every table
// sorts indices with this one comparator: a stable_sort instantiated per row type costs code
// and compile time in every program that includes xsym.
inline std::vector<std::size_t> descending_order(const std::vector<double>& keys) {
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&keys](std::size_t a, std::size_t b) { return keys[a] > keys[b]; });
  return order;
}

template <class T, class Key>
void sort_descending(std::vector<T>& items, Key key) {
  std::vector<double> keys;
  keys.reserve(items.size());
  for (const T& item : items) keys.push_back(static_cast<double>(key(item)));
  std::vector<T> sorted;
  sorted.reserve(items.size());
  for (std::size_t i : descending_order(keys)) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

// Class or Ops rows sorted by time, printed with running percentages and cut at `limit`.
inline void print_summary_rows(std::ostream& os, std::vector<summary_row> rows, double total, std::int64_t limit,
                               const char* what) {
  sort_descending(rows, [](const summary_row& r) { return r.time; });
  int type_width = 4;
  for (const summary_row& r : rows) type_width = std::max(type_width, static_cast<int>(r.type.size()));
  double cum = 0;
  std::size_t shown = 0;
  for (summary_row& r : rows) {
    if (static_cast<std::int64_t>(shown) >= limit) break;
    r.type_width = type_width;
    r.share = total > 0 ? 100.0 * r.time / total : 0.0;
    cum += r.share;
    r.cumulative = cum;
    os << text_line(summary_columns, r, false);
    ++shown;
  }
  double rest = 0;
  for (std::size_t i = shown; i < rows.size(); ++i) rest += rows[i].time;
  os << fmt("   ... (remaining %zu %s account for %6.2f%%(%.2fs) of the runtime)\n", rows.size() - shown, what,
            total > 0 ? 100.0 * rest / total : 0.0, rest);
}

inline std::string describe(const value_info& v) {
  std::string strides = "c";
  if (!v.c_contiguous) {
    strides = "(";
    for (int d = 0; d < v.shape.rank; ++d)
      strides += (d ? ", " : "") + std::to_string(v.strides[static_cast<std::size_t>(d)] * static_cast<std::int64_t>(dtype_size(v.type)));
    strides += v.shape.rank == 1 ? ",)" : ")";
  }
  return "dtype=" + std::string(dtype_name(v.type)) + ", shape=" + to_string(v.shape) + ", strides=" + strides;
}

// Rounded to the nearest KB, ties to even, as PyTensor prints (int(round(bytes / 1024))).
inline std::string kb(double bytes) { return fmt("%.0fKB", std::nearbyint(bytes / 1024.0)); }

// Peak bytes of node outputs alive at once, replaying the node order: with gc, without in-place.
// Returns {host peak, device peak}. A view (a reshape where its input was C-contiguous when
// recorded), and an output written into a destroyed input, use their input's buffer: it is
// freed when the last value using it dies (a view keeps its base alive, as the runtime's shared
// buffers do).
inline std::pair<double, double> simulate_peak(const function_profile& f, bool inplace, bool gc) {
  const function_graph& g = *f.facts->graph;
  struct buffer {
    double bytes;
    int users;
    int device;
  };
  std::vector<buffer> buffers;
  std::vector<int> buffer_of(g.slots.size(), -1);  // -1: an input, a constant or a shared value
  double cur[2] = {0, 0}, peak[2] = {0, 0};
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const apply_node& n = g.nodes[i];
    auto aliased = acts_as_view(n, f.node_inputs[i]) ? n.fn->view_map() : std::vector<std::pair<int, int>>{};
    if (inplace) aliased.insert(aliased.end(), n.fn->destroy_map.begin(), n.fn->destroy_map.end());
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      if (f.node_outputs[i].size() <= o) continue;
      const auto s = static_cast<std::size_t>(n.outputs[o]);
      const auto into = std::find_if(aliased.begin(), aliased.end(),
                                     [&](const std::pair<int, int>& d) { return d.first == static_cast<int>(o); });
      if (into != aliased.end()) {
        const int b = buffer_of[static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(into->second)])];
        buffer_of[s] = b;
        if (b >= 0) ++buffers[static_cast<std::size_t>(b)].users;
        continue;
      }
      buffer_of[s] = static_cast<int>(buffers.size());
      buffers.push_back({static_cast<double>(f.node_outputs[i][o].nbytes()), 1, g.slots[s].on_device ? 1 : 0});
      cur[buffers.back().device] += buffers.back().bytes;
    }
    for (int d : {0, 1}) peak[d] = std::max(peak[d], cur[d]);
    if (gc && i < f.facts->dead_after.size())
      for (int s : f.facts->dead_after[i]) {
        const int b = buffer_of[static_cast<std::size_t>(s)];
        if (b >= 0 && --buffers[static_cast<std::size_t>(b)].users == 0)
          cur[buffers[static_cast<std::size_t>(b)].device] -= buffers[static_cast<std::size_t>(b)].bytes;
      }
  }
  return {peak[0], peak[1]};
}

}  // namespace detail

/// n_apply: the most Apply nodes listed (the report's Apply limit).
inline void print_memory_profile(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns,
                                 std::int64_t n_apply);
inline void print_tips(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns);
inline void print_optimizer_profile(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns);

/// @brief Prints the Theano-format report for the given functions as one profile.
using region_list = std::vector<std::pair<std::string, profile_stats::region>>;

XSYM_RUNTIME_INLINE void print_profile(std::ostream& os, const std::string& message,
                                       const std::vector<std::shared_ptr<function_profile>>& fns, report_limits lim,
                                       const region_list& regions = {});
/// @brief Two profiles side by side; n_apply and n_ops cut the tables (-1: every row).
XSYM_RUNTIME_INLINE void print_diff_summary(std::ostream& os, const profile_stats& a, const profile_stats& b,
                                            std::int64_t n_apply = -1, std::int64_t n_ops = -1);

// The reports: compiled once with XSYM_COMPILED_LIB.
#if XSYM_RUNTIME_DEFINITIONS
XSYM_RUNTIME_INLINE void print_profile(std::ostream& os, const std::string& message,
                                       const std::vector<std::shared_ptr<function_profile>>& fns, report_limits lim,
                                       const region_list& regions) {
  using detail::fmt;
  std::int64_t calls = 0;
  double call_t = 0, fn_t = 0, thunk_t = 0, rewrite_t = 0, validate_t = 0, link_t = 0;
  std::size_t n_nodes = 0;
  for (const auto& f : fns) {
    calls += f->calls;
    call_t += f->call_time();
    fn_t += f->fn_time();
    thunk_t += f->thunk_time();
    rewrite_t += f->facts->rewrite_seconds;
    validate_t += f->facts->validate_seconds;
    link_t += f->facts->linker_seconds;
    n_nodes += f->facts->graph->nodes.size();
  }
  auto pct = [&](double x) { return call_t > 0 ? 100.0 * x / call_t : 0.0; };
  os << "Function profiling\n==================\n";
  os << "  Message: " << message << "\n";
  os << fmt("  Time in %lld calls to Function.__call__: %es\n", static_cast<long long>(calls), call_t);
  if (call_t > 0) {
    os << fmt("  Time in Function.fn.__call__: %es (%.3f%%)\n", fn_t, pct(fn_t));
    os << fmt("  Time in thunks: %es (%.3f%%)\n", thunk_t, pct(thunk_t));
  }
  os << fmt("  Total compilation time: %es\n", rewrite_t + validate_t + link_t);
  os << fmt("    Number of Apply nodes: %zu\n", n_nodes);
  os << fmt("    xsym rewrite time: %es\n", rewrite_t);
  os << fmt("       xsym validate time: %es\n", validate_t);
  os << fmt("    xsym Linker time (kernel binding and buffer planning): %es\n", link_t);
  for (const auto& f : fns)
    if (!f->facts->compiled_library.empty())
      os << "      cxx kernels of " << f->name() << ": " << f->facts->compiled_library
         << (f->facts->compiled_now ? " (compiled now)\n" : " (reused)\n");
  os << "\n";
  double region_t = 0;
  for (const auto& [name, r] : regions) region_t += static_cast<double>(r.ticks) * detail::seconds_per_tick();
  if (!regions.empty()) os << fmt("  Time in user regions (XSYM_PROFILE_SCOPE): %es\n\n", region_t);
  if (calls == 0 && regions.empty()) {
    os << "No execution time accumulated: the function was not called while profiled.\n\n";
    return;
  }
  auto [classes, ops] = detail::summary_rows(fns, regions);
  thunk_t += region_t;  // percentages are of everything timed: nodes and user regions
  os << "Class\n---\n" << detail::header_line(detail::summary_columns, false, "Class");
  detail::print_summary_rows(os, std::move(classes), thunk_t, lim.n_ops, "Classes");
  os << "\nOps\n---\n" << detail::header_line(detail::summary_columns, false, "Op");
  detail::print_summary_rows(os, std::move(ops), thunk_t, lim.n_ops, "Ops");
  bool roof = false;
  try {
    roof = config.profiling.roofline.value();
  } catch (const std::exception&) {
  }
  const machine_limits limits = roof ? roofline() : machine_limits{};
  std::vector<detail::apply_row> applies;
  for (const auto& f : fns) {
    auto rows = detail::apply_rows(*f, fns.size() > 1, &limits);
    applies.insert(applies.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  // User regions are rows too, so that the section's percentages sum to 100% like the others'.
  for (const auto& [name, reg] : regions) {
    detail::apply_row r;
    r.label = name;
    r.time = static_cast<double>(reg.ticks) * detail::seconds_per_tick();
    r.calls = reg.calls;
    applies.push_back(std::move(r));
  }
  os << "\nApply\n------\n" << detail::header_line(detail::apply_columns, roof);
  detail::sort_descending(applies, [](const auto& a) { return a.time; });
  double cum = 0;
  std::size_t shown = 0;
  for (auto& r : applies) {
    if (static_cast<std::int64_t>(shown) >= lim.n_apply) break;
    r.share = thunk_t > 0 ? 100.0 * r.time / thunk_t : 0.0;
    cum += r.share;
    r.cumulative = cum;
    os << detail::text_line(detail::apply_columns, r, roof);
    ++shown;
    if (!r.fn) continue;
    const function_profile& f = *r.fn;
    const auto& ins = f.node_inputs[r.node];
    const auto& outs = f.node_outputs[r.node];
    const apply_node& node = r.apply();
    if (node.fn->fused) {
      // Map a fused node back to the user's code: its full text and the ops it absorbed.
      os << "    composite: " << node.fn->fused->text << "\n    absorbed:";
      std::map<std::string, int> counts;
      for (const auto& a : node.fn->fused->absorbed) ++counts[a];
      for (const auto& [a, c] : counts) os << " " << a << (c > 1 ? " x" + std::to_string(c) : "");
      os << "\n";
    }
    if (node.fn->kind == op_kind::allreduce) {
      const double t = f.node_time(r.node), w = f.node_wait_time(r.node);
      os << fmt("    allreduce: %d ranks of %s, %lld bytes per rank per call, %.3es waiting for the other ranks (%.1f%% "
                "of its time)\n",
                node.fn->comm->size(), node.fn->comm->name().c_str(),
                static_cast<long long>(outs.empty() ? 0 : outs[0].nbytes()), w, t > 0 ? 100.0 * w / t : 0.0);
    }
    if (f.ranks > 1)
      os << fmt("    over %d ranks: fastest %.3es, slowest %.3es\n", f.ranks, f.node_rank_min_s[r.node],
                f.node_rank_max_s[r.node]);
    for (std::size_t k = 0; k < ins.size(); ++k)
      os << "    input " << k << ": " << detail::describe(ins[k]) << "\n";
    for (std::size_t k = 0; k < outs.size(); ++k)
      os << "    output " << k << ": " << detail::describe(outs[k]) << "\n";
  }
  double rest = 0;
  for (std::size_t i = shown; i < applies.size(); ++i) rest += applies[i].time;
  os << fmt("   ... (remaining %zu Apply instances account for %.2f%%(%.2fs) of the runtime)\n", applies.size() - shown,
            thunk_t > 0 ? 100.0 * rest / thunk_t : 0.0, rest);
  if (roof)
    os << fmt("   (<%%BW>: of this machine's bandwidth for the node's footprint, probed once: %.1f GB/s within L2 "
              "(%.0f KiB), %.1f GB/s within the last-level cache (%.0f MiB), %.1f GB/s from memory; <%%peak>: of "
              "%.1f Gflop/s, the float32 FMA peak of one core)\n",
              limits.bandwidth_small / 1e9, limits.l2_bytes / 1024, limits.bandwidth_medium / 1e9,
              limits.llc_bytes / 1048576, limits.bandwidth / 1e9, limits.peak_flops / 1e9);
  os << "\n";
  bool memory = false;
  for (const auto& f : fns) memory |= f->facts->memory;
  if (memory) print_memory_profile(os, fns, lim.n_apply);
  bool optimizer = false;
  for (const auto& f : fns) optimizer |= f->facts->optimizer;
  if (optimizer) print_optimizer_profile(os, fns);
  print_tips(os, fns);
}

inline void print_memory_profile(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns,
                                 std::int64_t n_apply) {
  using detail::fmt;
  using detail::kb;
  std::pair<double, double> current, no_inplace, no_gc;
  double measured = 0, measured_device = -1;
  auto take_max = [](std::pair<double, double>& a, std::pair<double, double> b) {
    a = {std::max(a.first, b.first), std::max(a.second, b.second)};
  };
  for (const auto& f : fns) {
    take_max(current, detail::simulate_peak(*f, true, f->facts->gc));
    take_max(no_inplace, detail::simulate_peak(*f, false, f->facts->gc));
    take_max(no_gc, detail::simulate_peak(*f, true, false));
    measured = std::max(measured, static_cast<double>(f->measured_peak_bytes));
    measured_device = std::max(measured_device, static_cast<double>(f->measured_device_peak_bytes));
  }
  os << "Memory Profile\n(Simulated from the nodes' output sizes; in brackets, measured through xsym's allocator)\n---\n";
  auto block = [&](const char* title, std::pair<double, double> sim, bool with_measured) {
    const auto [cpu, gpu] = sim;
    const bool gpu_measured = with_measured && measured_device >= 0;
    os << "    " << title << "\n";
    os << "        CPU: " << kb(cpu) << (with_measured ? " (" + kb(measured) + ")" : "") << "\n";
    os << "        GPU: " << kb(gpu) << (gpu_measured ? " (" + kb(measured_device) + ")" : "") << "\n";
    // A measured total only when both parts are measured (device bytes need XSYM_COMPUTE_GPU_MEM_USED=1).
    const bool total_measured = with_measured && (gpu_measured || gpu == 0);
    os << "        CPU + GPU: " << kb(cpu + gpu)
       << (total_measured ? " (" + kb(measured + std::max(0.0, measured_device)) + ")" : "") << "\n";
  };
  block("Max peak memory with current setting", current, true);
  block("Max peak memory with current setting and xsym flag optimizer_excluding=inplace", no_inplace, false);
  block("Max peak memory if allow_gc=False (linker don't make a difference)", no_gc, false);
  os << "---\n\n";
  os << "    <Sum apply outputs (bytes)> <Apply outputs shape> <created/inplace/view> <Apply node>\n\n";
  struct entry {
    std::int64_t bytes;
    std::string line;
  };
  std::vector<entry> entries;
  std::int64_t total = 0;
  for (const auto& f : fns) {
    const function_graph& g = *f->facts->graph;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const apply_node& n = g.nodes[i];
      std::int64_t bytes = 0;
      std::string shapes = "[", kinds;
      const auto& outs = f->node_outputs[i];
      for (std::size_t o = 0; o < outs.size(); ++o) {
        bytes += outs[o].nbytes();
        shapes += (o ? ", " : "") + to_string(outs[o].shape);
        const bool view = detail::acts_as_view(n, f->node_inputs[i]);
        kinds += (o ? " " : "") + std::string(view ? "v" : n.fn->is_inplace() && o == 0 ? "i" : "c");
      }
      total += bytes;
      entries.push_back({bytes, fmt("%14lldB  ", static_cast<long long>(bytes)) + shapes + "] " + kinds + " " + g.node_text(n)});
    }
  }
  detail::sort_descending(entries, [](const entry& e) { return e.bytes; });
  const std::int64_t min_size = config.profiling.min_memory_size.value();
  std::size_t shown = 0;
  std::int64_t rest = 0;
  for (const auto& e : entries) {
    if (e.bytes >= min_size && static_cast<std::int64_t>(shown) < n_apply) {
      os << "   " << e.line << "\n";
      ++shown;
    } else {
      rest += e.bytes;
    }
  }
  os << fmt("   ... (remaining %zu Apply account for %6lldB/%lldB ((%.2f%%)) of the Apply with dense outputs sizes)\n",
            entries.size() - shown, static_cast<long long>(rest), static_cast<long long>(total),
            total ? 100.0 * static_cast<double>(rest) / static_cast<double>(total) : 0.0);
  os << "\n";
  const bool any_large = std::any_of(entries.begin(), entries.end(), [&](const entry& e) { return e.bytes >= min_size; });
  if (!any_large)
    os << fmt("    All Apply nodes have output sizes that take less than %lldB.\n", static_cast<long long>(min_size));
  os << "    <created/inplace/view> is taken from the Op's declaration.\n";
  os << "    Apply nodes marked 'inplace' or 'view' may actually allocate memory (an in-place node allocates when "
        "its input is still shared at run time); the measured peak above includes that.\n\n";
}

/// @brief Per rewrite: time, times applied, Apply nodes before and after, and what it did.
inline void print_optimizer_profile(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns) {
  using detail::fmt;
  os << "Optimizer Profile\n-----------------\n";
  for (const auto& f : fns) {
    double total = 0;
    for (const auto& r : f->facts->rewrites) total += r.seconds;
    os << fmt(" Function '%s': %zu rewrites in %.6es, Apply nodes %d -> %zu\n", f->name().c_str(), f->facts->rewrites.size(), total,
              f->facts->nodes_before_rewrites, f->facts->graph->nodes.size());
    os << "    <time> <% of rewrite time> <#applied> <nodes before> <nodes after> <rewrite>\n";
    for (const auto& r : f->facts->rewrites) {
      os << fmt("    %.3es  %5.1f%%  %6d  %6d  %6d  %s\n", r.seconds, total > 0 ? 100.0 * r.seconds / total : 0.0, r.applied,
                r.nodes_before, r.nodes_after, r.name.c_str());
      for (const auto& note : r.notes) os << "        " << note << "\n";
    }
    os << "\n";
  }
}

inline void print_tips(std::ostream& os, const std::vector<std::shared_ptr<function_profile>>& fns) {
  std::vector<std::string> tips;
  auto add = [&](std::string t) {
    if (std::find(tips.begin(), tips.end(), t) == tips.end()) tips.push_back(std::move(t));
  };
  for (const auto& f : fns) {
    const function_graph& g = *f->facts->graph;
    const double thunk_time = f->thunk_time();
    for (const auto& n : g.nodes) {
      // A fused program of several ops, run as one precompiled kernel per op over arrays of a
      // thousand elements or more, taking a tenth or more of the function's time: compiled into
      // one loop it keeps intermediates in registers (on a few elements, the call costs more).
      const auto i = static_cast<std::size_t>(n.id);
      const bool large = i < f->node_outputs.size() && !f->node_outputs[i].empty() &&
                         f->node_outputs[i][0].shape.size() >= 1000;
      const bool composite =
          n.fn->kind == op_kind::composite || (n.fn->kind == op_kind::inc_subtensor && n.fn->fused);
      if (composite && !n.fn->on_gpu && f->facts->node_implementation(i) == "cpu" && n.fn->fused->code.size() >= 2 &&
          large && thunk_time > 0 && f->node_time(i) >= 0.1 * thunk_time)
        add("A fused Composite runs one precompiled kernel per op and takes " +
            std::to_string(static_cast<int>(100 * f->node_time(i) / thunk_time + 0.5)) +
            "% of the time; with cxx=g++ it is compiled into one loop (XSYM_FLAGS=cxx=g++): " + g.node_text(n));
      for (int s : n.outputs)
        if (g.slots[static_cast<std::size_t>(s)].type == dtype::float64)
          add("This graph computes in float64: if float32 precision is enough, float32 halves the memory traffic "
              "(float tensors, or -DXSYM_FLOATX=float for floatX)");
      const op& o = *n.fn;
      auto is_two = [&](int s) {
        const slot& v = g.slots[static_cast<std::size_t>(s)];
        return v.kind == var_kind::constant && v.source->constant.size() == 1 && v.source->constant.flat_as_double(0) == 2.0;
      };
      if (o.kind == op_kind::elemwise && o.scalar == scalar_op::pow && is_two(n.inputs[1]))
        add("Replace pow(x, 2) by sqr(x) (or x * x): " + g.node_text(n));
      if (o.fused)
        for (const auto& ins : o.fused->code)
          if (ins.op == scalar_op::pow) add("A Composite computes pow: if the exponent is 2, use sqr(x) instead");
      if (o.kind == op_kind::dot) {
        bool matrix = false;
        for (int s : n.inputs) matrix |= g.slots[static_cast<std::size_t>(s)].rank == 2;
        if (matrix) add("A dot was not turned into Gemv/Dot22 (is the blas rewrite excluded?): " + g.node_text(n));
      }
      if (o.kind == op_kind::dot || o.kind == op_kind::gemv || o.kind == op_kind::dot22)
        for (int s : n.inputs) {
          const slot& v = g.slots[static_cast<std::size_t>(s)];
          if (v.owner >= 0 && g.nodes[static_cast<std::size_t>(v.owner)].fn->scalar == scalar_op::cast &&
              g.nodes[static_cast<std::size_t>(v.owner)].fn->kind == op_kind::elemwise)
            add("A dot mixes dtypes and casts an operand on every call; give both operands the same dtype: " +
                g.node_text(n));
        }
    }
  }
  os << "Here are tips to potentially make your code run faster\n"
        "                 (if you think of new ones, suggest them on the issue tracker).\n"
        "                 Test them first, as they are not guaranteed to always provide a speedup.\n";
  if (tips.empty()) os << "  Sorry, no tip for today.\n";
  for (const auto& t : tips) os << "  - " << t << "\n";
}

/// @brief Two profiles side by side, per op and per Apply node, e.g. the same graph compiled
/// fused and unfused as two functions. Times are per call of the functions.
XSYM_RUNTIME_INLINE void print_diff_summary(std::ostream& os, const profile_stats& a, const profile_stats& b,
                                            std::int64_t n_apply, std::int64_t n_ops) {
  using detail::fmt;
  struct node {
    std::string op, text;
    double time = 0;
    std::vector<std::string> absorbed;  // a Composite's ops
    bool matched = false;
  };
  struct side {
    std::map<std::string, double> ops;
    std::vector<node> nodes;
    double total = 0;
    std::int64_t calls = 0;
  };
  auto collect = [](const profile_stats& s) {
    side r;
    for (const auto& f : s.snapshot()) {
      r.calls = std::max(r.calls, f->calls);
      const function_graph& g = f->graph();
      for (std::size_t i = 0; i < g.nodes.size(); ++i) {
        const apply_node& n = g.nodes[i];
        const double t = f->calls ? f->node_time(i) / static_cast<double>(f->calls) : 0.0;
        r.ops[n.op_name()] += t;
        node d{n.op_name(), g.node_text(n), t, {}, false};
        if (n.fn->fused) d.absorbed = n.fn->fused->absorbed;
        r.nodes.push_back(std::move(d));
        r.total += t;
      }
    }
    return r;
  };
  // An op's name without what in-place rewriting changes: Elemwise{add,inplace} is add.
  auto base = [](std::string name) {
    for (const char* tag : {",no_inplace", ",inplace"})
      if (auto p = name.find(tag); p != std::string::npos) name.erase(p, std::string(tag).size());
    if (auto p = name.find("}["); p != std::string::npos) name.erase(p + 1);
    return name;
  };
  side sa = collect(a), sb = collect(b);
  auto name_of = [](const profile_stats& s) { return s.message().empty() ? std::string("?") : s.message(); };
  os << "Profile difference\n==================\n";
  os << "  A: " << name_of(a) << " (" << sa.calls << " calls)\n  B: " << name_of(b) << " (" << sb.calls << " calls)\n";
  os << fmt("  Time per call in thunks: A %.3es, B %.3es, B/A %.2f\n\n", sa.total, sb.total,
            sa.total > 0 ? sb.total / sa.total : 0.0);
  struct line {
    double ta, tb;
    std::string name;
  };
  auto table = [&](const char* title, std::vector<line> rows, std::int64_t limit) {
    os << title << "\n<time A per call> <time B per call> <B/A> <B - A> <name>\n";
    detail::sort_descending(rows, [](const line& x) { return std::fabs(x.tb - x.ta); });  // the largest change first
    std::size_t shown = 0;
    for (const auto& r : rows) {
      if (limit >= 0 && static_cast<std::int64_t>(shown) >= limit) break;
      const std::string ta = r.ta > 0 ? fmt("%.3es", r.ta) : std::string("        -");
      const std::string tb = r.tb > 0 ? fmt("%.3es", r.tb) : std::string("        -");
      const std::string ratio = r.ta > 0 && r.tb > 0 ? fmt("%6.2f", r.tb / r.ta) : std::string("     -");
      os << "  " << ta << "  " << tb << "  " << ratio << "  " << fmt("%+.3es", r.tb - r.ta) << "  " << r.name << "\n";
      ++shown;
    }
    if (shown < rows.size()) os << "   ... (remaining " << rows.size() - shown << " rows)\n";
    os << "\n";
  };
  std::map<std::string, std::pair<double, double>> ops;
  for (const auto& [k, v] : sa.ops) ops[k].first = v;
  for (const auto& [k, v] : sb.ops) ops[k].second = v;
  std::vector<line> op_rows;
  for (const auto& [k, v] : ops) op_rows.push_back({v.first, v.second, k});
  table("Ops\n---", std::move(op_rows), n_ops);

  // Apply nodes: the same text in both (function names aside); then a Composite against the
  // nodes of the other side whose ops it absorbed; what is left has no counterpart.
  std::vector<line> rows;
  for (auto& x : sa.nodes)
    for (auto& y : sb.nodes)
      if (!y.matched && x.text == y.text) {
        x.matched = y.matched = true;
        rows.push_back({x.time, y.time, x.text});
        break;
      }
  auto absorb = [&](side& fused, side& other, bool fused_is_a) {
    for (auto& c : fused.nodes) {
      if (c.matched || c.absorbed.empty()) continue;
      std::map<std::string, int> wanted;
      for (const auto& op : c.absorbed) ++wanted[base(op)];
      double t = 0;
      std::map<std::string, int> taken;
      for (auto& y : other.nodes)
        if (!y.matched && wanted[base(y.op)] > 0) {
          --wanted[base(y.op)];
          ++taken[base(y.op)];
          y.matched = true;
          t += y.time;
        }
      if (taken.empty()) continue;
      c.matched = true;
      std::string parts;
      for (const auto& [op, n] : taken) parts += (parts.empty() ? "" : ", ") + op + (n > 1 ? " x" + std::to_string(n) : "");
      const std::string name = c.text + "  ~  " + (fused_is_a ? "B: " : "A: ") + parts;
      rows.push_back(fused_is_a ? line{c.time, t, name} : line{t, c.time, name});
    }
  };
  absorb(sa, sb, true);
  absorb(sb, sa, false);
  for (const auto& x : sa.nodes)
    if (!x.matched) rows.push_back({x.time, 0, x.text + "  (no counterpart in B)"});
  for (const auto& y : sb.nodes)
    if (!y.matched) rows.push_back({0, y.time, y.text + "  (no counterpart in A)"});
  table("Apply\n------", std::move(rows), n_apply);
}
#endif  // XSYM_RUNTIME_DEFINITIONS

inline void profile_stats::print_diff_summary(std::ostream& os, const profile_stats& other, std::int64_t n_apply,
                                              std::int64_t n_ops) const {
  xsym::print_diff_summary(os, *this, other, n_apply, n_ops);
}

namespace detail {
// The report of `stats` with these limits; its message, by default the function's name when
// there is only one.
inline void print_stats(std::ostream& os, const profile_stats& stats, report_limits lim) {
  const auto fns = stats.snapshot();
  std::string message = stats.message();
  if (message.empty() && fns.size() == 1) message = fns.front()->name();
  print_profile(os, message, fns, lim, stats.regions());
}
}  // namespace detail

inline void profile_stats::print_summary(std::ostream& os) const {
  detail::print_stats(os, *this, report_limits::from_config());
}

inline void profile_stats::print_summary() const {
  print_summary(std::cout);
}

inline void profile_stats::print_summary(std::int64_t n_apply_to_print, std::int64_t n_ops_to_print) const {
  detail::print_stats(std::cout, *this, report_limits{n_ops_to_print, n_apply_to_print});
}

}  // namespace xsym
XSYM_COLD_END

#endif
