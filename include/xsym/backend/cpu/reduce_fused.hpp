#ifndef XSYM_BACKEND_CPU_REDUCE_FUSED_HPP
#define XSYM_BACKEND_CPU_REDUCE_FUSED_HPP

// A reduction's fused program summed over one long row without its values going through an
// array of their own (careduce_fusion; exec/cpu_nodes.hpp, reduce_fused_node): the program
// fills a buffer a block at a time and sum_values reads it, in sum_contiguous's order.
#include <algorithm>
#include <array>
#include <cstdint>

#include "../../config/limits.hpp"
#include "elemwise.hpp"
#include "reduce.hpp"

namespace xsym::cpu {
namespace detail {

// The program's values for sum_values, computed `value.size()` elements at a time into
// `value` from flat views of the inputs (whole C-ordered arrays or one value).
template <class T>
struct program_values {
  const compiled_program& prog;
  const ndarray* const* ins;
  int n_in;
  ndarray& value;
  std::int64_t n;
  std::int64_t at = 0, filled = 0;  // value holds elements [at, at + filled)
  const T* from(std::int64_t i, std::int64_t want) {
    if (i < at || i + want > at + filled) {
      const std::int64_t m = std::min(value.size(), n - i);
      ndarray views[limits::max_registers];
      const ndarray* vins[limits::max_registers] = {};
      const std::array<std::int64_t, max_rank> unit{1};
      for (int k = 0; k < n_in; ++k) {
        vins[k] = ins[k];
        if (ins[k]->size() == 1) continue;
        views[k] = ins[k]->view_at(i, shape_t{{m}, 1}, unit);
        vins[k] = &views[k];
      }
      ndarray v = value.view(shape_t{{m}, 1}, unit);
      ndarray* outs[1] = {&v};
      run_program(prog, vins, outs);
      at = i;
      filled = m;
    }
    return value.template data_as<T>() + (i - at);
  }
  const T* block(std::int64_t i) { return from(i, sum_block); }
  const T* rest(std::int64_t i, std::int64_t end) { return from(i, end - i); }
};

/// The sum in double of program cp's values over n elements, `value` (a C-contiguous buffer of
/// T whose size is a multiple of sum_block) holding a block of them at a time.
template <class T>
double sum_program(const compiled_program& cp, const ndarray* const* ins, int n_in, ndarray& value, std::int64_t n) {
  program_values<T> v{cp, ins, n_in, value, n};
  return sum_values<T>(v, n);
}

}  // namespace detail
}  // namespace xsym::cpu

#endif
