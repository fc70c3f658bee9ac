#ifndef XSYM_BACKEND_CPU_ELEMWISE_HPP
#define XSYM_BACKEND_CPU_ELEMWISE_HPP

#include <cstring>
#include <memory>
#include <vector>

#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "scalar_kernels.hpp"

namespace xsym::cpu {

/// @brief A program with its kernels looked up once, when the function is built.
struct compiled_program {
  std::shared_ptr<const program> prog;
  std::vector<kernel_fn> kernels;
  std::vector<int> arity;  // per instruction, looked up once
  bool direct = false;     // one instruction writing the only output: no scratch needed
};

template <bool Simd>
compiled_program compile_program(std::shared_ptr<const program> p) {
  compiled_program cp;
  for (const auto& ins : p->code) {
    cp.kernels.push_back(kernel_for<Simd>(ins));
    cp.arity.push_back(info(ins.op).arity);
  }
  cp.direct = p->code.size() == 1 && p->outputs.size() == 1 && p->outputs[0] == p->code[0].dst;
  cp.prog = std::move(p);
  return cp;
}

/// @brief The output shape of an elementwise op, with Theano's rule: a dimension broadcasts
/// only where its input is statically broadcastable (always 1); others must match exactly.
inline shape_t broadcast_shape(const ndarray* const* ins, const std::uint8_t* bcast, int n) {
  shape_t out;
  out.rank = ins[0]->rank();
  for (int d = 0; d < out.rank; ++d) {
    int first = -1;
    out[d] = 1;
    for (int k = 0; k < n; ++k) {
      const std::int64_t s = ins[k]->shape(d);
      if ((bcast[k] >> d) & 1u) {
        if (s != 1)
          throw shape_error("input " + std::to_string(k) + " is broadcastable in dimension " + std::to_string(d) +
                            " but has shape " + to_string(ins[k]->shape()));
        continue;
      }
      if (first < 0) {
        first = k;
        out[d] = s;
      } else if (s != out[d]) {
        std::string msg = "shapes do not match: ";
        for (int j = 0; j < n; ++j)
          msg += (j ? ", " : "") + std::string("input ") + std::to_string(j) + " has shape " + to_string(ins[j]->shape());
        msg += " (dimension " + std::to_string(d) + ": " + std::to_string(out[d]) + " vs " + std::to_string(s) + ")";
        if (s == 1 || out[d] == 1)
          msg += "; a dimension of size 1 broadcasts only when it is declared broadcastable "
                 "(xsym::row, xsym::col, xsym::tensor<T, N>(name, {...}) or dimshuffle 'x')";
        throw shape_error(msg);
      }
    }
  }
  return out;
}

namespace detail {
constexpr std::int64_t block_size = 256;  // elements per register: registers stay in L1

struct scratch {
  std::vector<double> regs;  // double-sized slots fit every dtype
};
inline scratch& thread_scratch() {
  thread_local scratch s;
  return s;
}

// Runs the program over n elements; inputs either advance with i (stride 1) or are one value.
inline void run_span(const compiled_program& cp, const std::byte* const* in, const bool* in_scalar,
                     std::byte* const* out, std::int64_t n) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  const void* args[3];
  if (cp.direct) {
    const instruction& ins = p.code[0];
    unsigned mask = 0;
    for (int j = 0; j < cp.arity[0]; ++j) {
      args[j] = in[ins.args[j]];
      if (in_scalar[ins.args[j]]) mask |= 1u << j;
    }
    cp.kernels[0](out[0], args, mask, n);
    return;
  }
  const auto n_regs = p.reg_types.size();
  auto& sc = thread_scratch();
  if (sc.regs.size() < n_regs * block_size) sc.regs.resize(n_regs * block_size);
  const void* reg[64];
  void* tmp[64];
  for (std::size_t r = static_cast<std::size_t>(n_in); r < n_regs; ++r) {
    tmp[r] = sc.regs.data() + r * block_size;
    reg[r] = tmp[r];
  }
  for (std::int64_t off = 0; off < n; off += block_size) {
    const std::int64_t m = std::min(block_size, n - off);
    for (int r = 0; r < n_in; ++r)
      reg[r] = in_scalar[r] ? in[r] : in[r] + off * static_cast<std::int64_t>(dtype_size(p.reg_types[static_cast<std::size_t>(r)]));
    for (std::size_t i = 0; i < p.code.size(); ++i) {
      const instruction& ins = p.code[i];
      unsigned mask = 0;
      for (int j = 0; j < cp.arity[i]; ++j) {
        args[j] = reg[ins.args[j]];
        if (ins.args[j] < n_in && in_scalar[ins.args[j]]) mask |= 1u << j;
      }
      cp.kernels[i](tmp[ins.dst], args, mask, m);
    }
    for (std::size_t o = 0; o < p.outputs.size(); ++o) {
      const auto es = static_cast<std::int64_t>(dtype_size(p.reg_types[static_cast<std::size_t>(p.outputs[o])]));
      std::memcpy(out[o] + off * es, reg[p.outputs[o]], static_cast<std::size_t>(m * es));
    }
  }
}
}  // namespace detail

/// @brief Runs a fused elementwise program; outputs are C-contiguous with the broadcast shape.
inline void run_program(const compiled_program& cp, const ndarray* const* ins, ndarray* const* outs) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  const shape_t& shape = outs[0]->shape();
  const std::int64_t total = shape.size();
  if (total == 0) return;
  if (static_cast<int>(p.reg_types.size()) > 64) throw std::logic_error("xsym: fused program too large");

  // Contiguous copies of strided inputs, in buffers kept per thread between calls.
  thread_local std::vector<ndarray> copies;
  std::size_t n_copies = 0;
  const std::byte* base[64];
  bool scalar[64];
  std::array<std::int64_t, max_rank> strides[64];
  bool flat = true;
  for (int k = 0; k < n_in; ++k) {
    const ndarray* a = ins[k];
    if (a->size() != 1 && a->rank() > 0 && a->stride(a->rank() - 1) != 1 && a->shape(a->rank() - 1) != 1) {
      if (copies.size() <= n_copies) copies.resize(n_copies + 8);
      ndarray& c = copies[n_copies++];
      a->copy_contiguous_into(c);
      a = &c;
    }
    base[k] = a->data();
    scalar[k] = a->size() == 1;
    for (int d = 0; d < shape.rank; ++d)
      strides[k][static_cast<std::size_t>(d)] = a->shape(d) == 1 ? 0 : a->stride(d);
    if (!scalar[k] && !(a->shape() == shape && a->is_c_contiguous())) flat = false;
  }
  std::byte* out_base[8];
  for (std::size_t o = 0; o < p.outputs.size(); ++o) out_base[o] = outs[o]->data();
  if (flat) {
    detail::run_span(cp, base, scalar, out_base, total);
    return;
  }
  // Row by row over the last axis; an input either walks the row (stride 1) or repeats one value.
  const std::int64_t len = shape[shape.rank - 1];
  const std::int64_t rows = total / len;
  bool row_scalar[64];
  const std::byte* row_in[64];
  std::byte* row_out[8];
  for (int k = 0; k < n_in; ++k) row_scalar[k] = strides[k][static_cast<std::size_t>(shape.rank - 1)] == 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t rem = r;
    for (int k = 0; k < n_in; ++k) row_in[k] = base[k];
    for (int d = shape.rank - 2; d >= 0; --d) {
      const std::int64_t i = rem % shape[d];
      rem /= shape[d];
      for (int k = 0; k < n_in; ++k)
        row_in[k] += i * strides[k][static_cast<std::size_t>(d)] *
                     static_cast<std::int64_t>(dtype_size(p.reg_types[static_cast<std::size_t>(k)]));
    }
    for (std::size_t o = 0; o < p.outputs.size(); ++o)
      row_out[o] = out_base[o] + r * len * static_cast<std::int64_t>(dtype_size(outs[o]->type()));
    detail::run_span(cp, row_in, row_scalar, row_out, len);
  }
}

}  // namespace xsym::cpu

#endif
