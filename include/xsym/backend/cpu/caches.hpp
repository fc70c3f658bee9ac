#ifndef XSYM_BACKEND_CPU_CACHES_HPP
#define XSYM_BACKEND_CPU_CACHES_HPP

// What the machine's caches hold, for the kernels that choose by it: streaming stores, one
// pass over a matrix, prefetching rows from memory.
#include <cstdint>
#include <cstdlib>
#include <string>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif
#if defined(__linux__)
#include <fcntl.h>
#endif

#include "../../config/cold.hpp"

namespace xsym::cpu {

namespace detail {
XSYM_COLD_BEGIN  // run once, for the streaming threshold

// The size of the last-level cache that CPU 0 shares, as Linux's sysfs lists it ("32768K"), or
// -1. A virtual machine's sysconf may report the whole host's cache, where sysfs and lscpu
// give the guest's.
inline std::int64_t sysfs_llc_bytes() {
#if defined(__linux__)
  std::int64_t best = -1;
  int best_level = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    auto read_line = [](const std::string& path) {
      std::string text;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return text;
      char buf[64];
      const auto got = ::read(fd, buf, sizeof buf - 1);
      ::close(fd);
      if (got > 0) text.assign(buf, static_cast<std::size_t>(got));
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      return text;
    };
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type"), size = read_line(dir + "size");
    if (level.empty()) break;
    if (type == "Instruction" || size.empty()) continue;
    char* end = nullptr;
    const long long value = std::strtoll(size.c_str(), &end, 10);
    const std::int64_t bytes = value * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1);
    const int lv = std::atoi(level.c_str());
    if (value > 0 && lv >= best_level) {
      best_level = lv;
      best = bytes;
    }
  }
  return best;
#else
  return -1;
#endif
}

// Bytes of a call's arrays (inputs and outputs) from which a node streams: 3/8 of the last-level
// cache, the fraction glibc takes for its non-temporal memcpy. Below it, the output is likely still cached when the next node reads
// it, and the ordinary stores and hardware prefetch are faster. The cache is sysfs's when it
// lists one, else sysconf's; with neither, the threshold is 32 MiB.
inline std::int64_t default_streaming_min_bytes() {
  std::int64_t llc = sysfs_llc_bytes();
#if defined(_SC_LEVEL3_CACHE_SIZE)
  if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  return llc > 0 ? llc / 8 * 3 : std::int64_t{32} << 20;
}

// Whether a core reads the last-level cache about as fast as it reads L2 from beyond it: AMD's
// L3 serves one core complex. Intel's server LLC is spread over a mesh, and a core reads its
// share near memory's speed (docs/performance.md, "Where one pass starts to pay").
inline bool llc_near_core() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

XSYM_COLD_END

// One core's L2, as sysconf gives it; 1 MiB where it gives nothing.
inline std::int64_t l2_cache_bytes() {
  static const std::int64_t bytes = [] {
    long v = -1;
#if defined(_SC_LEVEL2_CACHE_SIZE)
    v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{1} << 20;
  }();
  return bytes;
}
}  // namespace detail

/// @brief The streaming threshold in bytes (see detail::default_streaming_min_bytes); tests
/// set it low to run the streaming path on small arrays.
inline std::int64_t& streaming_min_bytes() {
  static std::int64_t bytes = detail::default_streaming_min_bytes();
  return bytes;
}

}  // namespace xsym::cpu

#endif
