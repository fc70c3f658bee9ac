// Every float32 input through xsym's batch log and log1p and through xsimd's, against the
// double-precision function: the worst error in ulps, where, and how many results are more than
// half an ulp off. log: every positive normal float; log1p: every float above -1 but NaN,
// infinity and -0 (which xsym passes to xsimd). On AVX-512 xsym's are the table log and log1p
// built on it (the tests in tests/expr sample them; this checks them all). About 100 s on one
// core.
//
//   cmake --build build-bench --target log_ulps && build-bench/bench/log_ulps
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include <xsym/backend/cpu/scalar_kernels.hpp>

namespace {
using B = xsimd::batch<float>;
constexpr std::uint32_t w = B::size;

struct tally {
  const char* name;
  double worst = 0;
  float worst_at = 0;
  std::uint64_t above_half = 0;
};

// The bit patterns [lo, hi) through ours and theirs against exact; the last batch repeats hi - 1.
template <class Ours, class Theirs, class Exact>
std::uint64_t check_range(std::uint32_t lo, std::uint32_t hi, Ours ours_fn, Theirs theirs_fn, Exact exact_fn,
                          tally& ours, tally& theirs) {
  alignas(64) float in[w], out[w], ref[w];
  std::uint64_t checked = 0;
  for (std::uint32_t bits = lo; bits < hi; bits += w) {
    for (std::uint32_t j = 0; j < w; ++j) {
      const std::uint32_t b = bits + j < hi ? bits + j : hi - 1;
      std::memcpy(&in[j], &b, 4);
    }
    ours_fn(B::load_aligned(in)).store_aligned(out);
    theirs_fn(B::load_aligned(in)).store_aligned(ref);
    for (std::uint32_t j = 0; j < w; ++j) {
      const double exact = exact_fn(static_cast<double>(in[j]));
      const float rounded = static_cast<float>(exact);
      const double ulp = rounded == 0 ? 0x1p-149 : std::nextafter(std::abs(rounded), INFINITY) - std::abs(rounded);
      for (auto [t, got] : {std::pair{&ours, out[j]}, std::pair{&theirs, ref[j]}}) {
        const double err = std::abs(got - exact) / ulp;
        t->above_half += err > 0.5;
        if (err > t->worst) t->worst = err, t->worst_at = in[j];
      }
    }
    checked += w;
  }
  return checked;
}

void report(const char* what, std::uint64_t checked, const tally& ours, const tally& theirs) {
  std::printf("float32 %s over %llu inputs, %u lanes:\n", what, static_cast<unsigned long long>(checked), w);
  for (const tally& t : {ours, theirs})
    std::printf("  %-6s worst %.4f ulp at %a (%.9g); %llu (%.4f%%) more than half an ulp off\n", t.name, t.worst,
                t.worst_at, t.worst_at, static_cast<unsigned long long>(t.above_half), 100.0 * t.above_half / checked);
}
}  // namespace

int main() {
  using xsym::cpu::detail::vlog1p_batch;
  using xsym::cpu::detail::vlog_batch;
  tally log_ours{"xsym"}, log_theirs{"xsimd"}, log1p_ours{"xsym"}, log1p_theirs{"xsimd"};
  auto xsimd_log = [](B x) { return xsimd::log(x); };
  auto xsimd_log1p = [](B x) { return xsimd::log1p(x); };
  auto exact_log = [](double x) { return std::log(x); };
  auto exact_log1p = [](double x) { return std::log1p(x); };
  const std::uint64_t n_log = check_range(0x00800000u, 0x7f800000u, [](B x) { return vlog_batch(x); }, xsimd_log,
                                          exact_log, log_ours, log_theirs);
  report("log (positive normals)", n_log, log_ours, log_theirs);
  // +0 and the positive floats, then (-1, -0) exclusive: -0 is xsimd's on both sides.
  std::uint64_t n_log1p = check_range(0x00000000u, 0x7f800000u, [](B x) { return vlog1p_batch(x); }, xsimd_log1p,
                                      exact_log1p, log1p_ours, log1p_theirs);
  n_log1p += check_range(0x80000001u, 0xbf800000u, [](B x) { return vlog1p_batch(x); }, xsimd_log1p, exact_log1p,
                         log1p_ours, log1p_theirs);
  report("log1p (above -1)", n_log1p, log1p_ours, log1p_theirs);
  return log_ours.worst <= 1.0 && log1p_ours.worst <= 1.0 ? 0 : 1;
}
