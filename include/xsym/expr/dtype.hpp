#ifndef XSYM_EXPR_DTYPE_HPP
#define XSYM_EXPR_DTYPE_HPP

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace xsym {

/// @brief The element types a symbolic tensor can hold.
enum class dtype : std::uint8_t { bool_, int32, int64, float32, float64 };

constexpr std::string_view dtype_name(dtype d) {
  switch (d) {
    case dtype::bool_: return "bool";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
  }
  return "?";
}

constexpr std::size_t dtype_size(dtype d) {
  switch (d) {
    case dtype::bool_: return sizeof(bool);
    case dtype::int32: return 4;
    case dtype::int64: return 8;
    case dtype::float32: return 4;
    case dtype::float64: return 8;
  }
  return 0;
}

constexpr bool is_float(dtype d) { return d == dtype::float32 || d == dtype::float64; }

template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
constexpr dtype dtype_of() {
  static_assert(is_element_type_v<T>,
                "xsym tensors hold bool, std::int32_t, std::int64_t, float or double");
  if constexpr (std::is_same_v<T, bool>) return dtype::bool_;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::int64;
  else if constexpr (std::is_same_v<T, float>) return dtype::float32;
  else return dtype::float64;
}

namespace detail {
constexpr int dtype_rank(dtype d) { return static_cast<int>(d); }

// numpy's rules for two arrays: the smallest type that holds both exactly, so int32 with
// float32 gives float64 (float32 cannot hold every int32).
constexpr dtype promote(dtype a, dtype b) {
  if (a == b) return a;
  if (a == dtype::bool_) return b;
  if (b == dtype::bool_) return a;
  const bool fa = is_float(a), fb = is_float(b);
  if (fa && fb) return dtype::float64;
  if (!fa && !fb) return dtype::int64;
  const dtype f = fa ? a : b;
  const dtype i = fa ? b : a;
  (void)i;
  return f == dtype::float32 ? dtype::float64 : f;  // any int with float32 needs float64
}

// numpy's same_kind casting: within a kind or to a later one (bool, integer, float), so int64
// to int32 and float64 to float32 are allowed, a float to an integer or a number to bool not.
constexpr int dtype_kind(dtype d) { return d == dtype::bool_ ? 0 : is_float(d) ? 2 : 1; }
constexpr bool casts_same_kind(dtype from, dtype to) { return dtype_kind(from) <= dtype_kind(to); }

// The C++ element type of a dtype, as a message spells it.
constexpr std::string_view cpp_type_name(dtype d) {
  switch (d) {
    case dtype::bool_: return "bool";
    case dtype::int32: return "std::int32_t";
    case dtype::int64: return "std::int64_t";
    case dtype::float32: return "float";
    case dtype::float64: return "double";
  }
  return "?";
}

template <dtype D> struct type_of_dtype;
template <> struct type_of_dtype<dtype::bool_> { using type = bool; };
template <> struct type_of_dtype<dtype::int32> { using type = std::int32_t; };
template <> struct type_of_dtype<dtype::int64> { using type = std::int64_t; };
template <> struct type_of_dtype<dtype::float32> { using type = float; };
template <> struct type_of_dtype<dtype::float64> { using type = double; };

// Tells the backend that the program makes expressions of element type T, so that its kernels
// for T are compiled in (var<T, N> calls it; backend/cpu/register_kernels.hpp defines it).
template <class T>
void use_element_type();

// Calls f(T{}) with T the C++ type of d: one switch instead of five copies at every use.
template <class F>
decltype(auto) visit_dtype(dtype d, F&& f) {
  switch (d) {
    case dtype::bool_: return f(bool{});
    case dtype::int32: return f(std::int32_t{});
    case dtype::int64: return f(std::int64_t{});
    case dtype::float32: return f(float{});
    case dtype::float64: break;
  }
  return f(double{});
}
}  // namespace detail

/// @brief The element type of `a op b` for two tensors (numpy promotion).
template <class A, class B>
using promote_t = typename detail::type_of_dtype<detail::promote(dtype_of<A>(), dtype_of<B>())>::type;

/// @brief The element type of a floating-point function (exp, log, /) of T: T if floating, else double.
template <class T>
using float_result_t = std::conditional_t<std::is_floating_point_v<T>, T, double>;

/// @brief The accumulator type numpy uses for sum and prod of T.
template <class T>
using sum_result_t = std::conditional_t<std::is_floating_point_v<T>, T, std::int64_t>;

/// @brief static_cast<To>(v), defined for every v: a float that an integer type cannot hold
/// (NaN, an infinity, out of range) becomes the type's minimum, as x86's conversion
/// instructions give (and so numpy on x86); C++ leaves that conversion undefined.
template <class To, class From>
constexpr To convert_value(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());  // -2^31 or -2^63, exact
    if (!(v >= lo && v < -lo)) return std::numeric_limits<To>::min();
  }
  return static_cast<To>(v);
}

}  // namespace xsym

#endif
