#ifndef XSYM_PROFILE_PROFILE_STATS_HPP
#define XSYM_PROFILE_PROFILE_STATS_HPP

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../graph/fgraph.hpp"
#include "../rewrite/rewrites.hpp"
#include "clock.hpp"

namespace xsym {

/// @brief The dtype, shape and strides of a value as a node saw it.
struct value_info {
  dtype type = dtype::float64;
  shape_t shape{};
  std::array<std::int64_t, max_rank> strides{};
  bool c_contiguous = true;
  std::int64_t nbytes() const { return shape.size() * static_cast<std::int64_t>(dtype_size(type)); }
};

/// @brief One Apply node's run, for the Chrome trace export.
struct trace_event {
  std::uint32_t node;
  std::uint32_t thread;
  std::uint64_t start;  // ticks
  std::uint64_t duration;
};

/// @brief What a compiled function is, fixed when function() builds it: shared, never written,
/// by every profile that records the function (its own and each profile scope's).
struct function_facts {
  std::string name;
  std::shared_ptr<const function_graph> graph;
  std::string implementation = "cpu";  // the profile's <type>: cpu (vectorized), ref (reference)
  std::string device_implementation;   // <type> of GPU nodes and transfers: cuda, thrust-omp
  std::vector<std::uint8_t> node_compiled;  // per node: 1 runs a kernel cxx compiled (<type> cxx), 2 a typed tree's (typed)
  std::string compiled_library;        // the library those kernels are in
  bool compiled_now = false;           // cxx compiled it when the function was built (else it was reused)
  double rewrite_seconds = 0;
  double validate_seconds = 0;
  double linker_seconds = 0;
  std::vector<rewrite_record> rewrites;
  int nodes_before_rewrites = 0;
  std::vector<std::vector<int>> dead_after;  // slots freed after each node (gc), for the memory profile
  bool gc = true;
  bool memory = false;                 // profile_memory was on
  bool optimizer = false;              // profile_optimizer was on
  bool ignore_first_call = false;      // profiling.ignore_first_call: each profile leaves out its first call

  /// @brief The <type> of node i: where and how it ran.
  const std::string& node_implementation(std::size_t i) const {
    static const std::string cxx = "cxx", typed = "typed";
    const op& o = *graph->nodes[i].fn;
    if (i < node_compiled.size() && node_compiled[i]) return node_compiled[i] == 2 ? typed : cxx;
    return (o.on_gpu || o.kind == op_kind::transfer) && !device_implementation.empty() ? device_implementation
                                                                                        : implementation;
  }
  double compile_time() const { return rewrite_seconds + validate_seconds + linker_seconds; }
};

namespace detail {
// A record's lock. A copy of a record is a snapshot with a lock of its own.
struct record_mutex {
  record_mutex() = default;
  record_mutex(const record_mutex&) {}
  record_mutex& operator=(const record_mutex&) { return *this; }
  mutable std::mutex m;
};
}  // namespace detail

/// @brief What the calls of one function measured, with the facts of the function they ran.
struct function_profile {
  std::shared_ptr<const function_facts> facts;
  // Held by the call that records into this record, and while profile_stats::snapshot() copies it.
  detail::record_mutex mutex;
  std::int64_t calls = 0;
  std::uint64_t call_ticks = 0;        // whole operator(): argument checks, run, results
  std::uint64_t fn_ticks = 0;          // running the thunks, with the loop around them
  std::vector<std::uint64_t> node_ticks;
  std::vector<std::int64_t> node_calls;
  bool skip_next_call = false;  // profiling.ignore_first_call
  // Shapes seen by each node, recorded on calls 1, 2, 3, 5, 9, ... and whenever an input's
  // shape changes (function_runtime::sample_this_call), so recording costs nothing per call.
  std::vector<std::vector<value_info>> node_inputs, node_outputs;
  // The most the library's allocations grew during one call, over the calls at these sizes.
  std::int64_t measured_peak_bytes = 0;
  std::int64_t measured_device_peak_bytes = -1;  // the same in device memory; -1: not counted
  std::size_t max_trace_events = 0;      // 0: no trace; else events kept (first ones)
  std::vector<trace_event> events;
  std::vector<std::uint64_t> node_wait_ticks;  // AllReduce nodes: time waiting for the other ranks
  // A profile merged over the ranks of a communicator (<xsym/mpi.hpp>) holds their sums;
  // per node, the time of its fastest and slowest rank.
  int ranks = 1;
  std::vector<double> node_rank_min_s, node_rank_max_s;
  // Each node's flops and bytes over the first summed_calls calls, each at its shapes: added at
  // every shape sample (the calls since the last one ran at its shapes), so nothing per call;
  // the calls after summed_calls ran at node_inputs and node_outputs. Merged: every rank's calls,
  // from each rank's own shapes (node_inputs and node_outputs are rank 0's).
  std::vector<double> node_flops_sum, node_bytes_sum;
  std::int64_t summed_calls = 0;

  const std::string& name() const { return facts->name; }
  const function_graph& graph() const { return *facts->graph; }
  double call_time() const { return static_cast<double>(call_ticks) * detail::seconds_per_tick(); }
  double fn_time() const { return static_cast<double>(fn_ticks) * detail::seconds_per_tick(); }
  double node_time(std::size_t i) const { return static_cast<double>(node_ticks[i]) * detail::seconds_per_tick(); }
  double node_wait_time(std::size_t i) const {
    return static_cast<double>(node_wait_ticks[i]) * detail::seconds_per_tick();
  }
  double thunk_time() const {
    std::uint64_t t = 0;
    for (auto n : node_ticks) t += n;
    return static_cast<double>(t) * detail::seconds_per_tick();
  }
};

/// @brief Profiles of one or more functions, printed together (Theano's ProfileStats).
///
/// Give the same object to several functions to see them summed in one report.
class profile_stats {
 public:
  /// @brief print_at_exit=false keeps this profile out of the report printed when the process exits.
  explicit profile_stats(std::string message = "", bool print_at_exit = true)
      : m_message(std::move(message)), m_print_at_exit(print_at_exit) {}
  bool print_at_exit() const { return m_print_at_exit; }

  /// @brief Registers a function; the returned record is updated by that function's calls.
  std::shared_ptr<function_profile> add_function(std::shared_ptr<const function_facts> facts) {
    auto p = std::make_shared<function_profile>();
    p->max_trace_events = m_trace_events;
    const std::size_t n = facts->graph->nodes.size();
    p->node_ticks.assign(n, 0);
    p->node_calls.assign(n, 0);
    p->node_wait_ticks.assign(n, 0);
    p->node_inputs.assign(n, {});
    p->node_outputs.assign(n, {});
    p->facts = std::move(facts);
    std::lock_guard lock(m_mutex);
    m_functions.push_back(p);
    return p;
  }

  /// @brief Adds a record made elsewhere (a profile merged over ranks, <xsym/mpi.hpp>).
  void add_profile(std::shared_ptr<function_profile> p) {
    std::lock_guard lock(m_mutex);
    m_functions.push_back(std::move(p));
  }

  /// @brief The records, which the functions' calls go on updating.
  std::vector<std::shared_ptr<function_profile>> functions() const {
    std::lock_guard lock(m_mutex);
    return m_functions;
  }
  /// @brief Copies of the records, each taken whole under its lock: what the reports read, so
  /// that one printed while other threads' calls record reads no half-written numbers.
  std::vector<std::shared_ptr<function_profile>> snapshot() const {
    std::lock_guard lock(m_mutex);
    std::vector<std::shared_ptr<function_profile>> copies;
    copies.reserve(m_functions.size());
    for (const auto& f : m_functions) {
      std::lock_guard hold(f->mutex.m);
      copies.push_back(std::make_shared<function_profile>(*f));
    }
    return copies;
  }
  const std::string& message() const { return m_message; }

  /// @brief Keep up to max_events node runs per function for write_chrome_trace.
  void enable_trace(std::size_t max_events = 1 << 20) {
    std::lock_guard lock(m_mutex);
    m_trace_events = max_events;
    for (auto& f : m_functions) {
      std::lock_guard hold(f->mutex.m);
      f->max_trace_events = max_events;
    }
  }

  /// @brief Time spent in a user region (XSYM_PROFILE_SCOPE), reported as its own class.
  struct region {
    std::uint64_t ticks = 0;
    std::int64_t calls = 0;
  };
  void add_region(const std::string& name, std::uint64_t ticks, std::int64_t calls = 1) {
    std::lock_guard lock(m_mutex);
    auto& r = m_regions[name];
    r.ticks += ticks;
    r.calls += calls;
  }
  std::vector<std::pair<std::string, region>> regions() const {
    std::lock_guard lock(m_mutex);
    return {m_regions.begin(), m_regions.end()};
  }

  /// @brief Prints the Theano-format report to os (defined in profile/report.hpp).
  void print_summary(std::ostream& os) const;
  void print_summary() const;
  /// @brief Theano's ProfileMode spelling: the report on stdout with these many Apply nodes and ops.
  void print_summary(std::int64_t n_apply_to_print, std::int64_t n_ops_to_print) const;
  /// @brief Theano's alias of print_summary().
  void summary() const { print_summary(); }
  /// @brief This profile and another side by side, per op and per Apply node (profile/report.hpp).
  /// Apply nodes match by their text, and a Composite matches the other side's nodes of the ops it
  /// absorbed (fused against unfused); n_apply and n_ops cut the tables (-1: every row).
  void print_diff_summary(std::ostream& os, const profile_stats& other, std::int64_t n_apply = -1,
                          std::int64_t n_ops = -1) const;

 private:
  std::string m_message;
  bool m_print_at_exit = true;
  mutable std::mutex m_mutex;
  std::vector<std::shared_ptr<function_profile>> m_functions;
  std::map<std::string, region> m_regions;
  std::size_t m_trace_events = 0;
};

}  // namespace xsym

#endif
