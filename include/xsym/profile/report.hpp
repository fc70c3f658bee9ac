#ifndef XSYM_PROFILE_REPORT_HPP
#define XSYM_PROFILE_REPORT_HPP

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../config/config.hpp"
#include "profile_stats.hpp"

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
inline std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

struct row {
  std::string key;
  std::string type;
  double time = 0;
  std::int64_t calls = 0;
  int applies = 0;
};

// Rows sorted by time, printed with running percentages and cut at `limit`.
inline void print_rows(std::ostream& os, std::vector<row> rows, double total, std::int64_t limit, const char* what) {
  std::stable_sort(rows.begin(), rows.end(), [](const row& a, const row& b) { return a.time > b.time; });
  double cum = 0;
  std::size_t shown = 0;
  for (const row& r : rows) {
    if (static_cast<std::int64_t>(shown) >= limit) break;
    const double pct = total > 0 ? 100.0 * r.time / total : 0.0;
    cum += pct;
    os << fmt("  %5.1f%%   %5.1f%%      %6.3fs       %.2es     %-4s %6lld  %6d   %s\n", pct, cum, r.time,
              r.calls ? r.time / static_cast<double>(r.calls) : 0.0, r.type.c_str(), static_cast<long long>(r.calls),
              r.applies, r.key.c_str());
    ++shown;
  }
  double rest = 0;
  for (std::size_t i = shown; i < rows.size(); ++i) rest += rows[i].time;
  os << fmt("   ... (remaining %zu %s account for %6.2f%%(%.2fs) of the runtime)\n", rows.size() - shown, what,
            total > 0 ? 100.0 * rest / total : 0.0, rest);
}
}  // namespace detail

/// @brief Prints the Theano-format report for the given functions as one profile.
inline void print_profile(std::ostream& os, const std::string& message,
                          const std::vector<std::shared_ptr<function_profile>>& fns, report_limits lim) {
  using detail::fmt;
  std::int64_t calls = 0;
  double call_t = 0, fn_t = 0, thunk_t = 0, rewrite_t = 0, validate_t = 0, link_t = 0;
  std::size_t n_nodes = 0;
  for (const auto& f : fns) {
    calls += f->calls;
    call_t += f->call_time();
    fn_t += f->fn_time();
    thunk_t += f->thunk_time();
    rewrite_t += f->rewrite_seconds;
    validate_t += f->validate_seconds;
    link_t += f->linker_seconds;
    n_nodes += f->graph->nodes.size();
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
  os << "\n";
  if (calls == 0) {
    os << "No execution time accumulated (hint: try config profiling.time_thunks=1)\n\n";
    return;
  }
  std::map<std::string, detail::row> by_class, by_op;
  std::vector<detail::row> applies;
  for (const auto& f : fns) {
    const function_graph& g = *f->graph;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const apply_node& n = g.nodes[i];
      const double t = f->node_time(i);
      for (auto* m : {&by_class, &by_op}) {
        auto& r = (*m)[m == &by_class ? n.class_name() : n.op_name()];
        r.key = m == &by_class ? n.class_name() : n.op_name();
        r.type = f->implementation;
        r.time += t;
        r.calls += f->node_calls[i];
        r.applies += 1;
      }
      detail::row r;
      r.key = fmt("%5zu   ", i) + g.node_text(n);
      if (fns.size() > 1) r.key = fmt("%5zu   ", i) + f->name + ": " + g.node_text(n);
      r.time = t;
      r.calls = f->node_calls[i];
      applies.push_back(std::move(r));
    }
  }
  auto values = [](const std::map<std::string, detail::row>& m) {
    std::vector<detail::row> v;
    for (const auto& [k, r] : m) v.push_back(r);
    return v;
  };
  os << "Class\n---\n<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <Class name>\n";
  detail::print_rows(os, values(by_class), thunk_t, lim.n_ops, "Classes");
  os << "\nOps\n---\n<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <Op name>\n";
  detail::print_rows(os, values(by_op), thunk_t, lim.n_ops, "Ops");
  os << "\nApply\n------\n<% time> <sum %> <apply time> <time per call> <#call> <id> <Apply name>\n";
  std::stable_sort(applies.begin(), applies.end(), [](const auto& a, const auto& b) { return a.time > b.time; });
  double cum = 0;
  std::size_t shown = 0;
  for (const auto& r : applies) {
    if (static_cast<std::int64_t>(shown) >= lim.n_apply) break;
    const double p = thunk_t > 0 ? 100.0 * r.time / thunk_t : 0.0;
    cum += p;
    os << fmt("  %5.1f%%   %5.1f%%      %6.3fs       %.2es   %6lld %s\n", p, cum, r.time,
              r.calls ? r.time / static_cast<double>(r.calls) : 0.0, static_cast<long long>(r.calls), r.key.c_str());
    ++shown;
  }
  double rest = 0;
  for (std::size_t i = shown; i < applies.size(); ++i) rest += applies[i].time;
  os << fmt("   ... (remaining %zu Apply instances account for %.2f%%(%.2fs) of the runtime)\n", applies.size() - shown,
            thunk_t > 0 ? 100.0 * rest / thunk_t : 0.0, rest);
  os << "\n";
}

inline void profile_stats::print_summary(std::ostream& os) const {
  const auto fns = functions();
  std::string message = m_message;
  if (message.empty() && fns.size() == 1) message = fns.front()->name;
  print_profile(os, message, fns, report_limits::from_config());
}

inline void profile_stats::print_summary() const {
  print_summary(std::cout);
}

}  // namespace xsym

#endif
