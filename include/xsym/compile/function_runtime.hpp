#ifndef XSYM_COMPILE_FUNCTION_RUNTIME_HPP
#define XSYM_COMPILE_FUNCTION_RUNTIME_HPP

// A compiled function: its graph, one thunk per Apply node, the buffers of a call. Its jobs
// are defined in their own files, in the order a function meets them:
//   build.hpp          the rewrite pipeline's run and the graph of slots and Apply nodes
//   link.hpp           the linker: a thunk per node, kernels compiled (cxx), gc's plan
//   call.hpp           the call loop, shared variables, updates, errors that name the node
//   into.hpp           into(...): outputs written into the caller's arrays
//   debug_modes.hpp    DebugMode, NanGuardMode, MonitorMode
//   profile_wiring.hpp what a call records for the profiler
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../backend/cpu/jit.hpp"
#include "../backend/cpu/typed_kernel.hpp"
#include "../config/cold.hpp"
#include "../config/linkage.hpp"
#include "../exec/buffers.hpp"
#include "../exec/cpu_nodes.hpp"
#include "../exec/thunk.hpp"
#include "../graph/fgraph.hpp"
#include "../profile/profile_stats.hpp"
#include "../profile/scope.hpp"
#include "checks.hpp"
#include "options.hpp"

namespace xsym {

namespace detail {
/// The lock that serialises calls of one function: an uncontended lock and unlock are one
/// atomic operation each, inline (std::mutex goes through pthread);
/// a waiting thread sleeps in the kernel (futex) rather than spinning.
class call_lock {
 public:
  void lock() {
    int expected = 0;
    if (m_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return;
    // 2: locked, and someone may be waiting, so the unlock must wake a waiter.
    while (m_state.exchange(2, std::memory_order_acquire) != 0) m_state.wait(2, std::memory_order_relaxed);
  }
  void unlock() {
    if (m_state.exchange(0, std::memory_order_release) == 2) m_state.notify_one();
  }

 private:
  std::atomic<int> m_state{0};
};
}  // namespace detail

class function_runtime {
 public:
  /// @brief Rewrites the graph of outputs and updates, then binds one thunk per Apply node.
  function_runtime(std::string name, const std::vector<var_ptr>& input_vars, const std::vector<var_ptr>& output_vars,
                   const std::vector<std::pair<var_ptr, var_ptr>>& update_vars, const function_options& options);

  const function_graph& graph() const { return *m_graph; }
  const std::string& name() const { return m_name; }
  const std::shared_ptr<profile_stats>& stats() const { return m_stats; }
  const detail::resolved_plan& plan() const { return m_plan; }
  /// @brief What cxx did for this function: kernels compiled, whether from the cache, the library.
  const cpu::jit_stats& compiled_kernels() const { return m_jit; }

  /// @brief Runs the function on args (one per input, in order) and returns convert(outputs),
  /// called while the function's buffers are still reserved for this call.
  template <class Convert>
  auto call(const ndarray* args, Convert&& convert) {
    return call_with(
        [args](ndarray* values, const std::vector<int>& inputs) {
          for (std::size_t i = 0; i < inputs.size(); ++i) values[inputs[i]] = args[i];
        },
        std::forward<Convert>(convert));
  }

  /// @brief As call, but bind(values, input_slots) writes input i's value straight into
  /// values[input_slots[i]] under the lock (no array of arguments is built and copied).
  /// When bind or an input check throws, no node has run and the inputs are released.
  template <class Bind, class Convert>
  auto call_with(Bind&& bind, Convert&& convert, const ndarray* dests = nullptr);

  /// @brief call_with's Bind and Convert as the call loop takes them: a function and what it
  /// is called on.
  struct bind_ref {
    void (*fn)(void* bind, ndarray* values, const std::vector<int>& inputs);
    void* bind;
  };
  struct convert_ref {
    void (*fn)(void* convert, const ndarray* outputs);
    void* convert;
  };
  /// @brief The call loop, compiled once (in the runtime under XSYM_COMPILED_LIB) rather than
  /// once per pair of argument and result types: each call_with only wraps its Bind and
  /// Convert into these.
  void run_call(bind_ref bind, convert_ref convert, const ndarray* dests);

  /// @brief Runs the function and writes output o into dests[o] (host arrays in the caller's
  /// memory, any strides, each of its output's dtype and rank). An output whose node can write
  /// it straight into its destination does so (no copy); the others are copied in at the end.
  /// Throws shape_error (and updates nothing) when a destination's shape differs from its
  /// output's, std::invalid_argument when two destinations share memory.
  template <class Bind>
  void call_into(Bind&& bind, const ndarray* dests);

  /// @brief into(...)'s short path: where this function is one typed kernel, lone op or cxx
  /// program (plan_direct),
  /// runs it into dest, n elements of host memory in C order, on args (input i's first element:
  /// C-contiguous arrays of dest's shape, one value for a rank-0 input; function.hpp's
  /// direct_argument) and returns true when this call needs nothing else; false, having done
  /// nothing, otherwise.
  bool run_direct(const std::byte* const* args, std::byte* dest, std::int64_t n) const;
  bool has_direct() const { return m_direct.direct || m_direct.step || m_direct.jit; }

  /// @brief The shared values a call read, by variable (DebugMode hands them to its twin).
  using shared_values_read = detail::shared_values_read;

  /// @brief Runs the graph without applying updates; returns copies of outputs and update values.
  /// With `shared`, the variables it names take those values instead of their current ones.
  void evaluate(const ndarray* args, std::vector<ndarray>& outs, std::vector<ndarray>& ups,
                const shared_values_read* shared = nullptr);

 private:
  // run_direct's lone op or cxx program (call.hpp).
  bool run_direct_step(const std::byte* const* args, std::byte* dest, std::int64_t n) const;
  // build.hpp
  void build_graph(const std::vector<var_ptr>& input_vars, const std::vector<var_ptr>& roots, std::size_t n_outputs,
                   const std::vector<std::pair<var_ptr, var_ptr>>& update_vars, const function_options& options);
  // link.hpp
  std::vector<detail::thunk> bind_thunks(bool reference, bool naive_products = false);
  void compile_kernels(std::vector<detail::thunk>& thunks);
  void plan_direct();
  // call.hpp
  void release_dead(std::size_t node);
  void release_after_call();
  void release_all_but_constants();
  void apply_updates(ndarray* values);
  void read_shared(ndarray* values, bool hold_updated);
  void unlock_shared();
  void place_shared(int s, shared_value& sv);
  [[noreturn]] void throw_not_broadcastable(std::size_t input, int dim, const shape_t& got) const;
  [[noreturn]] void throw_node_error(std::size_t i, const std::exception& e);
  // into.hpp
  void bind_destinations(const ndarray* dests);
  int finish_into(const ndarray* out, const ndarray* dests);
  void take_updates_aside(const ndarray* dests, ndarray* values);
  void release_destinations();
  // debug_modes.hpp
  node_event event_for(std::size_t i, const ndarray* values, bool with_outputs) const;
  void run_checked(std::size_t i, ndarray* values);
  void print_monitor(std::size_t i, const ndarray* values, bool after) const;
  [[noreturn]] void debug_fail(std::size_t i, const ndarray* values, const std::string& what) const;
  ndarray product_scale(std::size_t i, const std::vector<ndarray>& ref_in) const;
  void debug_check_node(std::size_t i, ndarray* values, std::vector<ndarray>& snapshot);
  void guard_inputs(const ndarray* values) const;
  void guard_outputs(std::size_t i, const ndarray* values) const;
  void check_against_reference(const ndarray* args, const shared_values_read& shared, const ndarray* values);
  // profile_wiring.hpp
  void init_profile(const function_options& options, std::vector<rewrite_record> records, int nodes_before,
                    const double (&seconds)[4]);
  void copy_shapes(function_profile& p);
  void record_shapes(std::size_t i, const ndarray* values, bool inputs);
  enum class recorded { skipped, counted, new_sizes };  // new_sizes: outputs' sizes other than the last recorded
  recorded record_call(function_profile& p, std::uint64_t call_ticks, bool take_shapes);

  std::string m_name;
  detail::resolved_plan m_plan;
  cpu::jit_stats m_jit;
  std::shared_ptr<const function_graph> m_graph;
  std::vector<detail::thunk> m_thunks;
  // Each communicator the AllReduce nodes use, and how many use it: told at each call's start.
  std::vector<std::pair<const communicator*, int>> m_collectives;
  std::vector<ndarray> m_values;
  std::vector<ndarray> m_out;
  std::vector<const ndarray*> m_dest_of_slot;  // into(...): per slot, the caller's array its node writes
  std::vector<int> m_dest_slots;               // the slots bound in this call: the first m_n_dest_slots
  std::size_t m_n_dest_slots = 0;
  std::vector<std::uint8_t> m_direct_output;   // per output: may be written straight into a destination
  bool m_inputs_broadcastable = false;         // some input is declared broadcastable (checked per call)
  detail::buffer_pool m_pool;
  std::vector<int> m_shared_slots;
  // The shared variables read or updated, ordered by address as in every function (so calls
  // lock them without deadlock); per variable, whether it is updated and whether it is held.
  std::vector<shared_value*> m_shared_locks;
  std::vector<std::uint8_t> m_shared_updated, m_shared_held;
  struct shared_unlock {  // a call's locks released however it ends
    function_runtime* rt;
    ~shared_unlock() { rt->unlock_shared(); }
  };
  std::vector<int> m_view_slots;
  std::vector<std::vector<int>> m_dead_after;
  std::vector<std::uint64_t> m_scratch_ticks;
  std::unique_ptr<detail::device_timer> m_device_timer;  // CUDA events per node (GPU backend, CUDA builds)
  std::uint64_t m_fn_ticks_last = 0;
  std::shared_ptr<profile_stats> m_stats;
  std::shared_ptr<function_profile> m_profile;
  std::vector<detail::thunk> m_ref_thunks;           // DebugMode: reference kernels per node
  std::unique_ptr<function_runtime> m_reference;      // DebugMode: the unoptimised twin
  detail::collective_log m_collective_log;            // the twin: this call's AllReduce results
  monitor_callback m_monitor_pre, m_monitor_post;
  bool m_checked = false;
  bool m_is_reference = false;
  std::shared_ptr<const function_facts> m_facts;  // shared by its profile and each scope's record
  std::vector<std::vector<value_info>> m_last_inputs, m_last_outputs;
  std::int64_t m_sample_calls = 0;
  std::vector<shape_t> m_sampled_shapes;  // the inputs' and shared values' at the last sampled call
  std::vector<shape_t> m_pending_shapes;  // this call's, until it is recorded
  bool sample_this_call(const ndarray* values);
  std::uint64_t m_fn_start = 0;
  detail::call_lock m_mutex;
  // A graph of one elementwise node run by a typed kernel or one precompiled step (a lone
  // op), its inputs the function's and one-value constants, with no shared variable, update or check: an into(...) call whose
  // arrays are C-contiguous, of the output's shape, apart from the destination and too small
  // to stream or split across threads computes exactly what the call loop would, without
  // binding slots, taking the lock or releasing buffers (plan_direct, run_direct).
  struct direct_kernel {
    cpu::typed_direct_fn direct = nullptr;  // a typed kernel, its leaves in `leaves`
    cpu::typed_leaves leaves;
    const cpu::compiled_step* step = nullptr;  // the lone op's, in m_thunks[0]
    cpu::jit_fn jit = nullptr;                 // or the program cxx compiled for whole arrays,
    cpu::jit_direct_fn jit_direct = nullptr;   // entered on the call's arguments where it can be
    std::int64_t min_elements = 1;
    int n_in = 0;
    std::int64_t elem_bytes = 0;
    std::int64_t bytes_per_element = 0;  // of the arrays read and written
    std::int64_t max_elements = 0;       // from here on, the node runs on threads
    std::uint64_t one_value = 0;         // bit k: program input k is one value
    std::array<int, limits::max_registers> arg{};  // program input k: the call's argument, or -1
    std::array<const std::byte*, limits::max_registers> constant{};
  } m_direct;
};

}  // namespace xsym

#endif
