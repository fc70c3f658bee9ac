// An element's bits do not depend on where it sits in a span: in a SIMD batch, in the span's
// last elements short of a batch (tail_batch), alone in a one-element call, or at another
// offset. Each kind of kernel that vectorises: a lone op's, a chain with exp and log, a typed
// tree's (through the call loop and into(...)'s short path) and an interpreted Composite from
// run-time fusion. The values: exp and log, whose batch and C library forms differ. And the
// matrix-vector products: an output's bits do not depend on the rows or columns beside it.
#include "expr_util.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include <xtensor/xview.hpp>

using namespace xsym_test;

namespace {

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("every vectorised kernel gives an element the same bits wherever it sits", "[expr][tail]", float,
                   double) {
  using T = TestType;
  auto x = xsym::vector<T>("x");
  const xsym::var<T, 1> e = xsym::exp(x);  // a var: fusion merges it with what reads it, at run time
  std::vector<std::pair<std::string, xsym::var<T, 1>>> cases{
      {"lone sigmoid", xsym::var<T, 1>(1 / (1 + xsym::exp(-x)))},
      {"lone exp", xsym::var<T, 1>(xsym::exp(x))},
      {"typed tree", xsym::var<T, 1>(xsym::log1p(xsym::abs(x)) * x + xsym::exp(-x))},
      {"run-time Composite", e * 0.5 - xsym::log(e + 1)},
  };
  const std::size_t n = 1000 + 7;  // 62 or 125 batches, then 15 or 7 elements
  std::mt19937 rng(21);
  const auto a = random_tensor<T, 1>(rng, {n}, -6.0, 6.0);
  for (const auto& [name, expr] : cases) {
    INFO(name << ", " << type_name<T>());
    auto f = xsym::function("positions", xsym::inputs(x), expr);
    const xt::xtensor<T, 1> whole = f(a);
    xt::xtensor<T, 1> into_whole = xt::zeros<T>({n});
    f.into(into_whole)(a);
    int differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += !same_bits(whole(i), into_whole(i));
    CHECK(differ == 0);
    // Every element alone, and spans of 1 to 40 elements from every 37th position.
    differ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const xt::xtensor<T, 1> one{a(i)};
      differ += !same_bits(f(one)(0), whole(i));
    }
    CHECK(differ == 0);
    differ = 0;
    for (std::size_t start = 0; start < n; start += 37)
      for (std::size_t len = 1; len <= 40 && start + len <= n; ++len) {
        const xt::xtensor<T, 1> part = xt::view(a, xt::range(start, start + len));
        const xt::xtensor<T, 1> got = f(part);
        xt::xtensor<T, 1> got_into = xt::zeros<T>({len});
        f.into(got_into)(part);
        for (std::size_t j = 0; j < len; ++j)
          differ += !same_bits(got(j), whole(start + j)) + !same_bits(got_into(j), whole(start + j));
      }
    CHECK(differ == 0);
  }
}

// dot(X, w): row r of X gives the same bits in a matrix of 1 to 40 rows (in a block of rows or
// among the last ones) and alone at any address. dot(X.T, g) and 0.75 y0 - 0.5 dot(X.T, g): column j gives the same
// bits whatever the number of columns from 2 (in a vector's lanes, in the scalar tail or in the
// elements before the aligned part), where a lane's multiply-add is fused and the tail's was
// a product and a sum.
TEMPLATE_TEST_CASE("a matrix-vector product gives an output the same bits wherever it sits", "[expr][tail][dot]",
                   float, double) {
  using T = TestType;
  auto X = xsym::matrix<T>("X");
  auto v = xsym::vector<T>("v");
  auto y0 = xsym::vector<T>("y0");
  auto rows = xsym::function("rows", xsym::inputs(X, v), xsym::dot(X, v));
  auto cols = xsym::function("cols", xsym::inputs(X, v), xsym::dot(X.T(), v));
  auto acc = xsym::function("acc", xsym::inputs(X, v, y0), y0 * T(0.75) - T(0.5) * xsym::dot(X.T(), v));
  const std::size_t m = 40, k = 100 + 3;
  std::mt19937 rng(5);
  const auto a = random_tensor<T, 2>(rng, {m, k}, -1.0, 1.0);
  const auto x = random_tensor<T, 1>(rng, {k}, -1.0, 1.0);
  const auto g = random_tensor<T, 1>(rng, {m}, -1.0, 1.0);
  const auto z = random_tensor<T, 1>(rng, {k}, -1.0, 1.0);
  INFO(type_name<T>());
  {
    const xt::xtensor<T, 1> whole = rows(a, x);
    int differ = 0;
    for (std::size_t n = 1; n <= m; ++n) {
      const xt::xtensor<T, 2> first = xt::view(a, xt::range(0, n), xt::all());
      const xt::xtensor<T, 1> got = rows(first, x);
      for (std::size_t r = 0; r < n; ++r)
        if (!same_bits(got(r), whole(r)) && differ++ == 0) UNSCOPED_INFO("first: row " << r << " of " << n);
    }
    // Each row alone, at every offset from a 64-byte boundary (another peel before aligned loads).
    xt::xtensor<T, 2> shifted = xt::zeros<T>({std::size_t(1), k + 16});
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t off = 0; off < 16; ++off) {
        xt::view(shifted, 0, xt::range(off, off + k)) = xt::view(a, r, xt::all());
        auto alone = xt::view(shifted, xt::all(), xt::range(off, off + k));
        if (!same_bits(xt::xtensor<T, 1>(rows(alone, x))(0), whole(r)) && differ++ == 0)
          UNSCOPED_INFO("first: row " << r << " alone at offset " << off);
      }
    CHECK(differ == 0);
  }
  {
    const xt::xtensor<T, 1> whole = cols(a, g), whole_acc = acc(a, g, z);
    int differ = 0, differ_acc = 0;
    for (std::size_t n = 2; n <= k; ++n) {  // one column: A = X.T is one row, for the row product
      const xt::xtensor<T, 2> first = xt::view(a, xt::all(), xt::range(0, n));
      const xt::xtensor<T, 1> z_first = xt::view(z, xt::range(0, n));
      const xt::xtensor<T, 1> got = cols(first, g), got_acc = acc(first, g, z_first);
      for (std::size_t j = 0; j < n; ++j) {
        differ += !same_bits(got(j), whole(j));
        differ_acc += !same_bits(got_acc(j), whole_acc(j));
      }
    }
    CHECK(differ == 0);
    CHECK(differ_acc == 0);
  }
}

TEST_CASE("a strided array's copy holds its elements in C order: permuted, stepped and reversed axes, every size",
          "[expr][copy]") {
  // Layouts of a buffer of random bytes: axes in a random order of strides (transposes), some
  // stepped by 2, some reversed; the copy against a walk over every element's offset.
  std::mt19937 rng(77);
  for (int trial = 0; trial < 1500; ++trial) {
    const int rank = 1 + trial % 4;
    xsym::shape_t shape;
    shape.rank = rank;
    for (int d = 0; d < rank; ++d) shape[d] = 1 + static_cast<std::int64_t>(rng() % (rank <= 2 ? 40 : 7));
    int order[4] = {0, 1, 2, 3};
    std::shuffle(order, order + rank, rng);
    std::array<std::int64_t, xsym::max_rank> strides{};
    std::int64_t span = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const int d = order[k];
      const std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 2);
      strides[static_cast<std::size_t>(d)] = span * step;
      span *= shape[d] * step;
    }
    std::int64_t first = 0;  // where element (0, ..., 0) sits once some axes run backwards
    for (int d = 0; d < rank; ++d)
      if (rng() % 3 == 0) {
        auto& st = strides[static_cast<std::size_t>(d)];
        first += st * (shape[d] - 1);
        st = -st;
      }
    for (xsym::dtype dt : {xsym::dtype::bool_, xsym::dtype::int32, xsym::dtype::float64}) {
      const auto es = static_cast<std::int64_t>(xsym::dtype_size(dt));
      std::vector<unsigned char> buffer(static_cast<std::size_t>(span * es));
      for (auto& b : buffer) b = static_cast<unsigned char>(rng());
      const auto view = xsym::ndarray::wrap(dt, shape, strides.data(), buffer.data() + first * es);
      std::vector<unsigned char> want;
      xsym::detail::for_each_offset(shape, strides, [&](std::int64_t off) {
        for (std::int64_t b = 0; b < es; ++b) want.push_back(buffer[static_cast<std::size_t>((first + off) * es + b)]);
      });
      INFO("trial " << trial << ", " << xsym::dtype_name(dt) << ", rank " << rank);
      const xsym::ndarray copy = view.contiguous();
      REQUIRE(copy.is_c_contiguous());
      CHECK(std::memcmp(copy.data(), want.data(), want.size()) == 0);
      xsym::ndarray into = xsym::ndarray::empty(dt, shape);
      view.copy_contiguous_into(into);
      CHECK(std::memcmp(into.data(), want.data(), want.size()) == 0);
    }
  }
}
