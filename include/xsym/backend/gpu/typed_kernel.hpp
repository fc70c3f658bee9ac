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
#include <string>

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

// Tree's value at one element: leaf j is get.template leaf<j>() (an element of an input).
template <class Tree, int J>
struct typed_device_eval {  // a leaf or a number: an input of the program
  template <class T, class Get>
  __host__ __device__ static T at(const Get& get) {
    return get.template leaf<J>();
  }
};
template <scalar_op S, class A, int J>
struct typed_device_eval<tree::apply<S, A>, J> {
  template <class T, class Get>
  __host__ __device__ static T at(const Get& get) {
    const T x = typed_device_eval<A, J>::template at<T>(get);
    return typed_value<S, T>(x, x);
  }
};
template <scalar_op S, class A, class B, int J>
struct typed_device_eval<tree::apply<S, A, B>, J> {
  template <class T, class Get>
  __host__ __device__ static T at(const Get& get) {
    return typed_value<S, T>(typed_device_eval<A, J>::template at<T>(get),
                             typed_device_eval<B, J + A::leaves>::template at<T>(get));
  }
};

// Leaf j at in[j][off[j]].
template <class T>
struct element_at {
  const T* const* in;
  const std::int64_t* off;
  template <int J>
  __host__ __device__ T leaf() const { return in[J][off[J]]; }
};
// Leaf j's value in lane K of the values loaded for W consecutive elements.
template <class T, int L, int W, int K>
struct lane_at {
  const T (&v)[L][W];
  template <int J>
  __host__ __device__ T leaf() const { return v[J][K]; }
};

// W consecutive elements in one 16-byte load or store.
template <class T, int W>
struct alignas(16) pack {
  T v[W];
};

/// What a typed kernel reads, passed by value: leaf j's data and strides (0 where it broadcasts).
template <class T, int L>
struct typed_desc {
  int rank = 0;
  std::int64_t packs = 0;  // packed path: elements [0, packs * W) in packs of W, then one thread per element
  std::int64_t shape[max_rank] = {};
  const T* in[L] = {};
  std::int64_t strides[L][max_rank] = {};
  std::int64_t step[L] = {};  // flat: leaf j's offset is i * step[j] (1, or 0 for one value)
  T* out = nullptr;
};

enum class typed_path { strided, flat, packed };

template <class Tree, typed_path Path>
struct typed_functor {
  using T = typename Tree::value_type;
  static constexpr int L = Tree::leaves;
  static constexpr int W = 16 / static_cast<int>(sizeof(T));
  typed_desc<T, L> d;
  __host__ __device__ void operator()(std::int64_t i) const { apply(d, i); }
  __host__ __device__ static void element(const typed_desc<T, L>& d, std::int64_t i) {
    std::int64_t off[L];
    if constexpr (Path == typed_path::strided) {
      for (int j = 0; j < L; ++j) off[j] = 0;
      std::int64_t rem = i;
      for (int dim = d.rank - 1; dim >= 0; --dim) {
        const std::int64_t idx = rem % d.shape[dim];
        rem /= d.shape[dim];
        for (int j = 0; j < L; ++j) off[j] += idx * d.strides[j][dim];
      }
    } else {
      for (int j = 0; j < L; ++j) off[j] = i * d.step[j];
    }
    d.out[i] = typed_device_eval<Tree, 0>::template at<T>(element_at<T>{d.in, off});
  }
  template <int K>
  __host__ __device__ static void lanes(const T (&v)[L][W], pack<T, W>& r) {
    if constexpr (K < W) {
      r.v[K] = typed_device_eval<Tree, 0>::template at<T>(lane_at<T, L, W, K>{v});
      lanes<K + 1>(v, r);
    }
  }
  // Item i < packs: elements [i * W, i * W + W) from 16-byte loads; after them, one element each.
  __host__ __device__ static void apply(const typed_desc<T, L>& d, std::int64_t i) {
    if constexpr (Path == typed_path::packed) {
      if (i >= d.packs) {
        element(d, d.packs * W + (i - d.packs));
        return;
      }
      T v[L][W];
      for (int j = 0; j < L; ++j) {
        if (d.step[j] == 0) {
          const T one = d.in[j][0];
          for (int k = 0; k < W; ++k) v[j][k] = one;
        } else {
          const pack<T, W> p = reinterpret_cast<const pack<T, W>*>(d.in[j])[i];
          for (int k = 0; k < W; ++k) v[j][k] = p.v[k];
        }
      }
      pack<T, W> r;
      lanes<0>(v, r);
      reinterpret_cast<pack<T, W>*>(d.out)[i] = r;
    } else {
      element(d, i);
    }
  }
};

#ifdef __CUDACC__
template <class Tree, typed_path Path, class Desc>
__global__ void typed_kernel(const __grid_constant__ Desc d, std::int64_t total) {
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step)
    typed_functor<Tree, Path>::apply(d, i);
}
#endif

// `items` threads' worth of work: elements, or packs and the elements after them.
template <class Tree, typed_path Path>
void launch_typed(const typed_desc<typename Tree::value_type, Tree::leaves>& d, std::int64_t items) {
#ifdef __CUDACC__
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((items + threads - 1) / threads, 1 << 16);
  typed_kernel<Tree, Path><<<static_cast<unsigned>(blocks), threads>>>(d, items);
  cuda::detail::check(cudaGetLastError(), "a typed tree's kernel launch");
#else
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(items), typed_functor<Tree, Path>{d});
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
      same = same && st == out.stride(dim);  // out is C-contiguous
      one = one && st == 0;
    }
    d.step[j] = one ? 0 : 1;
    flat = flat && (same || one);
  }
  d.out = out.data_as<T>();
  if (!flat) return launch_typed<Tree, typed_path::strided>(d, total);
  // Packs of 16 bytes where every array the kernel reads or writes starts on 16 bytes.
  constexpr int W = 16 / static_cast<int>(sizeof(T));
  bool aligned = reinterpret_cast<std::uintptr_t>(d.out) % 16 == 0;
  for (int j = 0; j < L; ++j) aligned = aligned && (d.step[j] == 0 || reinterpret_cast<std::uintptr_t>(d.in[j]) % 16 == 0);
  if (!aligned || total < W) return launch_typed<Tree, typed_path::flat>(d, total);
  d.packs = total / W;
  launch_typed<Tree, typed_path::packed>(d, d.packs + total % W);
}

using typed_launch = void (*)(const ndarray* const* ins, const std::uint8_t* map, ndarray& out);

struct typed_entry {
  std::string pattern;  // the tree's text, each leaf written i#
  dtype type;
  typed_launch run;
  int leaves;
};

/// A bound tree's kernel: what the node's thunk keeps.
struct typed_state {
  typed_launch run = nullptr;
  std::array<std::uint8_t, 64> map{};
};

XSYM_COLD_BEGIN
/// The registered tree whose text is the program's; null where none is.
inline std::shared_ptr<typed_state> find_typed_kernel(const program& p) {
  auto s = std::make_shared<typed_state>();
  const auto e = cpu::detail::tree_registry<typed_entry>::instance().find(p, s->map.data());
  if (!e) return nullptr;
  s->run = e->run;
  return s;
}
XSYM_COLD_END
}  // namespace detail

namespace detail {
// Registered when the program starts, as the CPU's (backend/cpu/typed_kernel.hpp).
template <class Tree>
struct typed_registration {
  static inline const bool done = (cpu::detail::tree_registry<typed_entry>::instance().add(
                                       {tree_pattern<Tree>(), dtype_of<typename Tree::value_type>(), &run_typed<Tree>, Tree::leaves}),
                                   true);
};
}  // namespace detail

/// @brief Compiles Tree's device kernel into the program, registered at its start.
template <class Tree>
void use_typed_kernel() {
  if constexpr (Tree::leaves <= 64) (void)detail::typed_registration<Tree>::done;  // as on the CPU
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
