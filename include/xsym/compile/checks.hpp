#ifndef XSYM_COMPILE_CHECKS_HPP
#define XSYM_COMPILE_CHECKS_HPP

// What DebugMode and NanGuardMode check, on runtime arrays.
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include <xsimd/xsimd.hpp>

#include "../exec/buffers.hpp"
#include "../expr/variable.hpp"
#include "../config/cold.hpp"

namespace xsym {

/// @brief DebugMode found an optimised result that differs from the reference, an input
/// changed outside a node's destroy map, a view that aliases what it did not declare, or a
/// non-finite value (DebugMode.check_isfinite).
class debug_mode_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief NanGuardMode found NaN, Inf or a huge value; the message names where it first appeared.
class nan_guard_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

XSYM_COLD_BEGIN  // DebugMode and NanGuardMode: checking, not speed
namespace detail {

struct mismatch {
  bool layout = false;  // the shapes or dtypes differ: no element was compared
  double max_abs = 0, max_rel = 0;
  std::int64_t first_index = -1;  // C-order index of the first element out of tolerance
  double got = 0, want = 0;
  bool integer = false;  // integers and bools: got_int and want_int hold the values exactly
  std::int64_t got_int = 0, want_int = 0;
};

// Integers and bools compare exactly: through a double, int64 values past 2^53 (2^60 - 1 and
// 2^60 + 1) would be equal.
inline std::optional<mismatch> compare_integers(const ndarray& got, const ndarray& want) {
  const ndarray g = got.contiguous(), w = want.contiguous();
  mismatch m;
  m.integer = true;
  visit_dtype(g.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_floating_point_v<T>) {
      const T* gp = g.data_as<T>();
      const T* wp = w.data_as<T>();
      for (std::int64_t i = 0; i < g.size(); ++i) {
        if (gp[i] == wp[i]) continue;
        const auto a = static_cast<std::int64_t>(gp[i]), b = static_cast<std::int64_t>(wp[i]);
        // |a - b| in unsigned arithmetic: exact, and never 0 for a != b.
        const std::uint64_t diff = a > b ? static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b)
                                         : static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
        m.max_abs = std::max(m.max_abs, static_cast<double>(diff));
        m.max_rel = std::max(m.max_rel, static_cast<double>(diff) / std::max(std::abs(static_cast<double>(b)), 1.0));
        if (m.first_index < 0) {
          m.first_index = i;
          m.got_int = a;
          m.want_int = b;
          m.got = static_cast<double>(a);
          m.want = static_cast<double>(b);
        }
      }
    }
  });
  if (m.first_index < 0) return std::nullopt;
  return m;
}

/// Elementwise comparison with a tolerance fit for the dtype (integers and bools exactly); NaN
/// equals NaN, and an infinity only itself. With `scale`
/// (same shape), element i is compared relative to max(|want[i]|, scale[i]): a product's
/// rounding error grows with its terms, |A||x|, not with a result that cancels to near zero.
/// `exact`: floats too must be equal (or both NaN), for results that pick an element.
inline std::optional<mismatch> compare_arrays(const ndarray& got, const ndarray& want, const ndarray* scale = nullptr,
                                              bool exact = false) {
  if (!(got.shape() == want.shape()) || got.type() != want.type() || (scale && !(scale->shape() == want.shape()))) {
    mismatch m;
    m.layout = true;
    return m;
  }
  if (!is_float(got.type())) return compare_integers(got, want);
  const bool f32 = got.type() == dtype::float32;
  const double rtol = exact ? 0.0 : f32 ? 1e-4 : 1e-9;
  const double atol = exact ? 0.0 : f32 ? 1e-6 : 1e-12;
  mismatch m;
  bool bad = false;
  // Typed loops over contiguous copies: flat_as_double's index arithmetic per element made
  // DebugMode's step on MNIST (an input of 47M floats) take a second.
  const ndarray gc = got.contiguous(), wc = want.contiguous();
  const ndarray sc = !scale ? ndarray{} : scale->type() == got.type() ? scale->contiguous() : cast_array(*scale, got.type());
  visit_dtype(got.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* gp = gc.data_as<T>();
      const T* wp = wc.data_as<T>();
      const T* sp = scale ? sc.data_as<T>() : nullptr;
      for (std::int64_t i = 0; i < gc.size(); ++i) {
        const double g = gp[i], w = wp[i];
        if (g == w || (std::isnan(g) && std::isnan(w))) continue;
        const double abs_err = std::abs(g - w);
        const double rel_err = abs_err / std::max(std::abs(w), 1e-300);
        m.max_abs = std::max(m.max_abs, std::isnan(abs_err) ? INFINITY : abs_err);
        m.max_rel = std::max(m.max_rel, std::isnan(rel_err) ? INFINITY : rel_err);
        const double magnitude = sp ? std::max(std::abs(w), static_cast<double>(sp[i])) : std::abs(w);
        // Past here g != w. A NaN or an infinity on either side is a difference whatever the
        // tolerance: an infinite reference would make any finite value pass. (Stabilizing
        // rewrites run in the reference too, so a finite result where it overflowed is wrong.)
        const bool special = !std::isfinite(g) || !std::isfinite(w);
        if ((special || !(abs_err <= atol + rtol * magnitude)) && m.first_index < 0) {
          m.first_index = i;
          m.got = g;
          m.want = w;
          bad = true;
        }
      }
    }
  });
  if (!bad) return std::nullopt;
  return m;
}

inline std::string index_text(const shape_t& s, std::int64_t flat) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(s.rank));
  for (int d = s.rank - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  std::string t = "(";
  for (std::size_t i = 0; i < idx.size(); ++i) t += (i ? ", " : "") + std::to_string(idx[i]);
  return t + (idx.size() == 1 ? ",)" : ")");
}

inline std::string describe_mismatch(const ndarray& got, const mismatch& m) {
  std::ostringstream os;
  if (m.layout || m.first_index < 0) {
    os << "shapes or dtypes differ (got " << dtype_name(got.type()) << " " << to_string(got.shape()) << ")";
    return os.str();
  }
  if (m.integer) {
    os << "max abs error " << m.max_abs << ", first difference at index " << index_text(got.shape(), m.first_index) << ": "
       << m.got_int << " instead of " << m.want_int;
    return os.str();
  }
  // A NaN or an infinity on one side is named as such: its "error" is no number to read.
  const bool special = !std::isfinite(m.got) || !std::isfinite(m.want);
  if (special) {
    auto kind = [](double v) { return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+inf" : "-inf") : "a finite value"; };
    os << kind(m.got) << " where the reference has " << kind(m.want) << ", first at index "
       << index_text(got.shape(), m.first_index) << ": " << m.got << " instead of " << m.want;
    return os.str();
  }
  os << "max abs error " << m.max_abs << ", max rel error " << m.max_rel << ", first difference at index "
     << index_text(got.shape(), m.first_index) << ": " << m.got << " instead of " << m.want;
  return os.str();
}

/// The first element that is NaN (what=0), infinite (1) or of magnitude above 1e10 (2).
inline bool is_bad(double v, int what) {
  return (what == 0 && std::isnan(v)) || (what == 1 && std::isinf(v)) || (what == 2 && std::isfinite(v) && std::abs(v) > 1e10);
}
// Every element has |v| <= 1e10: no NaN, infinity or value NanGuardMode calls big, screened by
// one vector comparison per batch. NanGuardMode checks every input and shared variable each
// call: a training set of 47M floats took seconds a call element by element.
template <class T>
bool all_ordinary(const T* p, std::int64_t n) {
  using batch = xsimd::batch<T>;
  constexpr auto lanes = static_cast<std::int64_t>(batch::size);
  const batch limit(T(1e10));
  xsimd::batch_bool<T> bad(false);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) bad = bad | !(xsimd::abs(batch::load_unaligned(p + i)) <= limit);
  bool any = xsimd::any(bad);
  for (; i < n; ++i) any |= !(std::abs(p[i]) <= T(1e10));
  return !any;
}
inline bool all_ordinary(const ndarray& a) {
  if (!is_float(a.type())) return true;
  if (!a.is_c_contiguous() || a.on_device()) return false;  // unknown: first_bad reads it
  return a.type() == dtype::float32 ? all_ordinary(a.data_as<float>(), a.size()) : all_ordinary(a.data_as<double>(), a.size());
}

inline std::int64_t first_bad(const ndarray& a, int what) {
  if (!is_float(a.type()) || all_ordinary(a)) return -1;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    if (is_bad(a.flat_as_double(i), what)) return i;
  }
  return -1;
}

XSYM_COLD_END

}  // namespace detail
}  // namespace xsym

#endif
