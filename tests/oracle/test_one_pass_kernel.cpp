// one_pass_gemv's kernel with this CPU's vector instructions (the oracle area builds with
// -march=native, and CI runs it sanitized): the row sums it hands to the elementwise work are
// the row product's bits, and the column product's are an FMA chain over the rows in order
// per part, the parts added in order. Rows on a vector's boundary, rows whose stride is whole
// vectors but whose first element is not (the loads start after a peel), and rows of no
// aligned stride; coefficients normal, subnormal in whole blocks of 8 rows, or in one row of a
// block (the blocks with any take the column product's own path).
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

template <class T>
using aligned_vector = std::vector<T, xsimd::aligned_allocator<T, 64>>;

template <class T>
struct kernel_case {
  std::int64_t m, k, lda, offset;
  aligned_vector<T> storage;
  std::vector<T> u, g;  // what the kernel handed to the elementwise work, and what it got back
  const T* a() const { return storage.data() + offset; }
};

// The column product as the kernels define it: per part (rows [starts[p], starts[p + 1])), one
// FMA per row in order from 0; the parts added in order.
template <class T>
std::vector<T> parts_reference(const kernel_case<T>& c, T alpha, const std::vector<std::int64_t>& starts) {
  std::vector<T> sums(static_cast<std::size_t>(c.k), T(0));
  for (std::size_t p = 0; p + 1 < starts.size(); ++p) {
    std::vector<T> part(static_cast<std::size_t>(c.k), T(0));
    for (std::int64_t r = starts[p]; r < starts[p + 1]; ++r) {
      const T coef = alpha * c.g[static_cast<std::size_t>(r)];
      for (std::int64_t e = 0; e < c.k; ++e)
        part[static_cast<std::size_t>(e)] = xsym::cpu::detail::fmadd(c.a()[r * c.lda + e], coef, part[static_cast<std::size_t>(e)]);
    }
    for (std::int64_t e = 0; e < c.k; ++e)
      sums[static_cast<std::size_t>(e)] = p == 0 ? part[static_cast<std::size_t>(e)] : sums[static_cast<std::size_t>(e)] + part[static_cast<std::size_t>(e)];
  }
  return sums;
}

// subnormal: 0 none, 1 in some blocks and rows, 2 every coefficient (the sums stay subnormal, so
// a term left out that should not be shows).
template <class T>
void check_kernel(std::int64_t k, std::int64_t lda, std::int64_t offset, int subnormal, int threads) {
  namespace cd = xsym::cpu::detail;
  std::mt19937 rng(static_cast<unsigned>(k * 131 + lda * 7 + offset));
  std::normal_distribution<double> normal;
  const std::int64_t group = cd::one_pass_group_rows(k * static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t m = 3 * group + 37;  // four groups, the last not whole
  kernel_case<T> c{m, k, lda, offset, aligned_vector<T>(static_cast<std::size_t>(m * lda + offset)), {}, {}};
  for (auto& v : c.storage) v = static_cast<T>(normal(rng));
  aligned_vector<T> x(static_cast<std::size_t>(k)), y(static_cast<std::size_t>(k));
  for (auto& v : x) v = static_cast<T>(0.1 * normal(rng));
  c.u.assign(static_cast<std::size_t>(m), T(0));
  c.g.assign(static_cast<std::size_t>(m), T(0));
  struct ctx_t {
    kernel_case<T>* c;
    int subnormal;
    std::int64_t group;
  } ctx{&c, subnormal, group};
  const cd::one_pass_rows_fn fn{[](void* p, std::int64_t r0, std::int64_t n, const void* uv) {
                                  auto& [cs, sub, grp] = *static_cast<ctx_t*>(p);
                                  for (std::int64_t r = r0; r < r0 + n; ++r) {
                                    const T ur = static_cast<const T*>(uv)[r - r0];
                                    cs->u[static_cast<std::size_t>(r)] = ur;
                                    // Each group's first 16 rows too: a part's sum starts from
                                    // subnormal terms, which then change it.
                                    const bool block = (r / 8) % 5 == 2 || r % grp < 16;
                                    const bool one = r % 8 == 3 && (r / 8) % 3 == 0;
                                    cs->g[static_cast<std::size_t>(r)] =
                                        sub == 2 || (sub == 1 && (block || one)) ? std::ldexp(T(r % 7 + 1), std::numeric_limits<T>::min_exponent - 3)
                                                              : ur / 100;
                                  }
                                },
                                &ctx};
  const T alpha = T(-0.01);  // alpha g is subnormal where g is 2^(min_exponent - 3) times 1 to 7
  cd::one_pass_gemv<T>(c.a(), lda, m, k, x.data(), fn, c.g.data(), alpha, nullptr, T(0), y.data(), threads);

  // The row sums: the row product's bits.
  std::vector<T> want_u(static_cast<std::size_t>(m));
  cd::gemv_rows(c.a(), lda, x.data(), want_u.data(), m, k, T(1), static_cast<const T*>(nullptr), T(0));
  for (std::int64_t r = 0; r < m; ++r) {
    INFO("row " << r);
    REQUIRE(c.u[static_cast<std::size_t>(r)] == want_u[static_cast<std::size_t>(r)]);
  }
  // The column product: with at most 16 groups, each group is a part of its own.
  const std::int64_t groups = (m + group - 1) / group;
  REQUIRE(groups <= cd::one_pass_max_parts);
  std::vector<std::int64_t> starts;
  for (std::int64_t p = 0; p <= groups; ++p) starts.push_back(std::min(m, p * group));
  const std::vector<T> sums = parts_reference(c, alpha, starts);
  for (std::int64_t e = 0; e < k; ++e) {
    INFO("column " << e);
    REQUIRE(y[static_cast<std::size_t>(e)] == sums[static_cast<std::size_t>(e)]);
  }
}

}  // namespace

TEST_CASE("one_pass_gemv: row sums are the row product's bits, the column product an FMA chain per part",
          "[oracle][one_pass]") {
  for (int subnormal : {0, 1, 2}) {
    for (int threads : {1, 2}) {
      for (int left_out : {1, 0}) {  // terms that cannot change y left out or not (subnormal_terms_pay)
        const xsym::cpu::testing::subnormal_terms_set forced(left_out);
        INFO("subnormal coefficients: " << (subnormal == 0 ? "none" : subnormal == 1 ? "some" : "all") << ", " << threads
                                        << " threads, terms " << (left_out ? "left out" : "all FMAs"));
        // float32: 100 columns; rows 112 apart (whole vectors at any width up to 16 lanes),
        // starting on a line or one element past it; rows 101 apart (no aligned stride).
        check_kernel<float>(100, 112, 0, subnormal, threads);
        check_kernel<float>(100, 112, 1, subnormal, threads);
        check_kernel<float>(100, 101, 3, subnormal, threads);
        check_kernel<double>(61, 64, 0, subnormal, threads);
        check_kernel<double>(61, 64, 5, subnormal, threads);
        check_kernel<double>(61, 63, 0, subnormal, threads);
      }
    }
  }
}

namespace {
// The row and column products' partial vectors (peels and tails of rows off a vector's
// boundary) against their definitions, element by element: lanes [lo, hi) from p, the others
// the fill (-0 and +0 kept apart, a NaN's payload kept); a store writes lanes [0, n) and
// nothing past them; a rotation moves lane l to (l + by) mod w.
template <class T>
void check_lanes() {
  namespace cd = xsym::cpu::detail;
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  auto bits = [](T v) {
    U u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  std::vector<T> src(static_cast<std::size_t>(3 * w));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>(i) + T(0.25);
  src[static_cast<std::size_t>(w) + 1] = -std::numeric_limits<T>::quiet_NaN();
  src[static_cast<std::size_t>(w) + 2] = T(-0.0);
  for (T fill : {T(0), T(-0.0), T(7)}) {
    for (std::int64_t lo = 0; lo <= w; ++lo) {
      for (std::int64_t hi = lo; hi <= w; ++hi) {
        const T* p = src.data() + w;  // lanes [lo, hi) read p[0, hi - lo)
        alignas(64) T got[w];
        cd::partial_load<B>(p, lo, hi, fill).store_aligned(got);
        for (std::int64_t l = 0; l < w; ++l) {
          INFO("w " << w << ", lanes [" << lo << ", " << hi << "), lane " << l << ", fill " << fill);
          const T want = l >= lo && l < hi ? p[l - lo] : fill;
          REQUIRE(bits(got[l]) == bits(want));
        }
      }
    }
  }
  for (std::int64_t n = 0; n <= w; ++n) {
    std::vector<T> dst(static_cast<std::size_t>(2 * w), T(-1));
    const B v = B::load_unaligned(src.data() + w);
    cd::partial_store(v, dst.data() + 1, n);
    for (std::int64_t i = 0; i < 2 * w; ++i) {
      INFO("w " << w << ", store of " << n << " lanes, element " << i);
      const T want = i >= 1 && i <= n ? src[static_cast<std::size_t>(w + i - 1)] : T(-1);
      REQUIRE(bits(dst[static_cast<std::size_t>(i)]) == bits(want));
    }
  }
  for (std::int64_t by = 0; by < w; ++by) {
    alignas(64) T got[w];
    cd::rotate_lanes(B::load_unaligned(src.data() + w), by).store_aligned(got);
    for (std::int64_t l = 0; l < w; ++l) {
      INFO("w " << w << ", rotation by " << by << ", lane " << l);
      REQUIRE(bits(got[(l + by) % w]) == bits(src[static_cast<std::size_t>(w + l)]));
    }
  }
}
}  // namespace

TEST_CASE("partial vectors and lane rotations give their definitions' bits", "[oracle][one_pass]") {
  check_lanes<float>();
  check_lanes<double>();
}

namespace {
// one_pass_blocks (a matrix the caches keep, g compiled): u is each block of 4 rows' row
// product, and y an FMA chain over the rows in order per part (the parts fixed by m), the parts
// added in order, then beta y0 added; every thread count gives those bits.
template <class T>
void check_blocks(std::int64_t m, std::int64_t k, std::int64_t lda, std::int64_t offset, int subnormal, int threads) {
  namespace cd = xsym::cpu::detail;
  constexpr std::int64_t R = cd::one_pass_block_rows;
  std::mt19937 rng(static_cast<unsigned>(m * 31 + k * 131 + lda * 7 + offset));
  std::normal_distribution<double> normal;
  kernel_case<T> c{m, k, lda, offset, aligned_vector<T>(static_cast<std::size_t>(m * lda + offset)), {}, {}};
  for (auto& v : c.storage) v = static_cast<T>(normal(rng));
  aligned_vector<T> x(static_cast<std::size_t>(k)), y0(static_cast<std::size_t>(k)), y(static_cast<std::size_t>(k));
  for (auto& v : x) v = static_cast<T>(0.1 * normal(rng));
  for (auto& v : y0) v = static_cast<T>(normal(rng));
  c.u.assign(static_cast<std::size_t>(m), T(0));
  c.g.assign(static_cast<std::size_t>(m), T(0));
  std::vector<int> calls(static_cast<std::size_t>(m), 0);  // each row's g asked for once
  struct ctx_t {
    kernel_case<T>* c;
    std::vector<int>* calls;
    int subnormal;
  } ctx{&c, &calls, subnormal};
  const cd::one_pass_rows_fn fn{[](void* p, std::int64_t r0, std::int64_t n, const void* uv) {
                                  auto& [cs, called, sub] = *static_cast<ctx_t*>(p);
                                  for (std::int64_t r = r0; r < r0 + n; ++r) {
                                    const T ur = static_cast<const T*>(uv)[r - r0];
                                    cs->u[static_cast<std::size_t>(r)] = ur;
                                    ++(*called)[static_cast<std::size_t>(r)];
                                    const bool block = (r / 4) % 5 == 2, one = r % 4 == 1 && (r / 4) % 3 == 0;
                                    cs->g[static_cast<std::size_t>(r)] =
                                        sub == 2 || (sub == 1 && (block || one))
                                            ? std::ldexp(T(r % 7 + 1), std::numeric_limits<T>::min_exponent - 3)
                                            : ur / 100;
                                  }
                                },
                                &ctx};
  const T alpha = T(-0.01), beta = T(0.75);
  cd::one_pass_blocks<T>(c.a(), lda, m, k, x.data(), fn, c.g.data(), alpha, y0.data(), beta, y.data(), threads);
  for (std::int64_t r = 0; r < m; ++r) {
    INFO("row " << r);
    REQUIRE(calls[static_cast<std::size_t>(r)] == 1);
  }
  // u: the row product of blocks of 4 rows, and near a sum in long double.
  for (std::int64_t r0 = 0; r0 < m; r0 += R) {
    T want[R];
    cd::gemv_row_block<R, false>(c.a() + r0 * lda, lda, std::min(R, m - r0), x.data(), want, k, 0, T(1),
                                 static_cast<const T*>(nullptr), T(0));
    for (std::int64_t r = r0; r < std::min(m, r0 + R); ++r) {
      long double exact = 0, size = 0;
      for (std::int64_t e = 0; e < k; ++e) {
        exact += static_cast<long double>(c.a()[r * lda + e]) * x[static_cast<std::size_t>(e)];
        size += std::abs(static_cast<long double>(c.a()[r * lda + e]) * x[static_cast<std::size_t>(e)]);
      }
      INFO("row " << r);
      REQUIRE(c.u[static_cast<std::size_t>(r)] == want[r - r0]);
      REQUIRE(std::abs(static_cast<long double>(c.u[static_cast<std::size_t>(r)]) - exact) <=
              size * 4 * k * std::numeric_limits<T>::epsilon());
    }
  }
  // y: per part, one FMA per row in order; the parts added in order; beta y0 + the sum.
  const std::int64_t blocks = (m + R - 1) / R, parts = cd::one_pass_block_parts(m);
  std::vector<std::int64_t> starts;
  for (std::int64_t p = 0; p <= parts; ++p) starts.push_back(std::min(m, blocks * p / parts * R));
  const std::vector<T> sums = parts_reference(c, alpha, starts);
  for (std::int64_t e = 0; e < k; ++e) {
    INFO("column " << e);
    REQUIRE(y[static_cast<std::size_t>(e)] == cd::add(cd::mul(beta, y0[static_cast<std::size_t>(e)]), sums[static_cast<std::size_t>(e)]));
  }
}
}  // namespace

TEST_CASE("one_pass_blocks: u by blocks of 4 rows, the column product an FMA chain per part whatever the threads",
          "[oracle][one_pass]") {
  for (int subnormal : {0, 1, 2}) {
    for (int left_out : {1, 0}) {
      const xsym::cpu::testing::subnormal_terms_set forced(left_out);
      for (int threads : {1, 2, 3, 4}) {
        // One row, a block short of 4, one part, and 4 parts with the last block short.
        for (std::int64_t m : {1, 3, 4, 9, 67, 261}) {
          INFO(m << " rows, subnormal coefficients " << subnormal << ", " << threads << " threads, terms "
                 << (left_out ? "left out" : "all FMAs"));
          check_blocks<float>(m, 100, 112, 0, subnormal, threads);
          check_blocks<float>(m, 100, 101, 3, subnormal, threads);
          check_blocks<double>(m, 61, 64, 5, subnormal, threads);
          check_blocks<double>(m, 61, 63, 0, subnormal, threads);
        }
      }
    }
  }
}
