#ifndef XSYM_BACKEND_CPU_KERNEL_TABLE_HPP
#define XSYM_BACKEND_CPU_KERNEL_TABLE_HPP

#include <atomic>
#include <stdexcept>
#include <string>

#include "../../config/cold.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "parallel.hpp"
#include "chain_kernels.hpp"

namespace xsym::cpu {

struct compiled_program;  // program.hpp
namespace detail {
struct reduce_layout;     // reduce.hpp
struct one_pass_rows_fn;  // one_pass.hpp
}

/// @brief Every CPU kernel for one element type T, looked up by dtype when a function is built
/// (and by the products and reductions per call).
///
/// A program holds the tables of the element types its expressions have: var<T, N> registers
/// T's (and bool's) when it is made, see register_kernels.hpp. So a float32 program compiles no
/// int32, int64 or float64 kernel, a fifth of the time it takes to compile. A null entry is an
/// op T has no kernel for (arithmetic on bool, exp on an integer type, products of bools).
struct typed_kernels {
  dtype type = dtype::float64;
  kernel_fn (*elementwise[2])(scalar_op) = {nullptr, nullptr};  // [0]: reference loops, [1]: vectorized
  kernel_fn select = nullptr;                                   // switch, its values of type T
  kernel_fn convert_to[5] = {};                                 // cast from T, by the target dtype
  // float32 and float64 only:
  detail::chain_fn chain = nullptr;
  detail::chains_fn chains = nullptr;
  void (*chain_one)(void* dst, const void* const* args, std::uint32_t codes, int links) = nullptr;
  kernel_fn (*shared_exp)(detail::shared_exp_kernel) = nullptr;
  // Not bool: y = beta y0 + alpha op(A) x with A's strides (rs, cs) already resolved (blas.hpp).
  void (*gemv)(const ndarray& a, std::int64_t rs, std::int64_t cs, const ndarray& x, ndarray& y, std::int64_t m,
               std::int64_t k, double alpha, bool accumulate, const ndarray* y0, double beta,
               const parallelism& par) = nullptr;
  void (*dot)(const ndarray& a, const ndarray& b, ndarray& out) = nullptr;
  void (*dot22)(const ndarray& a, const ndarray& b, ndarray& c, double alpha, bool accumulate) = nullptr;
  // float32 and float64: y = beta y0 + alpha Aᵀ g in one pass over A's rows (one_pass.hpp).
  void (*one_pass)(const ndarray& a, const ndarray& x, const detail::one_pass_rows_fn& rows, const ndarray& g,
                   double alpha, const ndarray* y0, double beta, ndarray& y, int threads) = nullptr;
  // The same product by blocks of 4 rows, A read once from L1, where A stays in the caches
  // and g's kernel is compiled (one_pass.hpp's one_pass_blocks).
  void (*one_pass_blocks)(const ndarray& a, const ndarray& x, const detail::one_pass_rows_fn& rows, const ndarray& g,
                          double alpha, const ndarray* y0, double beta, ndarray& y, int threads) = nullptr;
  // Reductions of an input of type T (any dtype), into an output of any dtype.
  void (*reduce)(const op& o, const detail::reduce_layout& l, const ndarray& in, ndarray& out) = nullptr;
  // float32 and float64, a reduction's fused program (reduce_fused.hpp): a block of the
  // reduction combined into acc, and the sum of the program's values over one long row.
  void (*reduce_block)(const op& o, const ndarray& block, ndarray& acc, ndarray& part, bool first) = nullptr;
  double (*sum_program)(const compiled_program& cp, const ndarray* const* ins, int n_in, ndarray& value,
                        std::int64_t n) = nullptr;
};

namespace detail {
inline std::atomic<const typed_kernels*>& kernel_slot(dtype d) {
  static std::atomic<const typed_kernels*> slots[5] = {};  // constant-initialized: no guard per call
  return slots[static_cast<int>(d)];
}

XSYM_COLD_BEGIN  // the error path
[[noreturn]] inline void throw_no_kernels(dtype d) {
  throw std::logic_error("xsym: this program has no CPU kernels for " + std::string(dtype_name(d)) +
                         ": no xsym expression of that element type was made in it, yet a graph node has it "
                         "(an xsym bug: please report the expression)");
}
XSYM_COLD_END
}  // namespace detail

/// @brief The kernels for element type d; throws when the program registered none for it.
inline const typed_kernels& kernels_of(dtype d) {
  const typed_kernels* k = detail::kernel_slot(d).load(std::memory_order_acquire);
  if (!k) [[unlikely]] detail::throw_no_kernels(d);
  return *k;
}

/// @brief Whether the program has the kernels of element type d.
inline bool has_kernels(dtype d) { return detail::kernel_slot(d).load(std::memory_order_acquire) != nullptr; }

XSYM_COLD_BEGIN  // kernels are looked up when a function is built
/// @brief The kernel for one instruction; Simd=false gives the reference (plain scalar) loops.
template <bool Simd>
kernel_fn kernel_for(const instruction& ins) {
  kernel_fn k = nullptr;
  switch (ins.op) {
    case scalar_op::switch_: k = kernels_of(ins.out_type).select; break;
    case scalar_op::cast:
    case scalar_op::identity: k = kernels_of(ins.in_type).convert_to[static_cast<int>(ins.out_type)]; break;
    default: k = kernels_of(ins.in_type).elementwise[Simd ? 1 : 0](ins.op); break;
  }
  if (!k)
    throw std::logic_error("xsym: no CPU kernel for " + std::string(info(ins.op).name) + " on " +
                           std::string(dtype_name(ins.in_type)));
  return k;
}
XSYM_COLD_END

}  // namespace xsym::cpu

#endif
