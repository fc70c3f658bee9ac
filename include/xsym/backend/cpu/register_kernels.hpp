#ifndef XSYM_BACKEND_CPU_REGISTER_KERNELS_HPP
#define XSYM_BACKEND_CPU_REGISTER_KERNELS_HPP

// Fills the kernel tables of kernel_table.hpp. A table's kernels are compiled into a program
// only where the program makes an expression of its element type: detail::use_element_type<T>,
// which var<T, N> calls, is what instantiates them.

#include "../../config/linkage.hpp"
#include "blas.hpp"
#include "elemwise.hpp"
#include "fault.hpp"
#include "kernel_table.hpp"
#include "one_pass.hpp"
#include "reduce.hpp"
#include "reduce_fused.hpp"

namespace xsym::cpu {

namespace detail {
template <class T>
const typed_kernels& make_typed_kernels() {
  static const typed_kernels table = [] {
    typed_kernels k;
    k.type = dtype_of<T>();
    k.elementwise[0] = &elementwise_kernel<T, false>;
    k.elementwise[1] = &elementwise_kernel<T, true>;
    k.select = &select<T>;
    k.convert_to[static_cast<int>(dtype::bool_)] = &convert<T, bool>;
    k.convert_to[static_cast<int>(dtype::int32)] = &convert<T, std::int32_t>;
    k.convert_to[static_cast<int>(dtype::int64)] = &convert<T, std::int64_t>;
    k.convert_to[static_cast<int>(dtype::float32)] = &convert<T, float>;
    k.convert_to[static_cast<int>(dtype::float64)] = &convert<T, double>;
    if constexpr (std::is_floating_point_v<T>) {
      k.chain = &chain<T>;
      k.chains = &chain_loop<T, false>;
      k.chain_one = &chain_one<T>;
      k.shared_exp = &shared_exp_kernel_for<T>;
      k.one_pass = &one_pass_typed<T>;
      k.one_pass_blocks = &one_pass_blocks_typed<T>;
      k.reduce_block = &reduce_block_typed<T>;
      k.sum_program = &sum_program<T>;
    }
    if constexpr (!std::is_same_v<T, bool>) {
      k.gemv = &gemv_typed<T>;
      k.dot = &dot_typed<T>;
      k.dot22 = &dot22_typed<T>;
    }
    k.reduce = &reduce_typed<T>;
    return k;
  }();
  return table;
}

template <class T>
void register_kernels() {
  install_kernels(dtype_of<T>(), &make_typed_kernels<T>());  // fault.hpp: the table, or its faulty copy
}
}  // namespace detail

/// @brief Registers the kernels of every element type (the compiled runtime, which serves any
/// program, and tests that drive kernels without building expressions).
inline void register_all_kernels() {
  detail::register_kernels<bool>();
  detail::register_kernels<std::int32_t>();
  detail::register_kernels<std::int64_t>();
  detail::register_kernels<float>();
  detail::register_kernels<double>();
}

}  // namespace xsym::cpu

namespace xsym::detail {
// Declared in expr/dtype.hpp. bool comes with every type: comparisons and switch conditions
// make bool values out of any other. With XSYM_COMPILED_LIB the runtime registers every type
// (function_runtime's constructor) and a program's files compile none.
template <class T>
void use_element_type() {
#ifndef XSYM_COMPILED_LIB
  static const bool registered = (cpu::detail::register_kernels<T>(), cpu::detail::register_kernels<bool>(), true);
  (void)registered;
#endif
}
}  // namespace xsym::detail

#endif
