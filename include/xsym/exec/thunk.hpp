#ifndef XSYM_EXEC_THUNK_HPP
#define XSYM_EXEC_THUNK_HPP

// The thunk interface: one Apply node bound to the function that runs it, the buffers a call
// hands between nodes, and the hooks through which the GPU backend binds its own thunks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../backend/cpu/elemwise.hpp"
#include "../graph/fgraph.hpp"

namespace xsym::detail {

/// Buffers released during a call, handed to later nodes instead of going back to malloc.
struct buffer_pool {
  struct entry {
    std::shared_ptr<std::byte> owner;
    std::size_t capacity;
    bool on_device;
  };
  std::vector<entry> free;

  void give(ndarray& a) {
    if (a.owner() && a.owner().use_count() == 1 && a.capacity() > 0) {
      const std::size_t capacity = a.capacity();
      const bool on_device = a.on_device();
      free.push_back({a.take_owner(), capacity, on_device});  // moved: no reference-count update
      return;
    }
    a.release();
  }
  bool take(ndarray& slot, dtype t, const shape_t& shape, std::size_t bytes, bool on_device = false) {
    for (std::size_t i = 0; i < free.size(); ++i) {
      if (free[i].on_device != on_device || free[i].capacity < bytes || free[i].capacity > 2 * bytes + 64) continue;
      slot = ndarray::in_buffer(t, shape, std::move(free[i].owner), free[i].capacity, on_device);
      free[i] = std::move(free.back());
      free.pop_back();
      return true;
    }
    return false;
  }
};

/// DebugMode: what a call's AllReduce nodes read and got. The unoptimised twin replays these
/// results instead of reducing again: a collective of its own would pair with the next call of
/// a rank that runs without DebugMode, or that failed a check, and sum the wrong data.
struct collective_log {
  struct entry {
    const op* fn;        // the node's op: the twin's node of the same op takes this entry
    std::size_t node;    // the function's Apply node
    ndarray input, output;
    ndarray twin_input;  // what the twin's node read (set when it runs)
    bool taken = false;
  };
  std::vector<entry> entries;

  /// The entry of `fn`'s node, else the first one left on the same communicator; null if none.
  entry* take(const op* fn) {
    entry* e = nullptr;
    for (auto& c : entries)
      if (!c.taken && c.fn == fn) {
        e = &c;
        break;
      }
    for (auto& c : entries)
      if (!e && !c.taken && c.fn->comm == fn->comm) e = &c;
    if (e) e->taken = true;
    return e;
  }
};

/// One Apply node bound to its kernel.
struct thunk {
  void (*run)(const thunk&, ndarray* values) = nullptr;
  const apply_node* node = nullptr;
  cpu::compiled_program prog;  // elementwise nodes
  // OnePassGemv: the program of g alone, for blocks of rows (one_pass_blocks), where a typed
  // tree's kernel or cxx's loop computes it; null elsewhere
  std::shared_ptr<cpu::compiled_program> block_g;
  bool one_element_path = false;  // run_elemwise_one may run it (see there)
  // DebugMode's per-node reference: products and reductions run naive loops of their own
  // (exec/cpu_nodes.hpp), not the kernels the function runs.
  bool naive_products = false;
  std::vector<unsigned> one_element_inputs;  // for it, per step: bit j, argument j is an input
  std::vector<std::uint8_t> slot_bcast;  // inputs' broadcastable patterns
  dtype out_type = dtype::float64;
  cpu::parallelism par;  // openmp=True: threads for large elementwise nodes and products
  buffer_pool* pool = nullptr;
  // Per slot, the caller's memory an output is written into during an into(...) call (null
  // for every slot otherwise); owned by the runtime, null for reference thunks.
  const ndarray* const* dests = nullptr;
  std::shared_ptr<const void> device_state;  // GPU backend: the node's data in device memory
  bool device_typed = false;  // GPU backend: a typed tree's kernel runs the node (<type> typed)
  mutable std::uint64_t wait_ticks = 0;  // AllReduce: its last run's wait for the other ranks (profile)
  collective_log* replay = nullptr;      // AllReduce in DebugMode's twin: the results it replays
};

/// Per-node device timing (CUDA events), installed by the GPU backend under CUDA.
class device_timer {
 public:
  virtual ~device_timer() = default;
  virtual void node_begin(std::size_t node) = 0;
  virtual void node_end(std::size_t node) = 0;
  /// Waits for the device; replaces the host ticks of device nodes with their device times.
  virtual void collect(std::uint64_t* node_ticks) = 0;
};

/// What the GPU backend adds to the runtime when it is included (null otherwise).
struct gpu_runtime_hooks {
  void (*bind)(thunk& t, const function_graph& g, const apply_node& n) = nullptr;
  std::unique_ptr<device_timer> (*make_timer)(const function_graph& g) = nullptr;
};
inline gpu_runtime_hooks& gpu_runtime() {
  static gpu_runtime_hooks h;
  return h;
}

}  // namespace xsym::detail

#endif
