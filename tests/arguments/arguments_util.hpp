#ifndef XSYM_TESTS_ARGUMENTS_UTIL_HPP
#define XSYM_TESTS_ARGUMENTS_UTIL_HPP

// Arguments, into() destinations and set_value in every memory layout and kind of xtensor
// expression a user can pass. Each argument position of a few functions (fused
// elementwise, broadcasting, reductions, dot in all its forms, shared-variable updates, a
// logistic-regression step) gets a random layout: offsets, steps (negative too), zero strides,
// transposed and padded memory, rows and columns of bigger arrays; and, call by call, each
// concrete xtensor type (containers of both layouts, xarray, xt::adapt, views, xt::transpose,
// xt::strided_view, broadcast, lazy and converting expressions). Every result must equal the
// same call on contiguous copies and plain double loops written here; inputs must be read
// where they are and never written; destinations written where they are and nowhere else.
// Each function runs in the default mode, FAST_COMPILE, and without fusion and in-place.
//
// XSYM_TEST_SEED=<n> runs another draw (29 by default); a failure prints the seed, the trial,
// the shapes and each argument's layout or kind.
#include "compile/compile_util.hpp"

#include <xtensor/xadapt.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

using namespace xsym_test;

namespace {

using index_t = std::ptrdiff_t;

// ---- seed and random choices ----------------------------------------------------------------

std::uint32_t run_seed() {
  static const std::uint32_t seed = [] {
    const char* s = std::getenv("XSYM_TEST_SEED");
    return s && *s ? static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10)) : std::uint32_t{29};
  }();
  return seed;
}

// Each test case draws from its own stream, so one case replays alone.
std::mt19937 case_rng(std::uint32_t salt) { return std::mt19937(run_seed() * 2654435761u + salt); }

index_t between(std::mt19937& rng, index_t lo, index_t hi) {
  return std::uniform_int_distribution<index_t>(lo, hi)(rng);
}
bool one_in(std::mt19937& rng, int n) { return between(rng, 0, n - 1) == 0; }
template <class V>
V pick(std::mt19937& rng, std::initializer_list<V> options) {
  return *(options.begin() + between(rng, 0, static_cast<index_t>(options.size()) - 1));
}

// Lengths: empty, one, SIMD tails (7, 17, 37), and now and then a few hundred.
std::size_t pick_len(std::mt19937& rng) {
  if (one_in(rng, 5)) return pick<std::size_t>(rng, {64, 257, 300});
  return pick<std::size_t>(rng, {0, 1, 1, 2, 3, 5, 7, 8, 16, 17, 37});
}
// A matrix shape: both sides small, or one side a few hundred long and the other small.
std::array<std::size_t, 2> pick_shape2(std::mt19937& rng) {
  const std::size_t small[] = {0, 1, 2, 3, 5, 7, 17};
  if (one_in(rng, 4)) {
    const std::size_t l = pick<std::size_t>(rng, {37, 130, 300}), s = small[between(rng, 1, 6)];
    return one_in(rng, 2) ? std::array<std::size_t, 2>{l, s} : std::array<std::size_t, 2>{s, l};
  }
  return {pick<std::size_t>(rng, {0, 1, 2, 3, 5, 8, 17, 37}), pick<std::size_t>(rng, {0, 1, 2, 3, 5, 8, 17, 37})};
}

// What a memory cell holds before anything is written: NaN, or an integer no test value takes.
template <class T>
T sentinel() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
  else return static_cast<T>(-1234567);
}

// Test values: integers small enough that no product or sum here overflows int32.
template <class T, std::size_t N>
xt::xtensor<T, N> values_of(std::mt19937& rng, const std::array<std::size_t, N>& shape, double lo = -2, double hi = 2) {
  if constexpr (std::is_integral_v<T>) return random_tensor<T, N>(rng, shape, -9, 9);
  else return random_tensor<T, N>(rng, shape, lo, hi);
}

// The element type a converting argument starts from.
template <class T>
using other_t = std::conditional_t<std::is_same_v<T, double>, float,
                std::conditional_t<std::is_same_v<T, float>, double,
                std::conditional_t<std::is_same_v<T, std::int32_t>, std::int64_t, std::int32_t>>>;
// Whether a container of other_t<T> converts to T without loss (the call then copies it).
template <class T>
constexpr bool has_lossless_source = std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>;

template <class X>
constexpr std::size_t rank_of = std::tuple_size_v<typename X::shape_type>;

// ---- bytes ----------------------------------------------------------------------------------

template <class S>
std::vector<unsigned char> storage_bytes(const S& s) {
  if constexpr (std::is_arithmetic_v<S>) {
    const auto* p = reinterpret_cast<const unsigned char*>(&s);
    return {p, p + sizeof(S)};
  } else {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    return {p, p + s.size() * sizeof(*s.data())};
  }
}

// "" when two storages hold the same bits, else which cells (of `cell` bytes each) differ.
std::string cells_differ(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want,
                         std::size_t cell) {
  if (got.size() != want.size()) return "sizes differ";
  std::string at;
  std::size_t n = 0;
  for (std::size_t i = 0; i < got.size(); i += cell)
    if (std::memcmp(got.data() + i, want.data() + i, cell) != 0 && n++ < 8) at += " " + std::to_string(i / cell);
  return n ? std::to_string(n) + " of " + std::to_string(got.size() / cell) + " cells differ, at" + at : "";
}

// Equal shapes and equal bits (NaN equals NaN).
template <class A, class B>
bool same_bits(const A& a, const B& b) {
  return shape_vector(a.shape()) == shape_vector(b.shape()) && storage_bytes(a) == storage_bytes(b);
}

template <class... X>
bool same_tuple_bits(const std::tuple<X...>& a, const std::tuple<X...>& b) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return (same_bits(std::get<I>(a), std::get<I>(b)) && ...);
  }(std::index_sequence_for<X...>{});
}

template <class S>
std::string shape_text(const S& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

// ---- results, expectations, comparison ------------------------------------------------------

template <class R>
constexpr double rtol_of() {
  if constexpr (std::is_same_v<R, float>) return 2e-5;
  else if constexpr (std::is_same_v<R, double>) return 1e-12;
  else return 0;
}

// One output read as doubles in C order (exact for every value used here).
struct flat {
  std::vector<std::size_t> shape;
  std::vector<double> v;
  double rtol = 0;  // its element type's tolerance, relative to the expectation's scale
};

template <class R>
flat flat_output(const R& r) {
  flat f;
  if constexpr (std::is_arithmetic_v<R>) {
    f.v = {static_cast<double>(r)};
    f.rtol = rtol_of<R>();
  } else {
    f.shape = shape_vector(r.shape());
    for (const auto& x : r) f.v.push_back(static_cast<double>(x));
    f.rtol = rtol_of<typename R::value_type>();
  }
  return f;
}
template <class... R>
std::vector<flat> flat_outputs(const std::tuple<R...>& t) {
  return std::apply([](const auto&... r) { return std::vector<flat>{flat_output(r)...}; }, t);
}

// One output as plain double loops compute it; scale bounds the rounding (the sum of the
// magnitudes of the terms), infinite where any answer is right (a comparison at a tie).
struct expect {
  std::vector<std::size_t> shape;
  std::vector<double> v, scale;
  void add(double value, double s) {
    v.push_back(value);
    scale.push_back(s);
  }
};

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

std::string element_text(std::size_t i, double got, double want) {
  std::ostringstream os;
  os.precision(17);
  os << " [" << i << "] " << got << " vs " << want << ";";
  return os.str();
}

// "" when got has the expected shape and every element is within rtol * scale of it.
std::string vs_oracle(const flat& got, const expect& want) {
  if (got.shape != want.shape) return "shape " + shape_text(got.shape) + ", expected " + shape_text(want.shape);
  std::string bad;
  std::size_t n = 0;
  for (std::size_t i = 0; i < want.v.size(); ++i) {
    if (std::isinf(want.scale[i]) || same_value(got.v[i], want.v[i]) ||
        std::abs(got.v[i] - want.v[i]) <= got.rtol * want.scale[i])
      continue;
    if (n++ < 4) bad += element_text(i, got.v[i], want.v[i]);
  }
  return n ? std::to_string(n) + " of " + std::to_string(want.v.size()) + " elements off:" + bad : "";
}

// "" when got equals the contiguous call's output: bit for bit, or (exact false: a product or
// reduction may sum in another order on other strides) within the oracle's rounding budget.
std::string vs_contiguous(const flat& got, const flat& ref, const expect& want, bool exact) {
  if (got.shape != ref.shape) return "shape " + shape_text(got.shape) + ", contiguous call " + shape_text(ref.shape);
  std::string bad;
  std::size_t n = 0;
  for (std::size_t i = 0; i < ref.v.size(); ++i) {
    if (same_value(got.v[i], ref.v[i]) || (i < want.scale.size() && std::isinf(want.scale[i]))) continue;
    if (!exact && i < want.scale.size() && std::abs(got.v[i] - ref.v[i]) <= 2 * got.rtol * want.scale[i]) continue;
    if (n++ < 4) bad += element_text(i, got.v[i], ref.v[i]);
  }
  return n ? std::to_string(n) + " of " + std::to_string(ref.v.size()) + " elements differ:" + bad : "";
}

// Lines that say what each object of the call under test is, kept by the nested builders of
// arguments and destinations below. Plain strings and the few non-template reporters here:
// Catch's macros in every builder instantiation would cost minutes of compile time.
std::vector<std::string>& context() {
  static std::vector<std::string> lines;
  return lines;
}
class context_lines {
 public:
  explicit context_lines(std::vector<std::string> lines) : m_count(lines.size()) {
    for (auto& l : lines) context().push_back(std::move(l));
  }
  ~context_lines() { context().resize(context().size() - m_count); }
  context_lines(const context_lines&) = delete;
  context_lines& operator=(const context_lines&) = delete;

 private:
  std::size_t m_count;
};
std::string context_text() {
  std::string s;
  for (const auto& l : context()) s += l + "\n";
  return s;
}
void expect_empty(const std::string& problem, const std::string& what) {
  if (!problem.empty()) FAIL_CHECK(context_text() << what << ": " << problem);
}
void require_true(bool ok, const std::string& what) {
  if (!ok) FAIL(context_text() << what);
}
inline void expect_true(bool ok, const std::string& what) {
  if (!ok) FAIL_CHECK(context_text() << what);
}
void report_exception(const std::exception& e) { FAIL_CHECK(context_text() << "threw: " << e.what()); }

void check_outputs(const std::vector<flat>& got, const std::vector<flat>& ref, const std::vector<expect>& want,
                   const std::vector<bool>& exact) {
  INFO(context_text());
  REQUIRE(got.size() == want.size());
  REQUIRE(ref.size() == want.size());
  for (std::size_t o = 0; o < want.size(); ++o) {
    INFO("output " << o);
    CHECK(vs_oracle(ref[o], want[o]) == "");  // the contiguous call itself
    CHECK(vs_oracle(got[o], want[o]) == "");
    CHECK(vs_contiguous(got[o], ref[o], want[o], exact[o]) == "");
  }
}

// Runs fn; an exception fails the check (with the context in scope) instead of the test case.
template <class Fn>
bool attempt(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    report_exception(e);
    return false;
  }
}

template <std::size_t N, class F>
void for_each_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f.template operator()<I>(), ...);
  }(std::make_index_sequence<N>{});
}

// ---- one type for every strided layout ------------------------------------------------------

// A start, stop and step that take n elements of an axis of length extent with xt::range
// (stop never negative: xt::range reads a negative stop from the end).
struct stepped {
  index_t extent, first, stop, step;
};
stepped random_stepped(std::mt19937& rng, index_t n, std::initializer_list<index_t> steps) {
  stepped s{};
  s.step = pick(rng, steps);
  const index_t lead = std::max<index_t>(pick<index_t>(rng, {0, 0, 1, 2, 5}), s.step < 0 ? 1 : 0);
  const index_t span = n ? std::abs(s.step) * (n - 1) + 1 : 0;
  s.extent = lead + span + pick<index_t>(rng, {0, 0, 1, 3});
  if (n == 0) s.first = s.stop = lead;
  else if (s.step > 0) s.first = lead, s.stop = lead + span;
  else s.first = lead + span - 1, s.stop = lead - 1;
  return s;
}

// A logical array in a buffer at a random layout, read through xt::strided_view of an
// xt::adapt over the buffer. The adapted base array has the logical axes in a random memory
// order (row-major, column-major, transposed), padded, after a pointer offset, and maybe one
// more axis that the view fixes (a row or column of a bigger array); the view takes each
// logical axis from a start with a step (negative too), or, for an input, reads one element
// along it (a zero stride, as a broadcast array in memory). One C++ type for every layout, so
// a function is instantiated once for all of them.
template <class T>
class laid_out {
 public:
  using shape_type = std::vector<std::size_t>;
  using strides_type = std::vector<index_t>;
  using adaptor_type = decltype(xt::adapt(std::declval<T*>(), std::size_t{}, xt::no_ownership(),
                                          std::declval<const shape_type&>(), std::declval<const strides_type&>()));
  using view_type =
      decltype(xt::strided_view(std::declval<adaptor_type&>(), std::declval<xt::xstrided_slice_vector>()));

  laid_out(const shape_type& shape, std::mt19937& rng, bool zero_strides) {
    const std::size_t n = shape.size();
    const std::size_t m = n + (n == 0 || one_in(rng, 3) ? 1 : 0);
    const std::size_t fixed_axis = m > n ? static_cast<std::size_t>(between(rng, 0, static_cast<index_t>(n))) : m;
    shape_type extent(m);
    std::vector<index_t> first(m, 0), step(m, 1), stop(m, 0);
    std::vector<bool> zero(m, false);
    index_t fixed = 0;
    for (std::size_t a = 0, d = 0; a < m; ++a) {
      if (a == fixed_axis) {
        extent[a] = pick<std::size_t>(rng, {1, 2, 3});
        fixed = between(rng, 0, static_cast<index_t>(extent[a]) - 1);
        continue;
      }
      const auto s = static_cast<index_t>(shape[d++]);
      if (zero_strides && s > 1 && one_in(rng, 8)) {
        zero[a] = true;
        extent[a] = static_cast<std::size_t>(s);
        continue;
      }
      const stepped r = random_stepped(rng, s, {1, 1, 1, 2, 3, -1, -2});
      extent[a] = static_cast<std::size_t>(r.extent);
      first[a] = r.first, stop[a] = r.stop, step[a] = r.step;
    }
    // Memory order: a random permutation of the base axes, innermost last, some rows padded.
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    strides_type strides(m, 0);
    index_t next = 1;
    for (std::size_t q = m; q-- > 0;) {
      const std::size_t a = order[q];
      if (zero[a]) continue;
      strides[a] = next;
      next *= static_cast<index_t>(extent[a]) + (one_in(rng, 3) ? pick<index_t>(rng, {1, 2}) : 0);
    }
    const index_t offset = pick<index_t>(rng, {0, 1, 3, 8});
    std::size_t count = 1;
    index_t last = offset;
    for (std::size_t a = 0; a < m; ++a) {
      count *= extent[a];
      last += (static_cast<index_t>(extent[a]) - 1) * strides[a];
    }
    buffer.assign(static_cast<std::size_t>(count ? last + 1 : offset) + pick<std::size_t>(rng, {0, 2}), sentinel<T>());
    // Where each logical element lives (C order), by this test's own arithmetic.
    std::size_t total = 1;
    for (std::size_t d = 0; d < n; ++d) total *= shape[d];
    for (std::size_t flat_index = 0; flat_index < total; ++flat_index) {
      index_t p = offset;
      std::size_t rest = flat_index;
      for (std::size_t a = m, d = n; a-- > 0;) {
        if (a == fixed_axis) {
          p += fixed * strides[a];
          continue;
        }
        --d;
        const auto i = static_cast<index_t>(rest % shape[d]);
        rest /= shape[d];
        p += zero[a] ? 0 : (first[a] + step[a] * i) * strides[a];
      }
      pos.push_back(static_cast<std::size_t>(p));
    }
    base.emplace(xt::adapt(buffer.data() + offset, count, xt::no_ownership(), extent, strides));
    xt::xstrided_slice_vector slices;
    std::ostringstream os;
    os << "strided_view(adapt(buffer + " << offset << ", shape " << shape_text(extent) << ", strides "
       << shape_text(strides) << "), {";
    for (std::size_t a = 0; a < m; ++a) {
      os << (a ? ", " : "");
      if (a == fixed_axis) {
        slices.push_back(fixed);
        os << fixed;
      } else if (zero[a]) {
        slices.push_back(xt::all());
        os << "all (stride 0)";
      } else {
        slices.push_back(xt::range(first[a], stop[a], step[a]));
        os << "range(" << first[a] << ", " << stop[a] << ", " << step[a] << ")";
      }
    }
    os << "})";
    what = os.str();
    view.emplace(xt::strided_view(*base, slices));
    snapshot = buffer;
  }
  laid_out(const laid_out&) = delete;
  laid_out& operator=(const laid_out&) = delete;

  // Writes the logical values into the buffer; along a zero-stride axis values take the
  // element that is there (they must repeat).
  template <std::size_t N>
  void hold(xt::xtensor<T, N>& values) {
    std::vector<char> set(buffer.size(), 0);
    for (std::size_t i = 0; i < pos.size(); ++i) {
      if (set[pos[i]]) values.data()[i] = buffer[pos[i]];
      else buffer[pos[i]] = values.data()[i], set[pos[i]] = 1;
    }
    const xt::xtensor<T, N> back = *view;  // xtensor reads what this test wrote
    INFO(what);
    REQUIRE(same_bits(back, values));
    snapshot = buffer;
  }

  // The buffer as it must be once a destination received want (sentinels everywhere else).
  template <class W>
  std::vector<T> written(const W& want) const {
    std::vector<T> b = snapshot;
    if constexpr (std::is_arithmetic_v<W>) b[pos.at(0)] = want;
    else
      for (std::size_t i = 0; i < pos.size(); ++i) b[pos[i]] = want.data()[i];
    return b;
  }

  bool untouched() const { return storage_bytes(buffer) == storage_bytes(snapshot); }
  // Whether every element has a cell of its own (no zero stride).
  bool distinct() const {
    std::vector<std::size_t> p = pos;
    std::sort(p.begin(), p.end());
    return std::adjacent_find(p.begin(), p.end()) == p.end();
  }

  std::vector<T> buffer, snapshot;
  std::vector<std::size_t> pos;
  std::optional<adaptor_type> base;
  std::optional<view_type> view;
  std::string what;
};

template <class T>
using laid_ptr = std::unique_ptr<laid_out<T>>;

// Every argument in its own random layout (vals: the values, constrained where a zero stride
// repeats them).
template <class X>
laid_ptr<typename X::value_type> place_argument(X& v, std::mt19937& rng) {
  auto p = std::make_unique<laid_out<typename X::value_type>>(shape_vector(v.shape()), rng, true);
  p->hold(v);
  return p;
}
template <class... X>
std::tuple<laid_ptr<typename X::value_type>...> place_arguments(std::tuple<X...>& vals, std::mt19937& rng) {
  return std::apply(
      [&](auto&... v) { return std::tuple<laid_ptr<typename X::value_type>...>{place_argument(v, rng)...}; }, vals);
}

template <class W>
struct element_of_s {
  using type = typename W::value_type;
};
template <class W>
  requires std::is_arithmetic_v<W>
struct element_of_s<W> {
  using type = W;
};
template <class W>
using element_of = typename element_of_s<W>::type;

template <class W>
std::vector<std::size_t> shape_of(const W& w) {
  if constexpr (std::is_arithmetic_v<W>) return {};
  else return shape_vector(w.shape());
}

// One strided destination per output (no zero strides: each element has its own cell).
template <class... W>
std::tuple<laid_ptr<element_of<W>>...> place_destinations(const std::tuple<W...>& want, std::mt19937& rng) {
  return std::apply(
      [&](const auto&... w) {
        return std::tuple<laid_ptr<element_of<W>>...>{
            std::make_unique<laid_out<element_of<W>>>(shape_of(w), rng, false)...};
      },
      want);
}

template <class Tuple>
std::string describe(const Tuple& placed) {
  std::string s;
  std::apply(
      [&](const auto&... p) {
        std::size_t i = 0;
        ((s += "  " + std::to_string(i++) + ": " + p->what + "\n"), ...);
      },
      placed);
  return s;
}

template <class Tuple>
void check_untouched(const Tuple& placed, const char* what) {
  std::apply(
      [&](const auto&... p) {
        std::size_t i = 0;
        (([&] {
           INFO(what << " " << i << " was written: " << p->what);
           CHECK(p->untouched());
           ++i;
         }()),
         ...);
      },
      placed);
}

// run(arguments...), each argument the strided view placed for it.
template <class Run, class Placed>
decltype(auto) call_placed(const Run& run, const Placed& placed) {
  return std::apply([&](const auto&... p) -> decltype(auto) { return run(std::as_const(*p->view)...); }, placed);
}
template <class F, class Dests>
auto into_all(const F& f, Dests& dests) {
  return std::apply([&](auto&... d) { return f.into(*d->view...); }, dests);
}

// f.into(first, other destinations...): the first destination given apart (an argument's view).
template <class F, class First, class Dests>
auto into_first(const F& f, First& first, Dests& dests) {
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    return f.into(first, *std::get<J + 1>(dests)->view...);
  }(std::make_index_sequence<std::tuple_size_v<Dests> - 1>{});
}

template <class Dests, class... W>
void check_destinations(const Dests& dests, const std::tuple<W...>& want) {
  for_each_index<sizeof...(W)>([&]<std::size_t J>() {
    const auto& d = std::get<J>(dests);
    if (!d) return;
    INFO("output " << J << " into " << d->what);
    const auto cells =
        cells_differ(storage_bytes(d->buffer), storage_bytes(d->written(std::get<J>(want))), sizeof(d->buffer[0]));
    CHECK(cells == "");
  });
}

// ---- every concrete kind of argument ------------------------------------------------------

template <class T, std::size_t N>
using sh = std::array<std::size_t, N>;

template <class C, class S>
C filled(const S& shape) {
  C c = C::from_shape(shape);
  c.fill(sentinel<typename C::value_type>());
  return c;
}

const auto same_object = [](auto& s) -> auto& { return s; };

// A kind of object: what owns the memory, and how the expression a call gets is made from it.
template <class S, class Make>
struct recipe {
  S storage;
  Make make;
  std::string name;
};
template <class S, class Make>
recipe<S, Make> make_recipe(S storage, Make make, std::string name) {
  return {std::move(storage), std::move(make), std::move(name)};
}

// Writes w (a contiguous container, or a number) into e element by element, through e(i, j).
// Not e = w: in xtensor 0.24.3 assigning into xt::strided_view(e, slices) goes through a
// rank-4 temporary and corrupts memory. Element access also compiles far less code per
// kind of view than xtensor's assignment.
template <class E, class W>
void store(E& e, const W& w) {
  if constexpr (std::is_arithmetic_v<W>) {
    if constexpr (std::is_arithmetic_v<E>) e = w;
    else e() = w;
  } else if constexpr (rank_of<W> == 1) {
    for (std::size_t i = 0; i < w.size(); ++i) e(i) = w.data()[i];
  } else {
    const std::size_t r = w.shape()[0], c = w.shape()[1];
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) e(i, j) = w.data()[i * c + j];
  }
}

// Whether e reads exactly v's bits, element by element (v: a contiguous container).
template <class E, class T, std::size_t N>
bool reads_as(const E& e, const xt::xtensor<T, N>& v) {
  if (shape_vector(e.shape()) != shape_vector(v.shape())) return false;
  const auto same = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; };
  if constexpr (N == 1) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!same(static_cast<T>(e(i)), v.data()[i])) return false;
  } else {
    const std::size_t r = v.shape()[0], c = v.shape()[1];
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j)
        if (!same(static_cast<T>(e(i, j)), v.data()[i * c + j])) return false;
  }
  return true;
}

// Kinds of xtensor object, by rank. The first ones own memory (a container, a std::vector, a
// number) and hand the call an expression over it (storage kinds: arguments and
// destinations); the rest are expressions without memory of their own (arguments only).
enum kind1 { k1_xtensor, k1_xarray, k1_adapt, k1_range, k1_stepped, k1_row, k1_column, k1_strided, k1_nested,
             k1_transpose, k1_storage, k1_broadcast = k1_storage, k1_lazy, k1_cast, k1_lossless, k1_count };
enum kind2 { k2_xtensor, k2_column_major, k2_xarray, k2_xarray_column_major, k2_adapt, k2_adapt_strides, k2_rows,
             k2_block, k2_stepped, k2_transpose, k2_transpose_block, k2_strided, k2_strided_explicit, k2_slice3,
             k2_nested, k2_column_major_block, k2_storage, k2_broadcast = k2_storage, k2_lazy, k2_cast, k2_lossless,
             k2_count };
enum kind0 { k0_number, k0_xtensor, k0_element, k0_count };

// A call takes one kind per position: position p gets kind k + 7p of its rank, so that one
// index k fixes every argument's C++ type (a function is compiled once per k, not once per
// combination) while neighbouring positions still differ.
constexpr int kind_rotations = k2_count;
constexpr int rotation_step = 7;

template <class T, std::size_t N, bool SameType>
constexpr int input_kind(int k) {
  int r = N == 1 ? k % k1_count : k % k2_count;
  const int lossless = N == 1 ? int(k1_lossless) : int(k2_lossless);
  if (r == lossless && (SameType || !has_lossless_source<T>)) r = N == 1 ? int(k1_xarray) : int(k2_xarray_column_major);
  return r;
}
template <std::size_t N>
constexpr int destination_kind(int k) {
  return N == 0 ? k % k0_count : N == 1 ? k % k1_storage : k % k2_storage;
}

// Calls f.template operator()<K>() for the K equal to k (K < Count).
template <int Count, class F>
void dispatch(int k, F&& f) {
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((k == K ? (f.template operator()<K>(), 0) : 0), ...);
  }(std::make_integer_sequence<int, Count>{});
}

template <class T, int K>
auto storage_kind1(std::size_t n, [[maybe_unused]] std::mt19937& rng) {
  [[maybe_unused]] const auto len = static_cast<index_t>(n);
  [[maybe_unused]] const auto txt = [](index_t v) { return std::to_string(v); };
  if constexpr (K == k1_xtensor) {
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{n});
    return make_recipe(std::move(s), same_object, "xt::xtensor");
  } else if constexpr (K == k1_xarray) {
    auto s = filled<xt::xarray<T>>(sh<T, 1>{n});
    return make_recipe(std::move(s), same_object, "xt::xarray");
  } else if constexpr (K == k1_adapt) {
    const index_t off = pick<index_t>(rng, {1, 3, 5});
    std::vector<T> s(n + static_cast<std::size_t>(off) + 2, sentinel<T>());
    return make_recipe(
        std::move(s), [=](auto& b) { return xt::adapt(b.data() + off, n, xt::no_ownership(), sh<T, 1>{n}); },
        "xt::adapt(pointer + " + txt(off) + ")");
  } else if constexpr (K == k1_range) {
    const index_t a = pick<index_t>(rng, {0, 1, 4}), b = pick<index_t>(rng, {0, 2});
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{n + static_cast<std::size_t>(a + b)});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(a, a + len)); },
        "view(range(" + txt(a) + ", " + txt(a + len) + "))");
  } else if constexpr (K == k1_stepped) {
    const stepped r = random_stepped(rng, len, {1, 2, 3, -1, -2});
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{static_cast<std::size_t>(r.extent)});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(r.first, r.stop, r.step)); },
        "view(range(" + txt(r.first) + ", " + txt(r.stop) + ", " + txt(r.step) + "))");
  } else if constexpr (K == k1_row) {
    const index_t i = pick<index_t>(rng, {0, 1, 2});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{static_cast<std::size_t>(i + 1) + pick<std::size_t>(rng, {0, 2}), n});
    return make_recipe(
        std::move(s), [=](auto& m) { return xt::view(m, i, xt::all()); }, "row view(M, " + txt(i) + ", all())");
  } else if constexpr (K == k1_column) {
    const index_t j = pick<index_t>(rng, {0, 1, 3});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{n, static_cast<std::size_t>(j + 1) + pick<std::size_t>(rng, {0, 2})});
    return make_recipe(
        std::move(s), [=](auto& m) { return xt::view(m, xt::all(), j); }, "column view(M, all(), " + txt(j) + ")");
  } else if constexpr (K == k1_strided) {
    const index_t st = pick<index_t>(rng, {1, 2, 3}), a = pick<index_t>(rng, {0, 1, 3});
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{static_cast<std::size_t>(a + st * len + 1)});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::strided_view(x, {xt::range(a, a + st * len, st)}); },
        "strided_view({range(" + txt(a) + ", _, " + txt(st) + ")})");
  } else if constexpr (K == k1_nested) {
    const index_t a = pick<index_t>(rng, {1, 2, 5}), b = pick<index_t>(rng, {0, 1, 3}), c = between(rng, 0, b);
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{static_cast<std::size_t>(a + len + b)});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(xt::view(x, xt::range(a, a + len + b)), xt::range(c, c + len)); },
        "view(view(range(" + txt(a) + ", _)), range(" + txt(c) + ", _))");
  } else {
    static_assert(K == k1_transpose);
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{n});
    return make_recipe(
        std::move(s), [](auto& x) { return xt::transpose(x); }, "xt::transpose(vector)");
  }
}

template <class T, int K>
auto storage_kind2(std::size_t r, std::size_t c, [[maybe_unused]] std::mt19937& rng) {
  [[maybe_unused]] const auto rows = static_cast<index_t>(r), cols = static_cast<index_t>(c);
  [[maybe_unused]] const auto pad = [&] { return pick<index_t>(rng, {0, 1, 3}); };
  [[maybe_unused]] const auto z = [](index_t v) { return static_cast<std::size_t>(v); };
  [[maybe_unused]] const auto txt = [](index_t v) { return std::to_string(v); };
  if constexpr (K == k2_xtensor) {
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{r, c});
    return make_recipe(std::move(s), same_object, "xt::xtensor");
  } else if constexpr (K == k2_column_major) {
    auto s = filled<xt::xtensor<T, 2, xt::layout_type::column_major>>(sh<T, 2>{r, c});
    return make_recipe(std::move(s), same_object, "xt::xtensor column_major");
  } else if constexpr (K == k2_xarray) {
    auto s = filled<xt::xarray<T>>(sh<T, 2>{r, c});
    return make_recipe(std::move(s), same_object, "xt::xarray");
  } else if constexpr (K == k2_xarray_column_major) {
    auto s = filled<xt::xarray<T, xt::layout_type::column_major>>(sh<T, 2>{r, c});
    return make_recipe(std::move(s), same_object, "xt::xarray column_major");
  } else if constexpr (K == k2_adapt) {
    const index_t off = pick<index_t>(rng, {1, 3, 5});
    std::vector<T> s(r * c + z(off) + 2, sentinel<T>());
    return make_recipe(
        std::move(s),
        [=](auto& b) {
          return xt::adapt(b.data() + off, r * c, xt::no_ownership(), sh<T, 2>{r, c});
        },
        "xt::adapt(pointer + " + txt(off) + ")");
  } else if constexpr (K == k2_adapt_strides) {
    // Padded rows (or, column-major, padded columns): a leading dimension above the length.
    const bool cm = one_in(rng, 2);
    const index_t off = pick<index_t>(rng, {0, 2}), ld = (cm ? rows : cols) + pick<index_t>(rng, {0, 1, 4});
    const std::array<index_t, 2> st = cm ? std::array<index_t, 2>{1, ld} : std::array<index_t, 2>{ld, 1};
    std::vector<T> s(z(off + ld * (cm ? cols : rows)) + 2, sentinel<T>());
    return make_recipe(
        std::move(s),
        [=](auto& b) {
          return xt::adapt(b.data() + off, r * c, xt::no_ownership(), sh<T, 2>{r, c}, st);
        },
        "xt::adapt(pointer + " + txt(off) + ", strides " + shape_text(st) + ")");
  } else if constexpr (K == k2_rows) {
    const index_t a = pick<index_t>(rng, {0, 1, 3});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(a + rows + pad()), c});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(a, a + rows)); },
        "view(M, range(" + txt(a) + ", " + txt(a + rows) + ")) (a minibatch)");
  } else if constexpr (K == k2_block) {
    const index_t a = pick<index_t>(rng, {0, 1, 2}), b = pick<index_t>(rng, {0, 1, 3});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(a + rows + pad()), z(b + cols + pad())});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(a, a + rows), xt::range(b, b + cols)); },
        "view(M, range(" + txt(a) + ", _), range(" + txt(b) + ", _)) (a block)");
  } else if constexpr (K == k2_stepped) {
    const stepped p = random_stepped(rng, rows, {1, 2, -1, -2}), q = random_stepped(rng, cols, {1, 2, 3, -1});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(p.extent), z(q.extent)});
    return make_recipe(
        std::move(s),
        [=](auto& x) { return xt::view(x, xt::range(p.first, p.stop, p.step), xt::range(q.first, q.stop, q.step)); },
        "view(M, range(" + txt(p.first) + ", " + txt(p.stop) + ", " + txt(p.step) + "), range(" + txt(q.first) + ", " +
            txt(q.stop) + ", " + txt(q.step) + "))");
  } else if constexpr (K == k2_transpose) {
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{c, r});
    return make_recipe(
        std::move(s), [](auto& x) { return xt::transpose(x); }, "xt::transpose(M)");
  } else if constexpr (K == k2_transpose_block) {
    const index_t a = pick<index_t>(rng, {0, 1, 2}), b = pick<index_t>(rng, {1, 3});
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(a + cols + pad()), z(b + rows + pad())});
    return make_recipe(
        std::move(s),
        [=](auto& x) { return xt::transpose(xt::view(x, xt::range(a, a + cols), xt::range(b, b + rows))); },
        "xt::transpose(view(M, range(" + txt(a) + ", _), range(" + txt(b) + ", _)))");
  } else if constexpr (K == k2_strided) {
    const index_t s0 = pick<index_t>(rng, {1, 2}), s1 = pick<index_t>(rng, {1, 2, 3}), a = pad(), b = pad();
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(a + s0 * rows + 1), z(b + s1 * cols + 1)});
    return make_recipe(
        std::move(s),
        [=](auto& x) {
          return xt::strided_view(x, {xt::range(a, a + s0 * rows, s0), xt::range(b, b + s1 * cols, s1)});
        },
        "strided_view(M, {range(" + txt(a) + ", _, " + txt(s0) + "), range(" + txt(b) + ", _, " + txt(s1) + ")})");
  } else if constexpr (K == k2_strided_explicit) {
    // xt::strided_view(e, shape, strides, offset) over a flat buffer, rows maybe reversed.
    const bool cm = one_in(rng, 2), reversed = one_in(rng, 2);
    const index_t ld = (cm ? rows : cols) + pad(), base = pad();
    std::array<index_t, 2> st = cm ? std::array<index_t, 2>{1, ld} : std::array<index_t, 2>{ld, 1};
    const index_t span = rows && cols ? (rows - 1) * st[0] + (cols - 1) * st[1] + 1 : 0;
    index_t off = base;
    if (reversed && rows > 0) {
      off += (rows - 1) * st[0];
      st[0] = -st[0];
    }
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{z(base + span + 2)});
    return make_recipe(
        std::move(s),
        [=](auto& x) {
          return xt::strided_view(x, sh<T, 2>{r, c}, std::array<index_t, 2>(st), z(off), xt::layout_type::dynamic);
        },
        "strided_view(flat, shape, strides " + shape_text(st) + ", offset " + txt(off) + ")");
  } else if constexpr (K == k2_slice3) {
    const index_t a = pick<index_t>(rng, {0, 2}), i = pick<index_t>(rng, {0, 1}), b = pick<index_t>(rng, {0, 1});
    auto s = filled<xt::xtensor<T, 3>>(sh<T, 3>{z(a + rows + pad()), z(i + 1 + pad()), z(b + cols + pad())});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(a, a + rows), i, xt::range(b, b + cols)); },
        "view(T3, range(" + txt(a) + ", _), " + txt(i) + ", range(" + txt(b) + ", _))");
  } else if constexpr (K == k2_nested) {
    // Offsets on both levels: rows e.. of the rows a.. of M.
    const index_t a = pick<index_t>(rng, {1, 2}), b = pick<index_t>(rng, {1, 3}), extra = pad(),
                  e = between(rng, 0, extra);
    auto s = filled<xt::xtensor<T, 2>>(sh<T, 2>{z(a + rows + extra), z(b + cols + pad())});
    return make_recipe(
        std::move(s),
        [=](auto& x) {
          return xt::view(xt::view(x, xt::range(a, a + rows + extra), xt::all()), xt::range(e, e + rows),
                          xt::range(b, b + cols));
        },
        "view(view(M, range(" + txt(a) + ", _), all()), range(" + txt(e) + ", _), range(" + txt(b) + ", _))");
  } else {
    static_assert(K == k2_column_major_block);
    const index_t a = pick<index_t>(rng, {0, 1, 2}), b = pick<index_t>(rng, {0, 1, 3});
    auto s =
        filled<xt::xtensor<T, 2, xt::layout_type::column_major>>(sh<T, 2>{z(a + rows + pad()), z(b + cols + pad())});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, xt::range(a, a + rows), xt::range(b, b + cols)); },
        "view(column-major M, range(" + txt(a) + ", _), range(" + txt(b) + ", _))");
  }
}

template <class T, int K>
auto storage_kind0([[maybe_unused]] std::mt19937& rng) {
  if constexpr (K == k0_number) {
    T s = sentinel<T>();
    return make_recipe(std::move(s), same_object, "a number");
  } else if constexpr (K == k0_xtensor) {
    auto s = filled<xt::xtensor<T, 0>>(sh<T, 0>{});
    return make_recipe(std::move(s), same_object, "xt::xtensor<T, 0>");
  } else {
    static_assert(K == k0_element);
    const index_t i = pick<index_t>(rng, {0, 2, 5});
    auto s = filled<xt::xtensor<T, 1>>(sh<T, 1>{7});
    return make_recipe(
        std::move(s), [=](auto& x) { return xt::view(x, i); }, "view(vector, " + std::to_string(i) + ")");
  }
}

// The values an input kind can hold: a broadcast repeats its first row (or element), a
// converting kind holds what survives the conversion.
template <class T, std::size_t N>
void constrain(int kind, xt::xtensor<T, N>& v) {
  const int broadcast = N == 1 ? int(k1_broadcast) : int(k2_broadcast), cast = N == 1 ? int(k1_cast) : int(k2_cast);
  const int lossless = N == 1 ? int(k1_lossless) : int(k2_lossless);
  if (kind == broadcast && v.size()) {
    const std::size_t inner = N == 1 ? 1 : v.shape()[1];
    for (std::size_t i = inner; i < v.size(); ++i) v.data()[i] = v.data()[i % inner];
  } else if (kind == cast || kind == lossless) {
    for (auto& x : v) x = static_cast<T>(static_cast<other_t<T>>(x));
  }
}

// Hands out an input of kind Kind holding v, or a destination of kind Kind for want: the
// object that owns the memory, and the expression over it that the call gets. One function
// per element type, rank and kind, shared by every function, position and rotation (noinline:
// inlined into every call site, they made the test take minutes more to compile).
template <class R>
struct held {
  explicit held(R&& from) : r(std::move(from)), expr(r.make(r.storage)) {}
  held(const held&) = delete;
  held& operator=(const held&) = delete;
  [[gnu::noinline]] ~held() {}
  R r;
  decltype(std::declval<R&>().make(std::declval<R&>().storage)) expr;
  std::vector<unsigned char> bytes;  // the storage as it must stay (argument) or end (destination)
};

template <class T, std::size_t N, int Kind>
auto input_recipe(const xt::xtensor<T, N>& v, std::mt19937& rng) {
  constexpr int storage = N == 1 ? int(k1_storage) : int(k2_storage);
  using U = other_t<T>;
  if constexpr (Kind < storage) {
    if constexpr (N == 1) return storage_kind1<T, Kind>(v.shape()[0], rng);
    else return storage_kind2<T, Kind>(v.shape()[0], v.shape()[1], rng);
  } else if constexpr (Kind == storage && N == 1) {
    const auto shape = v.shape();
    return make_recipe(
        xt::xtensor<T, 1>{v.size() ? v(0) : T(1)}, [shape](auto& s) { return xt::broadcast(s, shape); },
        "xt::broadcast(1 element)");
  } else if constexpr (Kind == storage) {
    const auto shape = v.shape();
    xt::xtensor<T, 1> row = xt::zeros<T>(sh<T, 1>{shape[1]});
    if (shape[0]) row = xt::view(v, 0, xt::all());
    return make_recipe(
        std::move(row), [shape](auto& s) { return xt::broadcast(s, shape); }, "xt::broadcast(row)");
  } else if constexpr (Kind == storage + 1) {
    return make_recipe(
        xt::xtensor<T, N>(v), [](auto& s) { return s + T(0); }, "lazy a + 0");
  } else if constexpr (Kind == storage + 2) {
    return make_recipe(
        xt::xtensor<U, N>(xt::cast<U>(v)), [](auto& s) { return xt::cast<T>(s); },
        std::string("xt::cast from ") + type_name<U>());
  } else {
    static_assert(Kind == storage + 3 && has_lossless_source<T>);
    return make_recipe(xt::xtensor<U, N>(xt::cast<U>(v)), same_object,
                       std::string("an xt::xtensor of ") + type_name<U>() + " (converted losslessly)");
  }
}

template <class T, std::size_t N, int Kind>
[[gnu::noinline]] auto make_input(const xt::xtensor<T, N>& v, std::mt19937& rng) {
  auto h = std::make_unique<held<decltype(input_recipe<T, N, Kind>(v, rng))>>(input_recipe<T, N, Kind>(v, rng));
  if constexpr (Kind < (N == 1 ? int(k1_storage) : int(k2_storage))) store(h->expr, v);
  require_true(reads_as(h->expr, v), h->r.name + " does not hold its values (this test's construction)");
  h->bytes = storage_bytes(h->r.storage);
  return h;
}

template <class W>
constexpr std::size_t rank_of_output() {
  if constexpr (std::is_arithmetic_v<W>) return 0;
  else return rank_of<W>;
}

template <class W, int Kind>
auto destination_recipe(const W& want, std::mt19937& rng) {
  using T = element_of<W>;
  constexpr std::size_t N = rank_of_output<W>();
  if constexpr (N == 0) return storage_kind0<T, Kind>(rng);
  else if constexpr (N == 1) return storage_kind1<T, Kind>(want.shape()[0], rng);
  else return storage_kind2<T, Kind>(want.shape()[0], want.shape()[1], rng);
}

// Every cell a sentinel; bytes: the storage once want is written through the same kind of
// expression (by this test).
template <class W, int Kind>
[[gnu::noinline]] auto make_destination(const W& want, std::mt19937& rng) {
  auto h =
      std::make_unique<held<decltype(destination_recipe<W, Kind>(want, rng))>>(destination_recipe<W, Kind>(want, rng));
  auto expected = h->r.storage;
  {
    decltype(auto) e = h->r.make(expected);
    store(e, want);
  }
  h->bytes = storage_bytes(expected);
  return h;
}

// Every argument of its kind under rotation K.
template <int K, class... X>
auto make_inputs(const std::tuple<X...>& vals, std::mt19937& rng) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple{
        make_input<typename X::value_type, rank_of<X>,
                   input_kind<typename X::value_type, rank_of<X>, false>(K + rotation_step * static_cast<int>(I))>(
            std::get<I>(vals), rng)...};
  }(std::index_sequence_for<X...>{});
}
template <int K, class... W>
auto make_destinations(const std::tuple<W...>& want, std::mt19937& rng) {
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    return std::tuple{
        make_destination<W, destination_kind<rank_of_output<W>()>(K + rotation_step * static_cast<int>(J))>(
            std::get<J>(want), rng)...};
  }(std::index_sequence_for<W...>{});
}

template <class Holders>
std::vector<std::string> holder_names(const Holders& hs, const std::string& what) {
  std::vector<std::string> names;
  std::apply(
      [&](const auto&... h) { ((names.push_back(what + std::to_string(names.size()) + ": " + h->r.name)), ...); }, hs);
  return names;
}

// A holder's storage must hold its bytes: an argument's as they were, a destination's the
// result in its cells and sentinels elsewhere.
template <class H>
[[gnu::noinline]] void check_holder(const H& h, const std::string& what) {
  using S = std::remove_cvref_t<decltype(h.r.storage)>;
  constexpr std::size_t cell = [] {
    if constexpr (std::is_arithmetic_v<S>) return sizeof(S);
    else return sizeof(typename S::value_type);
  }();
  expect_empty(cells_differ(storage_bytes(h.r.storage), h.bytes, cell), what);
}
template <class Holders>
void check_holders(const Holders& hs, const std::string& what) {
  std::size_t i = 0;
  std::apply([&](const auto&... h) { (check_holder(*h, what + std::to_string(i++)), ...); }, hs);
}

// ---- the property checks -------------------------------------------------------------------

template <class... X>
std::string shapes_text(const std::tuple<X...>& vals) {
  std::string s;
  std::apply([&](const auto&... v) { ((s += shape_text(v.shape()) + " "), ...); }, vals);
  return s;
}

// One call with every argument of its kind under rotation K.
template <int K, class Run, class... X>
[[gnu::noinline]] void call_with_kinds(const Run& run, const std::tuple<X...>& vals, std::mt19937& rng,
                                       const std::vector<flat>& want, const std::vector<expect>& expected,
                                       const std::vector<bool>& exact) {
  const auto holders = make_inputs<K>(vals, rng);
  const context_lines lines(holder_names(holders, "argument "));
  std::vector<flat> got;
  if (attempt([&] { got = flat_outputs(std::apply([&](const auto&... h) { return run(h->expr...); }, holders)); }))
    check_outputs(got, want, expected, exact);
  check_holders(holders, "the call wrote into argument ");
}

// Calls run (a function, or a wrapper that also returns shared state) on the values laid out
// in memory: every position in a random strided layout, then (EveryKind) every position as a
// kind of xtensor object under rotation k. Each result must equal the call on contiguous
// copies (exact[o]: bit for bit) and the oracle; no argument's memory may change, nor the
// contiguous copies.
template <bool EveryKind, class Run, class Oracle, class... X>
void check_arguments(const Run& run, const std::tuple<X...>& values, std::mt19937& rng, const Oracle& oracle,
                     const std::vector<bool>& exact, [[maybe_unused]] int k) {
  {
    auto vals = values;
    const auto placed = place_arguments(vals, rng);
    INFO("every argument strided:\n" << describe(placed));
    const auto copies = vals;
    std::vector<flat> want, got;
    if (attempt([&] { want = flat_outputs(std::apply(run, vals)); }) &&
        attempt([&] { got = flat_outputs(call_placed(run, placed)); }))
      check_outputs(got, want, oracle(vals), exact);
    check_untouched(placed, "argument");
    CHECK(same_tuple_bits(vals, copies));  // the contiguous call's arguments
  }
  if constexpr (EveryKind) {
    auto vals = values;
    for_each_index<sizeof...(X)>([&]<std::size_t P>() {
      using XP = std::tuple_element_t<P, std::tuple<X...>>;
      using T = typename XP::value_type;
      constexpr std::size_t N = rank_of<XP>;
      constrain<T, N>(input_kind<T, N, false>(k + rotation_step * static_cast<int>(P)), std::get<P>(vals));
    });
    INFO("every argument of its kind, rotation " << k);
    std::vector<flat> want;
    if (!attempt([&] { want = flat_outputs(std::apply(run, vals)); })) return;
    const auto expected = oracle(vals);
    dispatch<kind_rotations>(k, [&]<int K>() { call_with_kinds<K>(run, vals, rng, want, expected, exact); });
  }
}

// Shared state around an into-call: reset before each call, read after it.
struct state_hooks {
  std::function<void()> reset = [] {};
  std::function<std::vector<double>()> read = [] { return std::vector<double>{}; };
};

// One into-call with every destination of its kind under rotation K.
template <int K, class F, class Want, class Placed>
[[gnu::noinline]] void into_kinds(const F& f, const Want& want, const Placed& placed, std::mt19937& rng,
                                  const state_hooks& hooks, const std::vector<double>& state) {
  const auto dests = make_destinations<K>(want, rng);
  const context_lines lines(holder_names(dests, "output "));
  hooks.reset();
  if (attempt([&] { call_placed(std::apply([&](const auto&... d) { return f.into(d->expr...); }, dests), placed); }))
    expect_true(hooks.read() == state, "shared state differs from the plain call's");
  check_holders(dests, "not exactly the result in exactly its cells: destination ");
}

// f.into(destinations)(arguments), the arguments strided: every destination strided, then
// (EveryKind) every destination as a kind of xtensor object under rotation k. Each must hold
// the plain call's result (same arguments) bit for bit, with every other cell of its memory
// untouched, and shared state must end as after the plain call.
template <bool EveryKind, class F, class... X>
void check_into(const F& f, const std::tuple<X...>& values, std::mt19937& rng, [[maybe_unused]] int k,
                const state_hooks& hooks = {}) {
  auto vals = values;
  const auto placed = place_arguments(vals, rng);
  INFO("arguments:\n" << describe(placed));
  hooks.reset();
  decltype(call_placed(f, placed)) want;
  if (!attempt([&] { want = call_placed(f, placed); })) return;
  const auto state = hooks.read();
  {
    auto dests = place_destinations(want, rng);
    INFO("every destination strided:\n" << describe(dests));
    hooks.reset();
    if (attempt([&] { call_placed(into_all(f, dests), placed); })) {
      check_destinations(dests, want);
      CHECK(hooks.read() == state);
    }
    check_untouched(placed, "argument");
  }
  // Output 0 written over argument 0 (same type and shape), which the call reads too: it must
  // end holding the result, as if the call had read a copy.
  using W0 = std::tuple_element_t<0, decltype(want)>;
  if constexpr (std::is_same_v<W0, std::tuple_element_t<0, std::tuple<X...>>>) {
    auto& arg = *std::get<0>(placed);
    if (shape_vector(std::get<0>(want).shape()) == shape_vector(std::get<0>(vals).shape()) && arg.distinct()) {
      auto dests = place_destinations(want, rng);
      INFO("output 0 into argument 0, the other destinations strided:\n" << describe(dests));
      const auto expected = arg.written(std::get<0>(want));
      hooks.reset();
      if (attempt([&] { call_placed(into_first(f, *arg.view, dests), placed); })) {
        CHECK(cells_differ(storage_bytes(arg.buffer), storage_bytes(expected), sizeof(arg.buffer[0])) == "");
        std::get<0>(dests).reset();  // not used: argument 0 took its place
        check_destinations(dests, want);
        CHECK(hooks.read() == state);
      }
      arg.buffer = arg.snapshot;  // argument 0 as it was, for the checks below
      check_untouched(placed, "argument");
    }
  }
  if constexpr (EveryKind) {
    INFO("every destination of its kind, rotation " << k);
    dispatch<kind_rotations>(k, [&]<int K>() { into_kinds<K>(f, want, placed, rng, hooks, state); });
    check_untouched(placed, "argument");
  }
}

// ---- functions and their oracles --------------------------------------------------------------

const char* const mode_names[] = {"default", "FAST_COMPILE", "optimizer_excluding=fusion:inplace"};

// The kind rotation of trial t in mode m: consecutive (trial, mode) pairs take consecutive
// rotations, so seven trials in three modes take every kind at every position.
int rotation(int trial, int mode) {
  return static_cast<int>((run_seed() + static_cast<std::uint32_t>(trial * 3 + mode)) % kind_rotations);
}

template <class... A>
auto build(int mode, const std::string& name, const A&... a) {
  if (mode == 1) return xsym::function(name, a..., xsym::mode("FAST_COMPILE"));
  if (mode == 2) return xsym::function(name, a..., xsym::optimizer_excluding("fusion:inplace"));
  return xsym::function(name, a...);
}

template <class X>
double el(const X& x, std::size_t i) {
  return static_cast<double>(x.data()[i]);
}
template <class X>
double el(const X& x, std::size_t i, std::size_t j) {
  return static_cast<double>(x.data()[i * x.shape()[1] + j]);
}

expect sized(std::vector<std::size_t> shape) {
  expect e;
  e.shape = std::move(shape);
  return e;
}

// sum_p a(i, p) b(p, j) for matrices given as accessors, and the sum of |terms|.
template <class A, class B>
std::pair<double, double> dot_terms(std::size_t k, const A& a, const B& b) {
  double s = 0, m = 0;
  for (std::size_t p = 0; p < k; ++p) {
    s += a(p) * b(p);
    m += std::abs(a(p) * b(p));
  }
  return {s, m};
}

template <class T>
constexpr bool is_float = std::is_floating_point_v<T>;

// (x + 2y) exp(-z) and x y - z, or for integers (x + 2y) z - x and x y - z: matrices.
template <class T, bool EveryKind>
void fused_elementwise(int mode, std::mt19937& rng, int trials) {
  auto x = xsym::matrix<T>("x"), y = xsym::matrix<T>("y"), z = xsym::matrix<T>("z");
  const auto f = [&] {
    if constexpr (is_float<T>)
      return build(mode, "fused", xsym::inputs(x, y, z), xsym::outputs((x + y * 2) * exp(-z), x * y - z));
    else return build(mode, "fused", xsym::inputs(x, y, z), xsym::outputs((x + y * 2) * z - x, x * y - z));
  }();
  const auto oracle = [](const auto& v) {
    const auto& a = std::get<0>(v);
    const auto& b = std::get<1>(v);
    const auto& c = std::get<2>(v);
    expect e0 = sized(shape_vector(a.shape())), e1 = e0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double p = el(a, i), q = el(b, i), r = el(c, i);
      if constexpr (is_float<T>) e0.add((p + 2 * q) * std::exp(-r), (std::abs(p) + 2 * std::abs(q)) * std::exp(-r));
      else e0.add((p + 2 * q) * r - p, 0);
      e1.add(p * q - r, std::abs(p * q) + std::abs(r));
    }
    return std::vector<expect>{e0, e1};
  };
  for (int t = 0; t < trials; ++t) {
    const auto s = pick_shape2(rng);
    const auto vals = std::tuple{values_of<T>(rng, s), values_of<T>(rng, s), values_of<T>(rng, s)};
    INFO("trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes " << shapes_text(vals));
    // exp's batch and scalar forms differ in the last bit, and which elements take which
    // depends on the layout: only the arithmetic output is the same bits in every layout.
    check_arguments<EveryKind>(f, vals, rng, oracle, {!is_float<T>, true}, rotation(t, mode));
  }
}

// A matrix plus a vector (numpy's row broadcast) and times a 1 x n row (Theano's broadcastable pattern).
template <class T, bool EveryKind>
void broadcasting(int mode, std::mt19937& rng, int trials) {
  auto m = xsym::matrix<T>("m");
  auto v = xsym::vector<T>("v");
  auto rw = xsym::row<T>("rw");
  const auto f = build(mode, "broadcast", xsym::inputs(m, v, rw), xsym::outputs(m + v, m * rw - v));
  const auto oracle = [](const auto& vals) {
    const auto& a = std::get<0>(vals);
    const auto& b = std::get<1>(vals);
    const auto& c = std::get<2>(vals);
    expect e0 = sized(shape_vector(a.shape())), e1 = e0;
    for (std::size_t i = 0; i < a.shape()[0]; ++i)
      for (std::size_t j = 0; j < a.shape()[1]; ++j) {
        const double p = el(a, i, j), q = el(b, j), r = el(c, 0, j);
        e0.add(p + q, std::abs(p) + std::abs(q));
        e1.add(p * r - q, std::abs(p * r) + std::abs(q));
      }
    return std::vector<expect>{e0, e1};
  };
  for (int t = 0; t < trials; ++t) {
    const auto s = pick_shape2(rng);
    const auto vals =
        std::tuple{values_of<T>(rng, s), values_of<T>(rng, sh<T, 1>{s[1]}), values_of<T>(rng, sh<T, 2>{1, s[1]})};
    INFO("trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes " << shapes_text(vals));
    check_arguments<EveryKind>(f, vals, rng, oracle, {true, true}, rotation(t, mode));
  }
}

// Column and row sums, sums of everything (int32 sums to int64, as numpy does).
template <class T>
auto sums_function(int mode) {
  auto m = xsym::matrix<T>("m");
  auto v = xsym::vector<T>("v");
  return build(mode, "sums", xsym::inputs(m, v),
               xsym::outputs(xsym::sum(m, 0), xsym::sum(m, 1), xsym::sum(m), xsym::sum(v)));
}
const auto sums_oracle = [](const auto& vals) {
  const auto& a = std::get<0>(vals);
  const auto& v = std::get<1>(vals);
  const std::size_t r = a.shape()[0], c = a.shape()[1];
  expect cols = sized({c}), rows = sized({r}), all = sized({}), vec = sized({});
  double total = 0, total_abs = 0;
  for (std::size_t j = 0; j < c; ++j) {
    double s = 0, m = 0;
    for (std::size_t i = 0; i < r; ++i) s += el(a, i, j), m += std::abs(el(a, i, j));
    cols.add(s, m);
    total += s, total_abs += m;
  }
  for (std::size_t i = 0; i < r; ++i) {
    double s = 0, m = 0;
    for (std::size_t j = 0; j < c; ++j) s += el(a, i, j), m += std::abs(el(a, i, j));
    rows.add(s, m);
  }
  all.add(total, total_abs);
  double s = 0, m = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += el(v, i), m += std::abs(el(v, i));
  vec.add(s, m);
  return std::vector<expect>{cols, rows, all, vec};
};

// Maxima over everything, each axis, and a vector (inputs never empty: max of nothing throws).
template <class T>
auto max_function(int mode) {
  auto m = xsym::matrix<T>("m");
  auto v = xsym::vector<T>("v");
  return build(mode, "maxima", xsym::inputs(m, v),
               xsym::outputs(xsym::max(m), xsym::max(m, 0), xsym::max(m, 1), xsym::max(v)));
}
const auto max_oracle = [](const auto& vals) {
  const auto& a = std::get<0>(vals);
  const auto& v = std::get<1>(vals);
  const std::size_t r = a.shape()[0], c = a.shape()[1];
  expect all = sized({}), cols = sized({c}), rows = sized({r}), vec = sized({});
  const double lowest = -std::numeric_limits<double>::infinity();
  double total = lowest;
  for (std::size_t j = 0; j < c; ++j) {
    double s = lowest;
    for (std::size_t i = 0; i < r; ++i) s = std::max(s, el(a, i, j));
    cols.add(s, 0);
    total = std::max(total, s);
  }
  for (std::size_t i = 0; i < r; ++i) {
    double s = lowest;
    for (std::size_t j = 0; j < c; ++j) s = std::max(s, el(a, i, j));
    rows.add(s, 0);
  }
  all.add(total, 0);
  double s = lowest;
  for (std::size_t i = 0; i < v.size(); ++i) s = std::max(s, el(v, i));
  vec.add(s, 0);
  return std::vector<expect>{all, cols, rows, vec};
};

template <class T, bool EveryKind>
void reductions(int mode, std::mt19937& rng, int trials) {
  const auto sums = sums_function<T>(mode);
  const auto maxima = max_function<T>(mode);
  for (int t = 0; t < trials; ++t) {
    auto s = pick_shape2(rng);
    const std::size_t n = pick_len(rng);
    {
      const auto vals = std::tuple{values_of<T>(rng, s), values_of<T>(rng, sh<T, 1>{n})};
      INFO("sums, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                          << shapes_text(vals));
      // A sum over a strided input may add in another order than over a contiguous one.
      const bool ex = !is_float<T>;
      check_arguments<EveryKind>(sums, vals, rng, sums_oracle, {ex, ex, ex, ex}, rotation(t, mode));
    }
    s = {std::max<std::size_t>(s[0], 1), std::max<std::size_t>(s[1], 1)};
    const auto vals = std::tuple{values_of<T>(rng, s), values_of<T>(rng, sh<T, 1>{std::max<std::size_t>(n, 1)})};
    INFO("maxima, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                          << shapes_text(vals));
    // Strided layouts only: the sums above take every kind with the same inputs.
    check_arguments<false>(maxima, vals, rng, max_oracle, {true, true, true, true}, rotation(t, mode));
  }
}

// dot(A, B), dot(A, u), dot(w, A), dot(u, v), dot(A.T, C).
template <class T>
auto dots_function(int mode) {
  auto A = xsym::matrix<T>("A"), B = xsym::matrix<T>("B"), C = xsym::matrix<T>("C");
  auto u = xsym::vector<T>("u"), v = xsym::vector<T>("v"), w = xsym::vector<T>("w");
  return build(mode, "dots", xsym::inputs(A, B, C, u, v, w),
               xsym::outputs(xsym::dot(A, B), xsym::dot(A, u), xsym::dot(w, A), xsym::dot(u, v), xsym::dot(A.T(), C)));
}
const auto dots_oracle = [](const auto& vals) {
  const auto& A = std::get<0>(vals);
  const auto& B = std::get<1>(vals);
  const auto& C = std::get<2>(vals);
  const auto& u = std::get<3>(vals);
  const auto& v = std::get<4>(vals);
  const auto& w = std::get<5>(vals);
  const std::size_t m = A.shape()[0], k = A.shape()[1], n = B.shape()[1];
  expect ab = sized({m, n}), au = sized({m}), wa = sized({k}), uv = sized({}), atc = sized({k, n});
  const auto add = [](expect& e, std::pair<double, double> p) { e.add(p.first, p.second); };
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      add(ab, dot_terms(k, [&](std::size_t p) { return el(A, i, p); }, [&](std::size_t p) { return el(B, p, j); }));
  for (std::size_t i = 0; i < m; ++i)
    add(au, dot_terms(
                k, [&](std::size_t p) { return el(A, i, p); }, [&](std::size_t p) { return el(u, p); }));
  for (std::size_t j = 0; j < k; ++j)
    add(wa, dot_terms(
                m, [&](std::size_t p) { return el(w, p); }, [&](std::size_t p) { return el(A, p, j); }));
  add(uv, dot_terms(k, [&](std::size_t p) { return el(u, p); }, [&](std::size_t p) { return el(v, p); }));
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j < n; ++j)
      add(atc, dot_terms(m, [&](std::size_t p) { return el(A, p, i); }, [&](std::size_t p) { return el(C, p, j); }));
  return std::vector<expect>{ab, au, wa, uv, atc};
};

// Products with scale and accumulate folded in (Gemv, Gemm): y + 2 A u and C - alpha A B. The
// accumulated input must not be written.
template <class T>
auto gemm_function(int mode) {
  auto A = xsym::matrix<T>("A"), B = xsym::matrix<T>("B"), C = xsym::matrix<T>("C");
  auto u = xsym::vector<T>("u"), y = xsym::vector<T>("y");
  constexpr auto alpha = is_float<T> ? T(0.5) : T(3);
  return build(mode, "gemm", xsym::inputs(A, B, u, y, C),
               xsym::outputs(y + 2 * xsym::dot(A, u), C - alpha * xsym::dot(A, B)));
}
template <class T>
std::vector<expect> gemm_oracle(const auto& vals) {
  const auto& A = std::get<0>(vals);
  const auto& B = std::get<1>(vals);
  const auto& u = std::get<2>(vals);
  const auto& y = std::get<3>(vals);
  const auto& C = std::get<4>(vals);
  const std::size_t m = A.shape()[0], k = A.shape()[1], n = B.shape()[1];
  const double alpha = is_float<T> ? 0.5 : 3;
  expect e0 = sized({m}), e1 = sized({m, n});
  for (std::size_t i = 0; i < m; ++i) {
    const auto [s, a] = dot_terms(
        k, [&](std::size_t p) { return el(A, i, p); }, [&](std::size_t p) { return el(u, p); });
    e0.add(el(y, i) + 2 * s, std::abs(el(y, i)) + 2 * a);
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const auto [s, a] = dot_terms(
          k, [&](std::size_t p) { return el(A, i, p); }, [&](std::size_t p) { return el(B, p, j); });
      e1.add(el(C, i, j) - alpha * s, std::abs(el(C, i, j)) + alpha * a);
    }
  return {e0, e1};
}

template <class T, bool EveryKind>
void products(int mode, std::mt19937& rng, int trials) {
  const auto dots = dots_function<T>(mode);
  const auto gemm = gemm_function<T>(mode);
  for (int t = 0; t < trials; ++t) {
    const auto s = pick_shape2(rng);
    const std::size_t m = s[0], k = s[1], n = pick<std::size_t>(rng, {0, 1, 2, 5, 17, 40});
    // Products may sum in another order on other strides (BLAS reads a transposed operand).
    const bool ex = !is_float<T>;
    {
      const auto vals = std::tuple{values_of<T>(rng, sh<T, 2>{m, k}), values_of<T>(rng, sh<T, 2>{k, n}),
                                   values_of<T>(rng, sh<T, 2>{m, n}), values_of<T>(rng, sh<T, 1>{k}),
                                   values_of<T>(rng, sh<T, 1>{k}), values_of<T>(rng, sh<T, 1>{m})};
      INFO("dots, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                          << shapes_text(vals));
      // Every kind for the integer loop too, which reads its operands' strides itself.
      check_arguments<EveryKind || !is_float<T>>(dots, vals, rng, dots_oracle, {ex, ex, ex, ex, ex}, rotation(t, mode));
    }
    const auto vals = std::tuple{values_of<T>(rng, sh<T, 2>{m, k}), values_of<T>(rng, sh<T, 2>{k, n}),
                                 values_of<T>(rng, sh<T, 1>{k}), values_of<T>(rng, sh<T, 1>{m}),
                                 values_of<T>(rng, sh<T, 2>{m, n})};
    INFO("gemm, trial " << t << ", " << type_name<T>() << ", mode " << mode_names[mode] << ", shapes "
                        << shapes_text(vals));
    check_arguments<EveryKind>(
        gemm, vals, rng, [](const auto& v) { return gemm_oracle<T>(v); }, {ex, ex}, rotation(t, mode));
  }
}

// w <- w - 0.1 X^T (X w - t), the residual as output.
template <class T>
struct descent {
  xt::xtensor<T, 1> w0;
  mutable xsym::shared_var<T, 1> w;  // a handle: calls reset its value
  decltype(build(0, "", xsym::inputs(xsym::matrix<T>("X"), xsym::vector<T>("t")),
                 xsym::outputs(xsym::vector<T>("r")))) f;

  descent(int mode, std::size_t k, std::mt19937& rng)
      : w0(values_of<T>(rng, sh<T, 1>{k}, -1, 1)), w(xsym::shared(w0, "w")), f(make(mode, w)) {}

  static auto make(int mode, const xsym::shared_var<T, 1>& w) {
    auto X = xsym::matrix<T>("X");
    auto t = xsym::vector<T>("t");
    auto r = xsym::dot(X, w) - t;
    return build(mode, "descent", xsym::inputs(X, t), xsym::outputs(r),
                 xsym::updates(xsym::update(w, w - 0.1 * xsym::dot(X.T(), r))));
  }
  // The call's outputs and then the updated w, from w0 each time.
  auto operator()(const auto& X, const auto& t) const {
    w.set_value(w0);
    auto out = f(X, t);  // before get_value: the call updates w
    return std::tuple_cat(std::move(out), std::tuple{w.get_value()});
  }
  state_hooks hooks() const {
    return {[this] { w.set_value(w0); }, [this] { return to_doubles(w.get_value()); }};
  }
  std::vector<expect> oracle(const auto& vals) const {
    const auto& X = std::get<0>(vals);
    const auto& t = std::get<1>(vals);
    const std::size_t m = X.shape()[0], k = X.shape()[1];
    expect r = sized({m}), w1 = sized({k});
    std::vector<double> res(m), res_scale(m);
    for (std::size_t i = 0; i < m; ++i) {
      const auto [s, a] = dot_terms(
          k, [&](std::size_t p) { return el(X, i, p); }, [&](std::size_t p) { return el(w0, p); });
      res[i] = s - el(t, i);
      res_scale[i] = a + std::abs(el(t, i));
      r.add(res[i], res_scale[i]);
    }
    for (std::size_t j = 0; j < k; ++j) {
      double s = 0, a = 0;
      for (std::size_t i = 0; i < m; ++i) s += el(X, i, j) * res[i], a += std::abs(el(X, i, j)) * res_scale[i];
      w1.add(el(w0, j) - 0.1 * s, std::abs(el(w0, j)) + 0.1 * a);
    }
    return {r, w1};
  }
};

// The seeds' logistic regression step: prediction and cross-entropy out, w and b updated.
template <class T>
struct logreg {
  xt::xtensor<T, 1> w0;
  T b0;
  mutable xsym::shared_var<T, 1> w;
  mutable xsym::shared_var<T, 0> b;
  decltype(build(0, "", xsym::inputs(xsym::matrix<T>("x"), xsym::vector<T>("y")),
                 xsym::outputs(xsym::vector<T>("x") > 0.5, xsym::vector<T>("y")))) f;

  logreg(int mode, std::size_t k, std::mt19937& rng)
      : w0(values_of<T>(rng, sh<T, 1>{k}, -0.5, 0.5)), b0(static_cast<T>(0.25)), w(xsym::shared(w0, "w")),
        b(xsym::shared(b0, "b")), f(make(mode, w, b)) {}

  static auto make(int mode, const xsym::shared_var<T, 1>& w, const xsym::shared_var<T, 0>& b) {
    auto x = xsym::matrix<T>("x");
    auto y = xsym::vector<T>("y");
    auto p_1 = 1 / (1 + exp(-xsym::dot(x, w) - b));
    auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
    auto cost = mean(xent) + 0.01 * sum(w * w);
    auto [gw, gb] = xsym::grad(cost, w, b);
    return build(mode, "train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                 xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)));
  }
  auto operator()(const auto& x, const auto& y) const {
    w.set_value(w0);
    b.set_value(b0);
    auto out = f(x, y);
    return std::tuple_cat(std::move(out), std::tuple{w.get_value(), b.get_value()});
  }
  std::vector<expect> oracle(const auto& vals) const {
    const auto& x = std::get<0>(vals);
    const auto& y = std::get<1>(vals);
    const std::size_t m = x.shape()[0], k = x.shape()[1];
    expect pred = sized({m}), xent = sized({m}), w1 = sized({k}), b1 = sized({});
    std::vector<double> err(m);
    double gb = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const auto [s, a] = dot_terms(
          k, [&](std::size_t p) { return el(x, i, p); }, [&](std::size_t p) { return el(w0, p); });
      const double z = s + b0, p = 1 / (1 + std::exp(-z)), t = el(y, i);
      // Near z = 0 either prediction is right: the rounding of z decides.
      pred.add(z > 0 ? 1 : 0, std::abs(z) < 1e-3 * (1 + a) ? std::numeric_limits<double>::infinity() : 0);
      xent.add(-t * std::log(p) - (1 - t) * std::log(1 - p), 1 + a);
      err[i] = p - t;
      gb += err[i] / static_cast<double>(m);
    }
    for (std::size_t j = 0; j < k; ++j) {
      double s = 0, a = 0;
      for (std::size_t i = 0; i < m; ++i) s += el(x, i, j) * err[i], a += std::abs(el(x, i, j));
      const double g = s / static_cast<double>(m) + 0.02 * el(w0, j);
      w1.add(el(w0, j) - 0.01 * g, std::abs(el(w0, j)) + 0.01 * (a / static_cast<double>(m) + 1));
    }
    b1.add(b0 - 0.01 * gb, std::abs(b0) + 0.01);
    return {pred, xent, w1, b1};
  }
};

// ---- set_value --------------------------------------------------------------------------------

// set_value from every kind of expression (and strided layouts), then get_value and a function
// that reads the variable see exactly those values; the variable keeps its own copy.
template <class T, std::size_t N>
void check_set_value(std::mt19937& rng, int trials) {
  auto w = xsym::shared(xt::xtensor<T, N>(xt::zeros<T>(sh<T, N>{})), "w");
  auto x = xsym::tensor<T, N>("x");
  const auto f = xsym::function("read", xsym::inputs(x), xsym::outputs(w * 2 + x));
  const auto reads = [&](const xt::xtensor<T, N>& v) {
    CHECK(same_bits(w.get_value(), v));
    const auto [r] = f(xt::xtensor<T, N>(xt::zeros<T>(v.shape())));
    CHECK(same_bits(r, xt::xtensor<T, N>(v * T(2))));
  };
  for (int t = 0; t < trials; ++t) {
    sh<T, N> s{};
    if constexpr (N == 1) s = {pick_len(rng)};
    else s = pick_shape2(rng);
    INFO("set_value, trial " << t << ", " << type_name<T>() << ", shape " << shape_text(s));
    {
      auto v = values_of<T>(rng, s);
      laid_out<T> l(shape_vector(s), rng, true);
      l.hold(v);
      INFO("from " << l.what);
      if (attempt([&] { w.set_value(*l.view); })) {
        std::fill(l.buffer.begin(), l.buffer.end(), T(7));  // the caller's memory changes later
        reads(v);
      }
    }
    // Then from the kind of the trial's turn (every kind in kind_rotations trials).
    auto v = values_of<T>(rng, s);
    const int k = static_cast<int>((run_seed() + static_cast<std::uint32_t>(t)) % kind_rotations);
    constrain<T, N>(input_kind<T, N, true>(k), v);
    dispatch<kind_rotations>(k, [&]<int K>() {
      const auto h = make_input<T, N, input_kind<T, N, true>(K)>(v, rng);
      INFO("from " << h->r.name);
      if (attempt([&] { w.set_value(h->expr); })) reads(v);
    });
  }
}

}  // namespace

#endif
