#ifndef XSYM_BACKEND_GPU_MEMORY_HPP
#define XSYM_BACKEND_GPU_MEMORY_HPP

// Device memory: cudaMalloc under nvcc, aligned host memory on Thrust's OpenMP system. With
// XSYM_COMPUTE_GPU_MEM_USED=1 every allocation is counted (as Theano's theano_allocated()).
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "../../expr/ndarray.hpp"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

#ifndef XSYM_COMPUTE_GPU_MEM_USED
#define XSYM_COMPUTE_GPU_MEM_USED 0
#endif

namespace xsym::cuda {

namespace detail {
// Device bytes, process-wide: counted where XSYM_COMPUTE_GPU_MEM_USED is set.
inline xsym::detail::memory_state& device_memory() {
  static xsym::detail::memory_state m;
  return m;
}
// This thread's device bytes, for a profiled call's measured peak.
inline const std::shared_ptr<xsym::detail::thread_memory_state>& thread_counters() {
  thread_local const auto s = std::make_shared<xsym::detail::thread_memory_state>();
  return s;
}
inline xsym::detail::thread_memory_state& thread_counters_ref() { return *thread_counters(); }

#ifdef __CUDACC__
inline void check(cudaError_t e, const char* what, std::size_t bytes = 0) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("xsym: ") + what + (bytes ? " of " + std::to_string(bytes) + " bytes" : "") +
                             " failed: " + cudaGetErrorString(e));
}
#endif

inline void* raw_allocate(std::size_t bytes) {
  const std::size_t padded = bytes == 0 ? 256 : bytes;
#ifdef __CUDACC__
  void* p = nullptr;
  check(cudaMalloc(&p, padded), "cudaMalloc", padded);
  return p;
#else
  return ::operator new(padded, std::align_val_t{256});
#endif
}

inline void raw_free(void* p) {
#ifdef __CUDACC__
  cudaFree(p);
#else
  ::operator delete(p, std::align_val_t{256});
#endif
}

inline std::shared_ptr<std::byte> allocate(std::size_t bytes) {
  auto* p = static_cast<std::byte*>(raw_allocate(bytes));
  if constexpr (XSYM_COMPUTE_GPU_MEM_USED) {
    const auto size = static_cast<std::int64_t>(bytes);
    return std::shared_ptr<std::byte>(p, [c = xsym::detail::count_bytes(device_memory(), thread_counters(), size)](std::byte* q) {
      c.release();
      raw_free(q);
    });
  }
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { raw_free(q); });
}

enum class direction { to_device, to_host, on_device };

inline void copy_bytes(void* dst, const void* src, std::size_t bytes, [[maybe_unused]] direction d) {
  if (bytes == 0) return;
#ifdef __CUDACC__
  const cudaMemcpyKind kind = d == direction::to_device ? cudaMemcpyHostToDevice
                              : d == direction::to_host ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
  check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy", bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline memory_counters read_counters() {
  const auto& m = device_memory();
  return {m.current.load(), m.peak.load(), m.allocations.load()};
}
}  // namespace detail

/// @brief Device bytes held by xsym now and at most, and the number of device allocations.
/// Counting is compiled in only with XSYM_COMPUTE_GPU_MEM_USED=1 (it slows every allocation).
template <bool Counted = XSYM_COMPUTE_GPU_MEM_USED>
memory_counters allocated() {
  static_assert(Counted,
                "xsym::cuda::allocated() needs device memory counting: compile with -DXSYM_COMPUTE_GPU_MEM_USED=1");
  return detail::read_counters();
}

/// @brief Resets the device peak to the current value (to measure one region).
inline void reset_peak_memory() { detail::device_memory().peak.store(detail::device_memory().current.load()); }

}  // namespace xsym::cuda

#endif
