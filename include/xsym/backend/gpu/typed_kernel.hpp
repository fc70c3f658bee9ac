#ifndef XSYM_BACKEND_GPU_TYPED_KERNEL_HPP
#define XSYM_BACKEND_GPU_TYPED_KERNEL_HPP

// The device kernel of a typed tree (expr/typed.hpp): one thread computes the whole tree for its
// element from the op table's expressions, every intermediate a local value, with no program
// and no per-element interpreter. Instantiated where a program that includes <xsym/gpu.hpp>
// hands the tree to function() (through use_device_kernel below), registered under the tree's
// text, and bound by the GPU linker to a fused program with that text, as the CPU's typed
// kernels are (backend/cpu/typed_kernel.hpp).
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../config/cold.hpp"
#include "../../expr/typed.hpp"
#include "../cpu/typed_kernel.hpp"
#include "kernels.hpp"

namespace xsym::gpu {

namespace detail {

// Op S's value on one element, from the op table's expression (as the interpreter's execute()).
// Sums, differences and products round each result: nvcc would otherwise contract a product
// and the sum that reads it into one fused multiply-add, which the separate kernels never do.
template <scalar_op S, class T>
__host__ __device__ inline T typed_value(T a, [[maybe_unused]] T b) {
  using X = T;
#ifdef __CUDA_ARCH__
  if constexpr (S == scalar_op::add) {
    if constexpr (std::is_same_v<T, float>) return __fadd_rn(a, b);
    else return __dadd_rn(a, b);
  } else if constexpr (S == scalar_op::sub) {
    if constexpr (std::is_same_v<T, float>) return __fsub_rn(a, b);
    else return __dsub_rn(a, b);
  } else if constexpr (S == scalar_op::mul) {
    if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, b);
    else return __dmul_rn(a, b);
  } else if constexpr (S == scalar_op::sqr) {
    if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, a);
    else return __dmul_rn(a, a);
  } else
#endif
#define XSYM_GPU_TYPED_VALUE(S_, ...) \
  if constexpr (S == scalar_op::S_) return T(__VA_ARGS__); else
#define XSYM_GPU_TYPED_wrapping XSYM_GPU_TYPED_VALUE
#define XSYM_GPU_TYPED_any XSYM_GPU_TYPED_VALUE
#define XSYM_GPU_TYPED_floating XSYM_GPU_TYPED_VALUE
#define XSYM_GPU_TYPED_comparison(S_, ...)
#define XSYM_GPU_TYPED_bitwise(S_, ...)
#define XSYM_GPU_TYPED_special(S_, ...)
#define XSYM_GPU_TYPED_CASE(S_, name, arity, infix, family, flops, derivative, ...) \
  XSYM_GPU_TYPED_##family(S_, __VA_ARGS__)
  XSYM_OP_TABLE(XSYM_GPU_TYPED_CASE)
#undef XSYM_GPU_TYPED_CASE
#undef XSYM_GPU_TYPED_special
#undef XSYM_GPU_TYPED_bitwise
#undef XSYM_GPU_TYPED_comparison
#undef XSYM_GPU_TYPED_floating
#undef XSYM_GPU_TYPED_any
#undef XSYM_GPU_TYPED_wrapping
#undef XSYM_GPU_TYPED_VALUE
  return a;  // not reached: typed trees hold arithmetic ops only (typed_op_v)
}

// Tree's value at one element; J is the index of its first leaf, leaf j at in[j][off[j]].
template <class Tree, int J>
struct typed_device_eval {  // a leaf or a number: an input of the program
  template <class T>
  __host__ __device__ static T at(const T* const* in, const std::int64_t* off) {
    return in[J][off[J]];
  }
};
template <scalar_op S, class A, int J>
struct typed_device_eval<tree::apply<S, A>, J> {
  template <class T>
  __host__ __device__ static T at(const T* const* in, const std::int64_t* off) {
    const T x = typed_device_eval<A, J>::at(in, off);
    return typed_value<S, T>(x, x);
  }
};
template <scalar_op S, class A, class B, int J>
struct typed_device_eval<tree::apply<S, A, B>, J> {
  template <class T>
  __host__ __device__ static T at(const T* const* in, const std::int64_t* off) {
    return typed_value<S, T>(typed_device_eval<A, J>::at(in, off), typed_device_eval<B, J + A::leaves>::at(in, off));
  }
};

/// What a typed kernel reads, passed by value: leaf j's data and strides (0 where it broadcasts).
template <class T, int L>
struct typed_desc {
  int rank = 0;
  std::int64_t shape[max_rank] = {};
  const T* in[L] = {};
  std::int64_t strides[L][max_rank] = {};
  std::int64_t step[L] = {};  // flat: leaf j's offset is i * step[j] (1, or 0 for one value)
  T* out = nullptr;
};

template <class Tree, bool Flat>
struct typed_functor {
  using T = typename Tree::value_type;
  static constexpr int L = Tree::leaves;
  typed_desc<T, L> d;
  __host__ __device__ void operator()(std::int64_t i) const { apply(d, i); }
  __host__ __device__ static void apply(const typed_desc<T, L>& d, std::int64_t i) {
    std::int64_t off[L];
    if constexpr (Flat) {
      for (int j = 0; j < L; ++j) off[j] = i * d.step[j];
    } else {
      for (int j = 0; j < L; ++j) off[j] = 0;
      std::int64_t rem = i;
      for (int dim = d.rank - 1; dim >= 0; --dim) {
        const std::int64_t idx = rem % d.shape[dim];
        rem /= d.shape[dim];
        for (int j = 0; j < L; ++j) off[j] += idx * d.strides[j][dim];
      }
    }
    d.out[i] = typed_device_eval<Tree, 0>::at(d.in, off);
  }
};

#ifdef __CUDACC__
template <class Tree, bool Flat, class Desc>
__global__ void typed_kernel(const __grid_constant__ Desc d, std::int64_t total) {
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step)
    typed_functor<Tree, Flat>::apply(d, i);
}
#endif

template <class Tree, bool Flat>
void launch_typed(const typed_desc<typename Tree::value_type, Tree::leaves>& d, std::int64_t total) {
#ifdef __CUDACC__
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((total + threads - 1) / threads, 1 << 16);
  typed_kernel<Tree, Flat><<<static_cast<unsigned>(blocks), threads>>>(d, total);
  cuda::detail::check(cudaGetLastError(), "a typed tree's kernel launch");
#else
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(total), typed_functor<Tree, Flat>{d});
#endif
}

/// Runs Tree over out's shape: leaf j reads ins[map[j]]; out is C-contiguous on the device.
template <class Tree>
void run_typed(const ndarray* const* ins, const std::uint8_t* map, ndarray& out) {
  using T = typename Tree::value_type;
  constexpr int L = Tree::leaves;
  const shape_t& shape = out.shape();
  const std::int64_t total = shape.size();
  if (total == 0) return;
  typed_desc<T, L> d;
  d.rank = shape.rank;
  for (int i = 0; i < shape.rank; ++i) d.shape[i] = shape[i];
  std::int64_t c_stride[max_rank] = {};
  std::int64_t s = 1;
  for (int dim = shape.rank - 1; dim >= 0; --dim) {
    c_stride[dim] = s;
    s *= shape[dim];
  }
  // Flat where every leaf is laid out as the output (step 1) or is one value (step 0).
  bool flat = true;
  for (int j = 0; j < L; ++j) {
    const ndarray& a = *ins[map[j]];
    d.in[j] = a.data_as<const T>();
    bool same = true, one = true;
    for (int dim = 0; dim < shape.rank; ++dim) {
      const std::int64_t st = dim >= a.rank() || a.shape(dim) == 1 ? 0 : a.stride(dim);
      d.strides[j][dim] = st;
      if (shape[dim] == 1) continue;
      same = same && st == c_stride[dim];
      one = one && st == 0;
    }
    d.step[j] = one ? 0 : 1;
    flat = flat && (same || one);
  }
  d.out = out.data_as<T>();
  if (flat) launch_typed<Tree, true>(d, total);
  else launch_typed<Tree, false>(d, total);
}

using typed_launch = void (*)(const ndarray* const* ins, const std::uint8_t* map, ndarray& out);

struct typed_entry {
  std::string pattern;  // the tree's text, each leaf written i#
  dtype type;
  typed_launch run;
  int leaves;
};
inline std::vector<typed_entry>& typed_registry() {
  static std::vector<typed_entry> r;
  return r;
}
inline std::mutex& typed_registry_mutex() {
  static std::mutex m;
  return m;
}

/// A bound tree's kernel: what the node's thunk keeps.
struct typed_state {
  typed_launch run = nullptr;
  std::array<std::uint8_t, 64> map{};
};

XSYM_COLD_BEGIN
/// The registered tree whose text is the program's (one output, two steps or more, every
/// register of the tree's element type); null where none is.
inline std::shared_ptr<typed_state> find_typed_kernel(const program& p) {
  if (p.outputs.size() != 1 || p.code.size() < 2 || p.n_inputs > 64 || p.reg_types.empty()) return nullptr;
  const dtype t = p.reg_types[0];
  for (dtype r : p.reg_types)
    if (r != t) return nullptr;
  std::lock_guard lock(typed_registry_mutex());
  for (const typed_entry& e : typed_registry()) {
    if (e.type != t) continue;
    auto s = std::make_shared<typed_state>();
    if (!cpu::detail::match_tree(e.pattern, p.text, s->map.data(), e.leaves)) continue;
    for (int j = 0; j < e.leaves; ++j)
      if (s->map[static_cast<std::size_t>(j)] >= p.n_inputs) return nullptr;
    s->run = e.run;
    return s;
  }
  return nullptr;
}
XSYM_COLD_END
}  // namespace detail

/// @brief Registers Tree's device kernel (once per program).
template <class Tree>
void use_typed_kernel() {
  static const bool once = [] {
    std::lock_guard lock(detail::typed_registry_mutex());
    detail::typed_registry().push_back(
        {tree_pattern<Tree>(), dtype_of<typename Tree::value_type>(), &detail::run_typed<Tree>, Tree::leaves});
    return true;
  }();
  (void)once;
}

}  // namespace xsym::gpu

namespace xsym::detail {
/// function() asks for every typed tree's kernels with use_device_kernel(kernel_request<Tree>{}, 0)
/// (compile/function.hpp); found by argument-dependent lookup where function() is instantiated,
/// this overload makes a program that includes <xsym/gpu.hpp> instantiate the device kernel too.
template <class Tree>
void use_device_kernel(kernel_request<Tree>, int) {
  gpu::use_typed_kernel<Tree>();
}
}  // namespace xsym::detail

#endif
