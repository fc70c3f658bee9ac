// The 2-D heat equation by explicit finite differences on an n x n grid held at 0 on its edge:
// each step replaces the interior with u + r (sum of the four neighbours - 4 u), written with
// slices and set_subtensor as in numpy. The same steps run as a hand-written loop, and the two
// grids are compared at the end.
//
//   XSYM_FLAGS=profile=True ./heat_equation [steps] [n]
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <xsym/xsym.hpp>

using real = xsym::floatX;

int main(int argc, char** argv) try {
  const long steps = argc > 1 ? std::atol(argv[1]) : 500;
  const long n_arg = argc > 2 ? std::atol(argv[2]) : 256;
  if (steps < 0 || n_arg < 3) throw std::invalid_argument("heat_equation: steps must be >= 0 and n >= 3");
  const auto n = static_cast<std::size_t>(n_arg);
  const real r = real(0.2);  // dt * k / dx^2; explicit steps are stable up to 0.25

  // A hot square in the middle of a cold plate.
  xt::xtensor<real, 2> start = xt::zeros<real>({n, n});
  for (std::size_t i = n / 4; i < 3 * n / 4; ++i)
    for (std::size_t j = n / 4; j < 3 * n / 4; ++j) start(i, j) = real(100);

  using xsym::range;
  using xsym::placeholders::_;
  auto u = xsym::shared(start, "u");
  const auto inner = u(range(1, -1), range(1, -1));
  const auto up = u(range(_, -2), range(1, -1)), down = u(range(2, _), range(1, -1));
  const auto left = u(range(1, -1), range(_, -2)), right = u(range(1, -1), range(2, _));
  auto next = xsym::set_subtensor(inner, inner + r * (up + down + left + right - real(4) * inner));
  auto step = xsym::function("step", xsym::inputs(), xsym::outputs(), xsym::updates(xsym::update(u, next)));

  auto t0 = std::chrono::steady_clock::now();
  for (long s = 0; s < steps; ++s) step();
  const double xsym_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const xt::xtensor<real, 2> got = u.get_value();

  // The hand loop: two buffers, the edge copied unchanged.
  xt::xtensor<real, 2> a = start, b = start;
  t0 = std::chrono::steady_clock::now();
  for (long s = 0; s < steps; ++s) {
    for (std::size_t i = 1; i + 1 < n; ++i)
      for (std::size_t j = 1; j + 1 < n; ++j)
        b(i, j) = a(i, j) + r * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1) - real(4) * a(i, j));
    std::swap(a, b);
  }
  const double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  double worst = 0, heat_before = 0, heat = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    worst = std::max(worst, std::abs(static_cast<double>(got.data()[k]) - static_cast<double>(a.data()[k])));
    heat_before += static_cast<double>(start.data()[k]);
    heat += static_cast<double>(got.data()[k]);
  }
  // Both compute the same sums in the same order; the compiler may contract a * b + c into
  // one rounding in either, so the bound is a few ulps of the largest value (100).
  const double bound = 100.0 * 64 * std::numeric_limits<real>::epsilon();
  std::cout << "floatX: " << (sizeof(real) == 4 ? "float32" : "float64") << ", grid: " << n << " x " << n
            << ", steps: " << steps << "\n";
  std::cout << "heat: " << heat_before << " at the start, " << heat << " at the end (some leaves through the edge)\n";
  std::cout << "largest difference from the hand loop: " << worst << " (bound " << bound << ")\n";
  std::cout << "matches the hand loop: " << (worst <= bound ? "yes" : "no") << "\n";
  std::cout << "xsym: " << xsym_s << " s, hand loop: " << loop_s << " s\n";
  return worst <= bound ? 0 : 2;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
