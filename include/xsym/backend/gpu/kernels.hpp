#ifndef XSYM_BACKEND_GPU_KERNELS_HPP
#define XSYM_BACKEND_GPU_KERNELS_HPP

// The GPU kernels, written once in Thrust: under nvcc they run on the GPU, and with g++ and
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP the same functors run on the CPU's threads
// (how the GPU suite is tested on machines without a GPU).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/transform_reduce.h>

#ifdef __CUDACC__
#include <mutex>

#include <cub/device/device_reduce.cuh>
#endif

#include "../../config/limits.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "memory.hpp"

namespace xsym::gpu {

#ifdef __CUDACC__
// Launches without a host sync: ordering is the stream's, and a transfer to the host waits.
#define XSYM_GPU_POLICY thrust::cuda::par_nosync
#else
#define XSYM_GPU_POLICY thrust::device
#endif

inline constexpr int max_inputs = static_cast<int>(limits::max_registers);
inline constexpr int max_registers = static_cast<int>(limits::max_registers);
inline constexpr int max_outputs = static_cast<int>(limits::max_outputs);

/// One instruction as the device reads it (plain data, no std types).
struct device_instruction {
  std::uint8_t op, in_type, out_type, arity;
  int a0, a1, a2, dst;
};

/// Everything an elementwise kernel needs, passed by value to the kernel (about 5 KB; sm_70 and
/// newer accept 32 KB of kernel parameters).
struct elemwise_desc {
  int n_in = 0, n_out = 0, n_code = 0, rank = 0;
  std::int64_t shape[max_rank] = {};
  const std::byte* in[max_inputs] = {};
  std::int64_t in_strides[max_inputs][max_rank] = {};  // elements; 0 where the input broadcasts
  std::byte* out[max_outputs] = {};
  int out_reg[max_outputs] = {};
  std::uint8_t reg_type[max_registers] = {};
  const device_instruction* code = nullptr;
};

namespace detail {

union reg {
  double f64;
  float f32;
  std::int64_t i64;
  std::int32_t i32;
  bool b;
};

template <class T>
__host__ __device__ inline T load(const reg& r, std::uint8_t t) {
  switch (static_cast<dtype>(t)) {
    case dtype::bool_: return static_cast<T>(r.b);
    case dtype::int32: return static_cast<T>(r.i32);
    case dtype::int64: return static_cast<T>(r.i64);
    case dtype::float32: return static_cast<T>(r.f32);
    default: return static_cast<T>(r.f64);
  }
}

// As xsym::convert_value (expr/dtype.hpp) on the device: a float no integer holds becomes the minimum.
template <class I, class T>
__host__ __device__ inline I to_integer(T v) {
  // std::numeric_limits' functions are host functions for nvcc: the minimum from its bits.
  constexpr I imin = [] {
    if constexpr (std::is_signed_v<I>) return static_cast<I>(std::make_unsigned_t<I>(1) << (8 * sizeof(I) - 1));
    else return I(0);
  }();
  if constexpr (std::is_floating_point_v<T>) {
    const T lo = static_cast<T>(imin);
    if (!(v >= lo && v < -lo)) return imin;
  }
  return static_cast<I>(v);
}

template <class T>
__host__ __device__ inline void store(reg& r, std::uint8_t t, T v) {
  switch (static_cast<dtype>(t)) {
    case dtype::bool_: r.b = v != T(0); break;
    case dtype::int32: r.i32 = to_integer<std::int32_t>(v); break;
    case dtype::int64: r.i64 = to_integer<std::int64_t>(v); break;
    case dtype::float32: r.f32 = static_cast<float>(v); break;
    default: r.f64 = static_cast<double>(v); break;
  }
}

__host__ __device__ inline void load_memory(reg& r, std::uint8_t t, const std::byte* p) {
  switch (static_cast<dtype>(t)) {
    case dtype::bool_: r.b = *reinterpret_cast<const bool*>(p); break;
    case dtype::int32: r.i32 = *reinterpret_cast<const std::int32_t*>(p); break;
    case dtype::int64: r.i64 = *reinterpret_cast<const std::int64_t*>(p); break;
    case dtype::float32: r.f32 = *reinterpret_cast<const float*>(p); break;
    default: r.f64 = *reinterpret_cast<const double*>(p); break;
  }
}

__host__ __device__ inline void store_memory(const reg& r, std::uint8_t t, std::byte* p) {
  switch (static_cast<dtype>(t)) {
    case dtype::bool_: *reinterpret_cast<bool*>(p) = r.b; break;
    case dtype::int32: *reinterpret_cast<std::int32_t*>(p) = r.i32; break;
    case dtype::int64: *reinterpret_cast<std::int64_t*>(p) = r.i64; break;
    case dtype::float32: *reinterpret_cast<float*>(p) = r.f32; break;
    default: *reinterpret_cast<double*>(p) = r.f64; break;
  }
}

__host__ __device__ inline int element_size(std::uint8_t t) {
  switch (static_cast<dtype>(t)) {
    case dtype::bool_: return 1;
    case dtype::int32:
    case dtype::float32: return 4;
    default: return 8;
  }
}

// Transcendentals in the op's own precision (expf for float32), as the CPU kernels compute.
#define XSYM_GPU_MATH(name)                                                        \
  template <class T>                                                               \
  __host__ __device__ inline T m_##name(T x) {                                     \
    if constexpr (std::is_same_v<T, float>) return ::name##f(x);                   \
    else return static_cast<T>(::name(static_cast<double>(x)));                    \
  }
XSYM_GPU_MATH(exp)
XSYM_GPU_MATH(log)
XSYM_GPU_MATH(log1p)
XSYM_GPU_MATH(expm1)
XSYM_GPU_MATH(sqrt)
XSYM_GPU_MATH(tanh)
XSYM_GPU_MATH(fabs)
#undef XSYM_GPU_MATH
template <class T>
__host__ __device__ inline T m_pow(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return ::powf(a, b);
  else return static_cast<T>(::pow(static_cast<double>(a), static_cast<double>(b)));
}

// The op table's vocabulary on one value of type X (see expr/op_table.hpp).
template <class X>
__host__ __device__ inline X vneg(X a) { return -a; }
template <class X>
__host__ __device__ inline X vpow(X a, X b) { return m_pow(a, b); }
template <class X>
__host__ __device__ inline X vsqrt(X a) { return m_sqrt(a); }
template <class X>
__host__ __device__ inline X vexp(X a) { return m_exp(a); }
template <class X>
__host__ __device__ inline X vlog(X a) { return m_log(a); }
template <class X>
__host__ __device__ inline X vlog1p(X a) { return m_log1p(a); }
template <class X>
__host__ __device__ inline X vexpm1(X a) { return m_expm1(a); }
template <class X>
__host__ __device__ inline X vtanh(X a) { return m_tanh(a); }
template <class X>
__host__ __device__ inline X vabs(X a) {
  if constexpr (std::is_floating_point_v<X>) return m_fabs(a);  // abs(-0) is +0
  else return a < X(0) ? X(-a) : a;
}
// From exp(-|a|), which cannot overflow, as the CPU computes it where exp(-a) would.
template <class X>
__host__ __device__ inline X vsigmoid(X a) {
  const X e = m_exp(X(-m_fabs(a))), r = X(1) / (X(1) + e);
  return a >= X(0) ? r : e * r;
}
template <class X, class F>
__host__ __device__ inline X vlane1(X a, F f) { return static_cast<X>(f(a)); }
template <class X>
__host__ __device__ inline X vfloor(X a) { return static_cast<X>(std::floor(a)); }
template <class X>
__host__ __device__ inline X vceil(X a) { return static_cast<X>(std::ceil(a)); }
template <class X>
__host__ __device__ inline X vround_even(X a) { return static_cast<X>(std::nearbyint(a)); }
// numpy's floor division and modulo, as the CPU's floordiv1 and mod1 (backend/cpu/vector_math.hpp).
template <class T>
__host__ __device__ inline T vfloordiv(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (b == 0) return T(0);
    if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));
    const T q = static_cast<T>(a / b);
    return a % b != 0 && ((a < 0) != (b < 0)) ? static_cast<T>(q - 1) : q;
  } else {
    if (b == 0) return a / b;
    const T m = std::fmod(a, b);
    T d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= T(1);
    if (d == 0) return std::copysign(T(0), a / b);
    T f = std::floor(d);
    if (d - f > T(0.5)) f += T(1);
    return f;
  }
}
template <class T>
__host__ __device__ inline T vmod(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else if constexpr (std::is_integral_v<T>) {
    if (b == 0 || b == T(-1)) return T(0);
    const T r = static_cast<T>(a % b);
    return r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
  } else {
    const T m = std::fmod(a, b);
    if (b == 0) return m;
    if (m == 0) return std::copysign(T(0), b);
    return (b < 0) != (m < 0) ? m + b : m;
  }
}
template <class X>
__host__ __device__ inline X vbitand(X a, X b) {
  if constexpr (std::is_integral_v<X>) return static_cast<X>(a & b);
  else return a;
}
template <class X>
__host__ __device__ inline X vbitor(X a, X b) {
  if constexpr (std::is_integral_v<X>) return static_cast<X>(a | b);
  else return a;
}
template <class X>
__host__ __device__ inline X vbitxor(X a, X b) {
  if constexpr (std::is_integral_v<X>) return static_cast<X>(a ^ b);
  else return a;
}
template <class X>
__host__ __device__ inline X vinvert(X a) {
  if constexpr (std::is_same_v<X, bool>) return !a;
  else if constexpr (std::is_integral_v<X>) return static_cast<X>(~a);
  else return a;
}
template <class X>
__host__ __device__ inline X vmax(X a, X b) { return a < b ? b : a; }
// NaN propagates, as numpy's
template <class X>
__host__ __device__ inline X vmaximum(X a, X b) { return b != b || a < b ? b : a; }
template <class X>
__host__ __device__ inline X vminimum(X a, X b) { return b != b || b < a ? b : a; }

// Each floating-point op's expression in float64, for execute's integer instantiations.
#define XSYM_GPU_FLOAT64_floating(S, ...)                                                              \
  __host__ __device__ inline double floating_value_##S([[maybe_unused]] double a, [[maybe_unused]] double b) { \
    using X = double; /* the name some expressions use */                                            \
    (void)sizeof(X);                                                                                   \
    return __VA_ARGS__;                                                                                \
  }
#define XSYM_GPU_FLOAT64_other(S, ...)
#define XSYM_GPU_FLOAT64_wrapping XSYM_GPU_FLOAT64_other
#define XSYM_GPU_FLOAT64_any XSYM_GPU_FLOAT64_other
#define XSYM_GPU_FLOAT64_comparison XSYM_GPU_FLOAT64_other
#define XSYM_GPU_FLOAT64_special XSYM_GPU_FLOAT64_other
#define XSYM_GPU_FLOAT64_bitwise XSYM_GPU_FLOAT64_other
#define XSYM_GPU_FLOAT64(S, name, arity, infix, family, flops, derivative, ...) XSYM_GPU_FLOAT64_##family(S, __VA_ARGS__)
XSYM_OP_TABLE(XSYM_GPU_FLOAT64)
#undef XSYM_GPU_FLOAT64
#undef XSYM_GPU_FLOAT64_bitwise
#undef XSYM_GPU_FLOAT64_special
#undef XSYM_GPU_FLOAT64_comparison
#undef XSYM_GPU_FLOAT64_any
#undef XSYM_GPU_FLOAT64_wrapping
#undef XSYM_GPU_FLOAT64_other
#undef XSYM_GPU_FLOAT64_floating

template <class T>
__host__ __device__ inline void execute(const device_instruction& ins, reg* r, const std::uint8_t* types) {
  const auto op = static_cast<scalar_op>(ins.op);
  if (op == scalar_op::switch_) {
    const bool c = load<bool>(r[ins.a0], types[ins.a0]);
    store<T>(r[ins.dst], ins.out_type, c ? load<T>(r[ins.a1], types[ins.a1]) : load<T>(r[ins.a2], types[ins.a2]));
    return;
  }
  // Bool runs as int64 (below), where ~1 is -2, true again: invert of a bool is logical not.
  if (op == scalar_op::invert && types[ins.a0] == static_cast<std::uint8_t>(dtype::bool_)) {
    store<T>(r[ins.dst], ins.out_type, T(!load<bool>(r[ins.a0], types[ins.a0])));
    return;
  }
  using X = T;
  const T a = load<T>(r[ins.a0], types[ins.a0]);
  [[maybe_unused]] const T b = ins.arity > 1 ? load<T>(r[ins.a1], types[ins.a1]) : a;
  T v = a;  // cast and identity: the store converts
  switch (op) {
#define XSYM_GPU_VALUE(S, ...) \
  case scalar_op::S: v = T(__VA_ARGS__); break;
#define XSYM_GPU_wrapping XSYM_GPU_VALUE
#define XSYM_GPU_any XSYM_GPU_VALUE
// A floating-point op on an integer type computes in float64, as the graph does (it casts
// integer operands first, so these cases are not reached; they are compiled for every T).
#define XSYM_GPU_floating(S, ...)                                       \
  case scalar_op::S:                                                    \
    if constexpr (std::is_floating_point_v<T>) {                        \
      v = T(__VA_ARGS__);                                               \
    } else {                                                            \
      const double fa = static_cast<double>(a), fb = static_cast<double>(b); \
      v = static_cast<T>(floating_value_##S(fa, fb));                   \
    }                                                                   \
    break;
#define XSYM_GPU_comparison XSYM_GPU_VALUE
#define XSYM_GPU_special(S, ...)
#define XSYM_GPU_bitwise XSYM_GPU_VALUE
#define XSYM_GPU_CASE(S, name, arity, infix, family, flops, derivative, ...) XSYM_GPU_##family(S, __VA_ARGS__)
    XSYM_OP_TABLE(XSYM_GPU_CASE)
#undef XSYM_GPU_CASE
#undef XSYM_GPU_special
#undef XSYM_GPU_bitwise
#undef XSYM_GPU_comparison
#undef XSYM_GPU_floating
#undef XSYM_GPU_any
#undef XSYM_GPU_wrapping
#undef XSYM_GPU_VALUE
    default: break;
  }
  store<T>(r[ins.dst], ins.out_type, v);
}

/// One element of a (fused) elementwise node: the whole program on registers, one kernel.
struct elemwise_functor {
  elemwise_desc d;
  __host__ __device__ void operator()(std::int64_t i) const { apply(d, i); }
  __host__ __device__ static void apply(const elemwise_desc& d, std::int64_t i) {
    reg r[max_registers];
    std::int64_t off[max_inputs];
    for (int k = 0; k < d.n_in; ++k) off[k] = 0;
    std::int64_t rem = i;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      const std::int64_t idx = rem % d.shape[dim];
      rem /= d.shape[dim];
      for (int k = 0; k < d.n_in; ++k) off[k] += idx * d.in_strides[k][dim];
    }
    for (int k = 0; k < d.n_in; ++k) load_memory(r[k], d.reg_type[k], d.in[k] + off[k] * element_size(d.reg_type[k]));
    for (int c = 0; c < d.n_code; ++c) {
      const device_instruction& ins = d.code[c];
      switch (static_cast<dtype>(ins.in_type)) {
        case dtype::float32: execute<float>(ins, r, d.reg_type); break;
        case dtype::float64: execute<double>(ins, r, d.reg_type); break;
        case dtype::int32: execute<std::int32_t>(ins, r, d.reg_type); break;
        default: execute<std::int64_t>(ins, r, d.reg_type); break;  // int64 and bool
      }
    }
    for (int o = 0; o < d.n_out; ++o) {
      const std::uint8_t t = d.reg_type[d.out_reg[o]];
      store_memory(r[d.out_reg[o]], t, d.out[o] + i * element_size(t));
    }
  }
};

/// A strided array's elements in C order into a contiguous buffer.
struct gather_functor {
  const std::byte* src;
  std::byte* dst;
  int rank, size;
  std::int64_t shape[max_rank], strides[max_rank];
  __host__ __device__ void operator()(std::int64_t i) const {
    std::int64_t rem = i, off = 0;
    for (int dim = rank - 1; dim >= 0; --dim) {
      off += (rem % shape[dim]) * strides[dim];
      rem /= shape[dim];
    }
    for (int b = 0; b < size; ++b) dst[i * size + b] = src[off * size + b];
  }
};

template <class In, class Acc>
struct reduce_functor {
  const In* in;
  std::byte* out;
  std::uint8_t out_type;
  std::uint8_t op;  // reduce_op
  int kept_rank, red_rank;
  std::int64_t kept_shape[max_rank], kept_strides[max_rank], red_shape[max_rank], red_strides[max_rank];
  std::int64_t count;

  __host__ __device__ Acc element(std::int64_t base, std::int64_t r) const {
    std::int64_t off = base;
    for (int dim = red_rank - 1; dim >= 0; --dim) {
      off += (r % red_shape[dim]) * red_strides[dim];
      r /= red_shape[dim];
    }
    return static_cast<Acc>(in[off]);
  }
  __host__ __device__ Acc combine(Acc a, Acc b) const {
    switch (static_cast<reduce_op>(op)) {
      case reduce_op::prod: return a * b;
      case reduce_op::max: return b > a || b != b ? b : a;  // NaN wins, as in numpy
      case reduce_op::min: return b < a || b != b ? b : a;
      default: return a + b;
    }
  }
  __host__ __device__ void operator()(std::int64_t j) const {
    std::int64_t base = 0, rem = j;
    for (int dim = kept_rank - 1; dim >= 0; --dim) {
      base += (rem % kept_shape[dim]) * kept_strides[dim];
      rem /= kept_shape[dim];
    }
    const auto kind = static_cast<reduce_op>(op);
    // prod's identity, and an empty min's (only bool gets here: all([]) is true).
    Acc acc = kind == reduce_op::prod || (kind == reduce_op::min && count == 0) ? Acc(1) : Acc(0);
    std::int64_t r = 0;
    if ((kind == reduce_op::max || kind == reduce_op::min) && count > 0) acc = element(base, r++);
    for (; r < count; ++r) acc = combine(acc, element(base, r));
    reg v;
    if (kind == reduce_op::mean) store<double>(v, out_type, static_cast<double>(acc) / static_cast<double>(count));
    else store<Acc>(v, out_type, acc);
    store_memory(v, out_type, out + j * element_size(out_type));
  }
};

// One element of a full reduction, for thrust::transform_reduce.
template <class In, class Acc>
struct reduce_element {
  reduce_functor<In, Acc> f;
  __host__ __device__ Acc operator()(std::int64_t r) const { return f.element(0, r); }
};
// alpha times a product's sum: an integer sum times alpha as an integer, wrapping as the CPU
// kernels do (through a double, a sum above 2^53 would lose its low bits).
template <class Acc>
__host__ __device__ inline Acc scaled_sum(double alpha, Acc s) {
  if constexpr (std::is_integral_v<Acc>)
    return static_cast<Acc>(static_cast<std::uint64_t>(static_cast<Acc>(alpha)) * static_cast<std::uint64_t>(s));
  else return static_cast<Acc>(alpha * static_cast<double>(s));
}

template <class In, class Acc>
struct reduce_combine {
  reduce_functor<In, Acc> f;
  __host__ __device__ Acc operator()(Acc a, Acc b) const { return f.combine(a, b); }
};

/// out[i] = beta * y0[i] + alpha * sum_j A[i, j] x[j] over strided operands (op(A) by strides).
template <class T, class Acc>
struct gemv_functor {
  const T* a;
  std::int64_t a_row, a_col, cols;
  const T* x;
  std::int64_t x_stride;
  const T* y0;  // null: no accumulation
  std::int64_t y0_stride;
  T* out;
  double alpha;
  double beta = 1.0;  // y0's factor
  __host__ __device__ void operator()(std::int64_t i) const {
    Acc s = 0;
    const T* row = a + i * a_row;
    for (std::int64_t j = 0; j < cols; ++j) s += static_cast<Acc>(row[j * a_col]) * static_cast<Acc>(x[j * x_stride]);
    const Acc scaled = scaled_sum(alpha, s);
    out[i] = static_cast<T>(y0 ? static_cast<Acc>(static_cast<Acc>(beta) * static_cast<Acc>(y0[i * y0_stride])) + scaled
                               : scaled);
  }
};

/// out[i, k] = y0[i, k] + alpha * sum_j A[i, j] B[j, k], out C-contiguous.
template <class T, class Acc>
struct gemm_functor {
  const T* a;
  std::int64_t a_row, a_col;
  const T* b;
  std::int64_t b_row, b_col;
  const T* y0;
  std::int64_t y0_row, y0_col;
  T* out;
  std::int64_t n, inner;
  double alpha;
  __host__ __device__ void operator()(std::int64_t idx) const {
    const std::int64_t i = idx / n, k = idx % n;
    Acc s = 0;
    for (std::int64_t j = 0; j < inner; ++j)
      s += static_cast<Acc>(a[i * a_row + j * a_col]) * static_cast<Acc>(b[j * b_row + k * b_col]);
    const Acc scaled = scaled_sum(alpha, s);
    out[idx] = static_cast<T>(y0 ? static_cast<Acc>(y0[i * y0_row + k * y0_col]) + scaled : scaled);
  }
};

template <class T, class Acc>
struct dot_element {
  const T* a;
  std::int64_t sa;
  const T* b;
  std::int64_t sb;
  __host__ __device__ Acc operator()(std::int64_t i) const {
    return static_cast<Acc>(a[i * sa]) * static_cast<Acc>(b[i * sb]);
  }
};
template <class T, class Acc>
struct dot_finalize {
  T* out;
  __host__ __device__ void operator()(Acc s) const { *out = static_cast<T>(s); }
};

#ifdef __CUDACC__
// The descriptor stays in parameter space: passed by value to thrust::for_each, the kernel's
// dynamic indexing into it made each thread copy all of it to local memory first. Templates so
// that every translation unit may define them.
template <class Desc>
__global__ void elemwise_kernel(const __grid_constant__ Desc d, std::int64_t total) {
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step)
    elemwise_functor::apply(d, i);
}

template <class Acc, class Finalize>
__global__ void finalize_kernel(const Acc* acc, Finalize finalize) {
  finalize(*acc);
}

// Device scratch for reductions, grown on demand and kept: a reduction then costs two launches and
// no allocation or host round trip. The lock spans the enqueue; the stream orders the use.
struct reduce_scratch {
  std::mutex lock;
  void* data = nullptr;
  std::size_t bytes = 0;
  void* reserve(std::size_t want) {
    if (want > bytes) {
      if (data) cudaFree(data);  // waits for the kernels still using it
      data = nullptr;
      bytes = 0;
      cuda::detail::check(cudaMalloc(&data, want), "cudaMalloc (reduction scratch)", want);
      bytes = want;
    }
    return data;
  }
};
inline reduce_scratch& scratch() {
  static auto* s = new reduce_scratch;  // never destroyed: CUDA may be gone at exit
  return *s;
}

/// Reduces `count` values of `first` with `combine` from `init` on the device, then calls
/// finalize(result) on one device thread to write the output: no host sync.
template <class Acc, class It, class Combine, class Finalize>
void device_reduce(It first, std::int64_t count, Acc init, Combine combine, Finalize finalize) {
  std::size_t temp = 0;
  cuda::detail::check(cub::DeviceReduce::Reduce(nullptr, temp, first, static_cast<Acc*>(nullptr), count, combine, init),
                      "cub::DeviceReduce::Reduce (sizing)");
  constexpr std::size_t acc_bytes = 256;  // keeps the temporary storage aligned
  auto& s = scratch();
  std::lock_guard<std::mutex> hold(s.lock);
  auto* base = static_cast<std::byte*>(s.reserve(acc_bytes + temp));
  auto* acc = reinterpret_cast<Acc*>(base);
  cuda::detail::check(cub::DeviceReduce::Reduce(base + acc_bytes, temp, first, acc, count, combine, init),
                      "cub::DeviceReduce::Reduce");
  finalize_kernel<<<1, 1>>>(acc, finalize);
  cuda::detail::check(cudaGetLastError(), "the reduction's finishing kernel");
}
#endif

// Writes a full reduction's result (the mean divides) in the output's dtype.
template <class Acc>
struct reduce_finalize {
  std::byte* out;
  std::uint8_t out_type;
  bool mean;
  std::int64_t count;
  __host__ __device__ void operator()(Acc acc) const {
    reg v;
    if (mean) store<double>(v, out_type, static_cast<double>(acc) / static_cast<double>(count));
    else store<Acc>(v, out_type, acc);
    store_memory(v, out_type, out);
  }
};

}  // namespace detail

/// Runs an elementwise program over outs[0]'s shape: one kernel for the whole fused node.
inline void run_elemwise(const program& p, const device_instruction* code, const ndarray* const* ins,
                         ndarray* const* outs) {
  const shape_t& shape = outs[0]->shape();
  const std::int64_t total = shape.size();
  if (total == 0) return;
  if (p.n_inputs > max_inputs || static_cast<int>(p.reg_types.size()) > max_registers ||
      static_cast<int>(p.outputs.size()) > max_outputs)
    throw std::logic_error("xsym: a fused node is larger than the GPU kernel's register file");
  elemwise_desc d;
  d.n_in = p.n_inputs;
  d.n_out = static_cast<int>(p.outputs.size());
  d.n_code = static_cast<int>(p.code.size());
  d.rank = shape.rank;
  for (int i = 0; i < shape.rank; ++i) d.shape[i] = shape[i];
  for (int k = 0; k < d.n_in; ++k) {
    d.in[k] = ins[k]->data();
    for (int dim = 0; dim < shape.rank; ++dim)
      d.in_strides[k][dim] = dim >= ins[k]->rank() || ins[k]->shape(dim) == 1 ? 0 : ins[k]->stride(dim);
  }
  for (int o = 0; o < d.n_out; ++o) {
    d.out[o] = outs[o]->data();
    d.out_reg[o] = p.outputs[static_cast<std::size_t>(o)];
  }
  for (std::size_t r = 0; r < p.reg_types.size(); ++r) d.reg_type[r] = static_cast<std::uint8_t>(p.reg_types[r]);
  d.code = code;
#ifdef __CUDACC__
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((total + threads - 1) / threads, 1 << 16);
  detail::elemwise_kernel<<<static_cast<unsigned>(blocks), threads>>>(d, total);
  cuda::detail::check(cudaGetLastError(), "the elementwise kernel's launch");
#else
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(total), detail::elemwise_functor{d});
#endif
}

/// A C-contiguous copy of a device array into `dst` (already allocated on the device).
inline void gather(const ndarray& src, ndarray& dst) {
  if (src.size() == 0) return;
  detail::gather_functor f{};
  f.src = src.data();
  f.dst = dst.data();
  f.rank = src.rank();
  f.size = static_cast<int>(dtype_size(src.type()));
  for (int i = 0; i < src.rank(); ++i) {
    f.shape[i] = src.shape(i);
    f.strides[i] = src.stride(i);
  }
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(src.size()), f);
}

/// Reduces `in` over o.axes into `out` (allocated with the kept dimensions).
inline void run_reduce(const op& o, const ndarray& in, ndarray& out) {
  shape_t kept, red;
  std::int64_t kept_st[max_rank] = {}, red_st[max_rank] = {};
  for (int dim = 0; dim < in.rank(); ++dim) {
    const bool reduced = std::find(o.axes.begin(), o.axes.end(), dim) != o.axes.end();
    if (reduced) {
      red_st[red.rank] = in.stride(dim);
      red[red.rank++] = in.shape(dim);
    } else {
      kept_st[kept.rank] = in.stride(dim);
      kept[kept.rank++] = in.shape(dim);
    }
  }
  const std::int64_t count = red.size();
  // Over bool, max and min are any and all: an empty one is false and true (reduce_functor).
  if (count == 0 && (o.reduction == reduce_op::max || o.reduction == reduce_op::min) && in.type() != dtype::bool_)
    throw shape_error("zero-size array to a reduction (" + std::string(reduce_name(o.reduction)) +
                      ") which has no identity; input shape " + to_string(in.shape()));
  const std::int64_t outputs = out.size();
  if (outputs == 0) return;
  xsym::detail::visit_dtype(in.type(), [&](auto zi) {
    using In = decltype(zi);
    const bool minmax = o.reduction == reduce_op::max || o.reduction == reduce_op::min;
    auto launch = [&](auto acc_zero) {
      using Acc = decltype(acc_zero);
      detail::reduce_functor<In, Acc> f{};
      f.in = in.data_as<In>();
      f.out = out.data();
      f.out_type = static_cast<std::uint8_t>(out.type());
      f.op = static_cast<std::uint8_t>(o.reduction);
      f.kept_rank = kept.rank;
      f.red_rank = red.rank;
      for (int i = 0; i < kept.rank; ++i) {
        f.kept_shape[i] = kept[i];
        f.kept_strides[i] = kept_st[i];
      }
      for (int i = 0; i < red.rank; ++i) {
        f.red_shape[i] = red[i];
        f.red_strides[i] = red_st[i];
      }
      f.count = count;
      if (outputs == 1 && count > 1) {
        // One result: a tree reduction over all threads rather than one thread's loop.
        const bool is_prod = o.reduction == reduce_op::prod;
        Acc init = is_prod ? Acc(1) : Acc(0);
        const detail::reduce_finalize<Acc> finalize{out.data(), f.out_type, o.reduction == reduce_op::mean, count};
#ifdef __CUDACC__
        if (minmax) {  // start from the identity; combine keeps NaN as the loop does
          constexpr bool floating = std::is_floating_point_v<Acc>;
          const Acc low = floating ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::lowest();
          const Acc high = floating ? std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::max();
          init = o.reduction == reduce_op::max ? low : high;
        }
        detail::device_reduce(thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                              detail::reduce_element<In, Acc>{f}),
                              count, init, detail::reduce_combine<In, Acc>{f}, finalize);
#else
        if (minmax) {
          thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                           thrust::counting_iterator<std::int64_t>(1), f);  // out = the whole loop, once
          return;
        }
        const Acc acc = thrust::transform_reduce(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                                                 thrust::counting_iterator<std::int64_t>(count),
                                                 detail::reduce_element<In, Acc>{f}, init,
                                                 detail::reduce_combine<In, Acc>{f});
        finalize(acc);  // device memory is host memory on Thrust's OpenMP system
#endif
        return;
      }
      thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                       thrust::counting_iterator<std::int64_t>(outputs), f);
    };
    if constexpr (std::is_same_v<In, bool>) launch(std::int64_t{});
    else if (minmax) launch(In{});
    else if (o.reduction == reduce_op::mean) launch(double{});  // integers too: an int64 sum would wrap first
    else launch(std::conditional_t<std::is_floating_point_v<In>, double, std::int64_t>{});
  });
}

}  // namespace xsym::gpu

#endif
