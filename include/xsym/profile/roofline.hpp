#ifndef XSYM_PROFILE_ROOFLINE_HPP
#define XSYM_PROFILE_ROOFLINE_HPP

// This machine's memory bandwidth and peak floating-point rate, measured once by a short
// probe (about 0.1 s) and cached in memory and in $XDG_CACHE_HOME/xsym/roofline4 (or
// ~/.cache/xsym/roofline4), so profiling.roofline=True can say which nodes are at the limit.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xsimd/xsimd.hpp>

#include "clock.hpp"

namespace xsym {

/// @brief What the probe measured: bytes per second streamed from memory, flops per second.
struct machine_limits {
  // B/s of a[i] = b[i] + s * c[i] for working sets that fit the L2 cache, the last-level
  // cache, and neither (DRAM); the cache sizes come from the C library (sysconf).
  double l2_bytes = 1 << 20, llc_bytes = 16 << 20;
  double bandwidth_small = 0, bandwidth_medium = 0, bandwidth = 0;
  double peak_flops = 0;  // flop/s, float32 fused multiply-adds on one core

  /// @brief The bandwidth a node moving `bytes` can expect: from the smallest level that holds them.
  double bandwidth_for(double bytes) const {
    if (bytes <= l2_bytes) return bandwidth_small;
    if (bytes <= llc_bytes) return bandwidth_medium;
    return bandwidth;
  }
};

namespace detail {
inline std::filesystem::path roofline_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path base = xdg && *xdg ? std::filesystem::path(xdg) : home ? std::filesystem::path(home) / ".cache" : "";
  return base.empty() ? std::filesystem::path() : base / "xsym" / "roofline4";
}

inline machine_limits probe_machine() {
  machine_limits m;
  auto triad = [](std::size_t n, int repeats) {
    std::vector<float> a(n, 0.f), b(n, 1.f), c(n, 2.f);
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const double t0 = wall_seconds();
      float* pa = a.data();
      const float* pb = b.data();
      const float* pc = c.data();
      for (std::size_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
      best = std::min(best, wall_seconds() - t0);
    }
    volatile float sink = a[n / 2];
    (void)sink;
    return 3.0 * static_cast<double>(n) * sizeof(float) / best;
  };
  if (const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) m.l2_bytes = static_cast<double>(l2);
  // A virtual machine may report the whole socket's last-level cache; one core sees far less.
  if (const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) m.llc_bytes = std::min(static_cast<double>(l3), 8 * m.l2_bytes);
  // Three arrays of floats filling half of each level; DRAM: four times the last level.
  auto floats_for = [](double bytes) { return static_cast<std::size_t>(bytes / 2 / 3 / sizeof(float)); };
  m.bandwidth_small = triad(floats_for(m.l2_bytes), 200);
  m.bandwidth_medium = triad(floats_for(m.llc_bytes), 20);
  m.bandwidth = triad(std::max(floats_for(8 * m.llc_bytes), std::size_t(16) << 20), 3);
  {  // Independent FMA chains in registers: the core's float32 peak.
    using B = xsimd::batch<float>;
    B x0(1.0f), x1(1.1f), x2(1.2f), x3(1.3f), x4(1.4f), x5(1.5f), x6(1.6f), x7(1.7f);
    const B mul(0.999999f), add(1e-7f);
    const long iters = 2000000;
    const double t0 = wall_seconds();
    for (long i = 0; i < iters; ++i) {
      x0 = xsimd::fma(x0, mul, add);
      x1 = xsimd::fma(x1, mul, add);
      x2 = xsimd::fma(x2, mul, add);
      x3 = xsimd::fma(x3, mul, add);
      x4 = xsimd::fma(x4, mul, add);
      x5 = xsimd::fma(x5, mul, add);
      x6 = xsimd::fma(x6, mul, add);
      x7 = xsimd::fma(x7, mul, add);
    }
    const double t = wall_seconds() - t0;
    volatile float sink = xsimd::hadd(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7);
    (void)sink;
    m.peak_flops = 8.0 * 2.0 * static_cast<double>(B::size) * static_cast<double>(iters) / t;
  }
  return m;
}
}  // namespace detail

/// @brief The machine's limits: from the cache when there is one, else probed (and cached).
inline const machine_limits& roofline() {
  static const machine_limits limits = [] {
    machine_limits m;
    const auto path = detail::roofline_cache_path();
    if (!path.empty()) {
      std::ifstream in(path);
      if (in >> m.l2_bytes >> m.llc_bytes >> m.bandwidth_small >> m.bandwidth_medium >> m.bandwidth >> m.peak_flops &&
          m.bandwidth > 0 &&
          m.peak_flops > 0)
        return m;
    }
    m = detail::probe_machine();
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
      std::ofstream out(path);
      if (out)
        out << m.l2_bytes << " " << m.llc_bytes << " " << m.bandwidth_small << " " << m.bandwidth_medium << " "
            << m.bandwidth << " " << m.peak_flops << "\n";
    }
    return m;
  }();
  return limits;
}

}  // namespace xsym

#endif
