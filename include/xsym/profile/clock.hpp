#ifndef XSYM_PROFILE_CLOCK_HPP
#define XSYM_PROFILE_CLOCK_HPP

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define XSYM_HAS_RDTSC 1
#else
#define XSYM_HAS_RDTSC 0
#endif

namespace xsym::detail {

/// A cheap monotonic tick: the TSC where there is one (cheaper to read than steady_clock),
/// else steady_clock nanoseconds.
inline std::uint64_t ticks() {
#if XSYM_HAS_RDTSC
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

/// Seconds per tick, measured once against steady_clock over a few milliseconds.
inline double seconds_per_tick() {
  static const double value = [] {
#if XSYM_HAS_RDTSC
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto c0 = ticks();
    while (clock::now() - t0 < std::chrono::milliseconds(5)) {
    }
    const auto t1 = clock::now();
    const auto c1 = ticks();
    return std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(c1 - c0);
#else
    return 1e-9;
#endif
  }();
  return value;
}

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace xsym::detail

#endif
