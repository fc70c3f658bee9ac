// Every positive normal float32 through xsym's batch log and through xsimd's, against the
// double-precision log: the worst error in ulps, where, and how many results are more than half
// an ulp off. On AVX-512 xsym's is the table log (the test in tests/expr samples it; this checks
// all 2.13e9 values). About 40 s on one core.
//
//   cmake --build build-bench --target log_ulps && build-bench/bench/log_ulps
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include <xsym/backend/cpu/scalar_kernels.hpp>

int main() {
  using B = xsimd::batch<float>;
  constexpr std::uint32_t w = B::size;
  struct tally {
    const char* name;
    double worst = 0;
    float worst_at = 0;
    std::uint64_t above_half = 0;
  } ours{"xsym"}, theirs{"xsimd"};
  std::uint64_t checked = 0;
  alignas(64) float in[w], out[w], ref[w];
  for (std::uint32_t bits = 0x00800000u; bits < 0x7f800000u; bits += w) {  // 0x7f800000 - 0x00800000 is a multiple of w
    for (std::uint32_t j = 0; j < w; ++j) {
      const std::uint32_t b = bits + j;
      std::memcpy(&in[j], &b, 4);
    }
    xsym::cpu::detail::vlog_batch(B::load_aligned(in)).store_aligned(out);
    xsimd::log(B::load_aligned(in)).store_aligned(ref);
    for (std::uint32_t j = 0; j < w; ++j) {
      const double exact = std::log(static_cast<double>(in[j]));
      const float rounded = static_cast<float>(exact);
      const double ulp = std::nextafter(std::abs(rounded), INFINITY) - std::abs(rounded);
      for (auto [t, got] : {std::pair{&ours, out[j]}, std::pair{&theirs, ref[j]}}) {
        const double err = std::abs(got - exact) / ulp;
        t->above_half += err > 0.5;
        if (err > t->worst) t->worst = err, t->worst_at = in[j];
      }
    }
    checked += w;
  }
  std::printf("float32 log over all %llu positive normal floats, %u lanes:\n", static_cast<unsigned long long>(checked), w);
  for (const tally& t : {ours, theirs})
    std::printf("  %-6s worst %.4f ulp at %a (%.9g); %llu (%.4f%%) more than half an ulp off\n", t.name, t.worst,
                t.worst_at, t.worst_at, static_cast<unsigned long long>(t.above_half), 100.0 * t.above_half / checked);
  return ours.worst <= 1.0 ? 0 : 1;
}
