#ifndef XSYM_BACKEND_CPU_ELEMWISE_HPP
#define XSYM_BACKEND_CPU_ELEMWISE_HPP

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../../config/cold.hpp"
#include "../../config/limits.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "caches.hpp"
#include "fault.hpp"
#include "kernel_table.hpp"
#include "program.hpp"
#include "parallel.hpp"
#include "chain_kernels.hpp"

namespace xsym::cpu {

namespace detail {
// broadcast_shape's checks done again dimension by dimension, to throw the error it describes.
[[noreturn]] inline void throw_broadcast_error(const ndarray* const* ins, const std::uint8_t* bcast, int n);
}  // namespace detail

/// @brief The output shape of an elementwise op, with Theano's rule: a dimension broadcasts
/// only where its input is statically broadcastable (always 1); others must match exactly.
inline shape_t broadcast_shape(const ndarray* const* ins, const std::uint8_t* bcast, int n) {
  // One pass over the inputs; any mismatch goes to the slow path for its exact message.
  const int rank = ins[0]->rank();
  shape_t out;
  out.rank = rank;
  unsigned have = 0;  // dimensions some non-broadcastable input has fixed
  for (int k = 0; k < n; ++k) {
    const shape_t& s = ins[k]->shape();
    const unsigned b = bcast[k];
    for (int d = 0; d < rank; ++d) {
      if ((b >> d) & 1u) {
        if (s[d] != 1) detail::throw_broadcast_error(ins, bcast, n);
      } else if ((have >> d) & 1u) {
        if (s[d] != out[d]) detail::throw_broadcast_error(ins, bcast, n);
      } else {
        out[d] = s[d];
        have |= 1u << d;
      }
    }
  }
  for (int d = 0; d < rank; ++d)
    if (!((have >> d) & 1u)) out[d] = 1;
  return out;
}

XSYM_COLD_BEGIN  // the error path
[[noreturn]] inline void detail::throw_broadcast_error(const ndarray* const* ins, const std::uint8_t* bcast, int n) {
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
  throw std::logic_error("xsym: internal error: broadcast_shape found a mismatch its slow path does not");
}
XSYM_COLD_END

namespace detail {

struct scratch {
  std::vector<double> regs;  // doubles: 8-byte aligned storage for any dtype
};
inline scratch& thread_scratch() {
  thread_local scratch s;
  return s;
}

// Copies a block to its output with non-temporal stores (no read of the destination's lines).
inline void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) {
#if defined(__SSE2__)
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 64 <= bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
#elif defined(__AVX__)
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
#else
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
#endif
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

/// A step's arguments, to[j] = reg[st.args[j]], and the mask its kernel takes: bit j where
/// argument j is one value (bit r of one_value: register r is).
template <class P>
unsigned bind_step_args(const compiled_step& st, const P* reg, std::uint64_t one_value, const void** to) {
  unsigned mask = 0;
  for (int j = 0; j < st.arity; ++j) {
    to[j] = reg[st.args[j]];
    mask |= static_cast<unsigned>((one_value >> st.args[j]) & 1u) << j;
  }
  return mask;
}

// Runs the program over n elements; inputs either advance with i (stride 1) or are one value.
// With `stream`, outputs leave with non-temporal stores and each block asks for the next block
// of its inputs before computing (see streaming_min_bytes). A program that is one chain stores
// from the chain's registers; others go through scratch, block by block: step after step over
// the block, or with cp.chains all the steps in one pass over it.
inline void run_span(const compiled_program& cp, const std::byte* const* in, const bool* in_scalar,
                     std::byte* const* out, std::int64_t n, bool stream = false) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  // Bit r: input register r is one value broadcast over the span (no other register is).
  std::uint64_t bits = 0;
  for (int r = 0; r < n_in; ++r) bits |= static_cast<std::uint64_t>(in_scalar[r]) << r;
  if (cp.jit[0] || cp.typed) {
    for (int k = 0; k < 2; ++k)
      if (cp.jit[k] && bits == cp.jit_scalar_bits[k]) {
        cp.jit[k](in, out, n, stream);
        return;
      }
    if (cp.typed && bits == cp.typed_scalar_bits) {
      cp.typed(in, cp.typed_map.data(), out[0], n, stream);
      if (cp.typed_faulty) perturb(out[0], p.reg_types[0], n, perturb_how::middle);
      return;
    }
  }
  const void* args[detail::max_chain_links + 1];
  // A lone chain stores non-temporally itself. Any other lone op writes its output directly
  // even when streaming: through scratch, the copy is a second pass that costs more than the
  // non-temporal stores save.
  // Other programs stream through scratch, below.
  if (cp.direct) {
    const compiled_step& st = cp.steps[0];
    const unsigned mask = bind_step_args(st, in, bits, args);
    const bool nt = stream && st.chain;
    st.run(out[0], args, mask, n, nt);
    if (nt) stream_fence();
    return;
  }
  const auto n_regs = cp.reg_types.size();
  const std::int64_t block_size = stream ? cp.stream_block : cp.block;
  auto& sc = thread_scratch();
  // Registers start on cache lines: full-width stores never split a line.
  const std::size_t words = cp.scratch_bytes / sizeof(double) + 8;
  if (sc.regs.size() < words) sc.regs.resize(words);
  std::byte* const regs =
      reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(sc.regs.data()) + 63) & ~std::uintptr_t{63});
  const void* reg[max_registers];
  void* tmp[max_registers];
  for (std::size_t r = static_cast<std::size_t>(n_in); r < n_regs; ++r) {
    tmp[r] = regs + cp.reg_offset[r];
    reg[r] = tmp[r];
  }
  const int last_out = stream ? -1 : cp.last_out;
  const int last_reg = last_out >= 0 ? p.outputs[static_cast<std::size_t>(last_out)] : 0;
  const compiled_step* steps = cp.steps.data();
  const std::size_t n_steps = cp.steps.size();
  // Streaming: the bytes of a block of each array input, and the lines of it each step asks for.
  std::int64_t block_bytes[max_registers], share[max_registers];
  if (stream)
    for (int r = 0; r < n_in; ++r) {
      block_bytes[r] = in_scalar[r] ? 0 : block_size * cp.in_bytes[static_cast<std::size_t>(r)];
      share[r] = (block_bytes[r] / 64 + static_cast<std::int64_t>(n_steps) - 1) / static_cast<std::int64_t>(n_steps) * 64;
    }
  for (std::int64_t off = 0; off < n; off += block_size) {
    const std::int64_t m = std::min(block_size, n - off);
    for (int r = 0; r < n_in; ++r)
      reg[r] = in_scalar[r] ? in[r] : in[r] + off * cp.in_bytes[static_cast<std::size_t>(r)];
    // From memory, a block's loads would wait while its arithmetic leaves the bus idle: the
    // next block is on its way while this one computes. Each step asks for its share of the
    // lines: all at once, the requests fill the core's miss buffers and stall it.
    const bool prefetch = stream && off + 2 * block_size <= n;
    if (last_out >= 0) {
      tmp[last_reg] = out[last_out] + off * cp.out_bytes[static_cast<std::size_t>(last_out)];
      reg[last_reg] = tmp[last_reg];
    }
    // A step's arguments for this block, and which of them are one value.
    auto bind_args = [&](const compiled_step& st, const void** to) { return bind_step_args(st, reg, bits, to); };
    if (cp.chains) {
      chain_call calls[max_fused_chains];
      const void* chain_args[max_fused_chains][max_chain_links + 1];
      for (std::size_t i = 0; i < n_steps; ++i) {
        const compiled_step& st = steps[i];
        const unsigned mask = bind_args(st, chain_args[i]);
        // A lone op is a chain of one link on its first argument.
        calls[i] = st.chain ? chain_call{tmp[st.dst], chain_args[i], mask, st.chain_codes, st.links}
                            : chain_call{tmp[st.dst], chain_args[i], mask, static_cast<std::uint32_t>(st.link_code), 1};
      }
      cp.chains(calls, static_cast<int>(n_steps), m);
    } else {
      for (std::size_t i = 0; i < n_steps; ++i) {
        const compiled_step& st = steps[i];
        if (prefetch)
          for (int r = 0; r < n_in; ++r) {
            const std::byte* next = static_cast<const std::byte*>(reg[r]) + block_bytes[r];
            const std::int64_t end = std::min(block_bytes[r], (static_cast<std::int64_t>(i) + 1) * share[r]);
            for (std::int64_t b = static_cast<std::int64_t>(i) * share[r]; b < end; b += 64) __builtin_prefetch(next + b, 0, 3);
          }
        st.run(tmp[st.dst], args, bind_args(st, args), m);
      }
    }
    for (std::size_t o = 0; o < p.outputs.size(); ++o) {
      if (static_cast<int>(o) == last_out) continue;
      const std::int64_t es = cp.out_bytes[o];
      if (stream)
        stream_copy(out[o] + off * es, static_cast<const std::byte*>(reg[p.outputs[o]]), static_cast<std::size_t>(m * es));
      else
        std::memcpy(out[o] + off * es, reg[p.outputs[o]], static_cast<std::size_t>(m * es));
    }
  }
  if (stream) stream_fence();  // streaming stores are weakly ordered: visible before the node ends
}

// Elements after which input `a` repeats in an output of `shape` (C order): axes before some
// axis broadcast, the axes from it on C-contiguous with the output's extents (a row vector
// against a matrix: its length); 0 where `a` is not such an input.
inline std::int64_t repeat_period(const ndarray& a, const shape_t& shape) {
  std::int64_t period = 1;
  int d = shape.rank - 1;
  for (; d >= 0; --d) {
    const std::int64_t e = shape[d];
    if (e == 1) continue;
    if (a.shape(d) == 1 || a.stride(d) == 0) break;
    if (a.stride(d) != period) return 0;
    period *= e;
  }
  for (; d >= 0; --d)
    if (shape[d] != 1 && a.shape(d) != 1 && a.stride(d) != 0) return 0;
  return period;
}
// n elements of a block of `period` elements repeated end to end: the block, then what is
// there again, doubling (few copies however short the period).
inline void repeat_into(std::byte* to, const std::byte* block, std::int64_t period, std::int64_t n, std::int64_t es) {
  std::memcpy(to, block, static_cast<std::size_t>(period * es));
  for (std::int64_t filled = period; filled < n; filled *= 2)
    std::memcpy(to + filled * es, to, static_cast<std::size_t>(std::min(filled, n - filled) * es));
}
// Rows [0, nr) of a gathered input into `to`, len elements each: a row's one value repeated
// (`repeat`, a batch at a time: the last batch may write up to 63 bytes past the rows, which
// the caller leaves room for) or its elements copied; `from` is row 0, the next rows `step`
// bytes apart.
template <class U>
void gather_rows(std::byte* to, const std::byte* from, std::int64_t nr, std::int64_t len, std::int64_t step, bool repeat) {
  using B = xsimd::batch<U>;
  U* out = reinterpret_cast<U*>(to);
  if (repeat) {
    for (std::int64_t r = 0; r < nr; ++r, from += step, out += len) {
      U v;
      std::memcpy(&v, from, sizeof v);
      const B b(v);
      for (std::int64_t i = 0; i < len; i += static_cast<std::int64_t>(B::size)) b.store_unaligned(out + i);
    }
  } else {
    for (std::int64_t r = 0; r < nr; ++r, from += step, out += len)
      std::memcpy(out, from, static_cast<std::size_t>(len) * sizeof(U));
  }
}
inline void gather_rows_bytes(std::byte* to, const std::byte* from, std::int64_t nr, std::int64_t len, std::int64_t step,
                              bool repeat, std::int64_t es) {
  switch (es) {
    case 1: return gather_rows<std::uint8_t>(to, from, nr, len, step, repeat);
    case 2: return gather_rows<std::uint16_t>(to, from, nr, len, step, repeat);
    case 4: return gather_rows<std::uint32_t>(to, from, nr, len, step, repeat);
    case 8: return gather_rows<std::uint64_t>(to, from, nr, len, step, repeat);
    default:
      for (std::int64_t r = 0; r < nr; ++r, from += step, to += len * es)
        for (std::int64_t i = 0; i < len; ++i) std::memcpy(to + i * es, from + (repeat ? 0 : i * es), static_cast<std::size_t>(es));
  }
}
// Most elements whose period an input may have for run_program's spans over whole periods.
inline constexpr std::int64_t max_period = 16384;

// Whether run_program gives its rows to the program's rows kernel, one call per run of rows
// (compiled_program::rows): rows of at least 64 bytes, or 256 for a typed tree that reads a
// column (each row stores the column's value for the tree to load, which waits on the store:
// rows of one batch ran slower than in gathered spans). Shorter rows go in spans of whole
// rows, where a repeated value is gathered once per span (docs/performance.md, "Broadcasts
// and the stencil").
inline bool rows_in_one_call(const compiled_program& cp, const bool* scalar, const bool* row_scalar, std::int64_t rows,
                             std::int64_t len) {
  if (!cp.rows || cp.jit[0] || rows < 2 || len * cp.out_bytes[0] < 64) return false;
  if (!cp.typed) return true;
  std::uint64_t bits = 0;
  bool column = false;
  for (int r = 0; r < cp.prog->n_inputs; ++r) {
    bits |= static_cast<std::uint64_t>(scalar[r]) << r;
    column |= row_scalar[r] && !scalar[r];
  }
  return bits == cp.rows_scalar_bits && (!column || len * cp.out_bytes[0] >= 256);
}
// The rows path: runs of equally spaced rows (those along the next-to-last axis) each in one
// call, the next run's start by an odometer over the leading axes; threads take whole rows.
inline void run_rows(const compiled_program& cp, const std::byte* const* base,
                     const std::array<std::int64_t, max_rank>* strides, const bool* row_scalar, const bool* scalar,
                     ndarray& out, bool dense, int threads, bool apart) {
  const shape_t& shape = out.shape();
  const int n_in = cp.prog->n_inputs;
  const int inner = shape.rank - 2;
  const std::int64_t len = shape[shape.rank - 1], rows = shape.size() / len;
  const std::int64_t ob = cp.out_bytes[0];
  std::array<std::int64_t, max_rank> out_strides{};
  for (std::int64_t d = shape.rank - 1, step = 1; d >= 0; --d) {  // C order where dense
    out_strides[static_cast<std::size_t>(d)] = dense ? step : out.stride(static_cast<int>(d));
    step *= shape[static_cast<int>(d)];
  }
  std::int64_t step[max_registers];
  std::uint64_t column = 0;
  for (int k = 0; k < n_in; ++k) {
    step[k] = scalar[k] ? 0 : strides[k][static_cast<std::size_t>(inner)] * cp.in_bytes[static_cast<std::size_t>(k)];
    column |= static_cast<std::uint64_t>(row_scalar[k]) << k;
  }
  std::byte* const out_base = out.data();
  const dtype out_type = cp.reg_types[static_cast<std::size_t>(cp.prog->outputs[0])];
  parallel_chunks(rows, std::max<std::int64_t>(1, 2048 / len), threads, [&](std::int64_t first, std::int64_t last) {
    std::int64_t idx[max_rank] = {};
    for (std::int64_t r = first, d = inner; d >= 0; --d) {
      idx[d] = r % shape[static_cast<int>(d)];
      r /= shape[static_cast<int>(d)];
    }
    const std::byte* in_at[max_registers];
    std::byte* out_at = out_base;
    for (int k = 0; k < n_in; ++k) {
      in_at[k] = base[k];
      for (int d = 0; d <= inner; ++d)
        in_at[k] += idx[d] * strides[k][static_cast<std::size_t>(d)] * cp.in_bytes[static_cast<std::size_t>(k)];
    }
    for (int d = 0; d <= inner; ++d) out_at += idx[d] * out_strides[static_cast<std::size_t>(d)] * ob;
    for (std::int64_t r = first; r < last;) {
      const std::int64_t run = std::min(last - r, shape[inner] - idx[inner]);
      cp.rows(in_at, cp.rows_map.data(), step, column, out_at, out_strides[static_cast<std::size_t>(inner)] * ob, run, len,
              apart);
      if (cp.typed_faulty) perturb(out_at, out_type, len, perturb_how::middle);
      r += run;
      if (r == last) break;
      idx[inner] += run;
      for (int k = 0; k < n_in; ++k) in_at[k] += run * step[k];
      out_at += run * out_strides[static_cast<std::size_t>(inner)] * ob;
      for (int d = inner; d >= 0 && idx[d] == shape[d]; --d) {  // carry
        for (int k = 0; k < n_in; ++k)
          in_at[k] -= idx[d] * strides[k][static_cast<std::size_t>(d)] * cp.in_bytes[static_cast<std::size_t>(k)];
        out_at -= idx[d] * out_strides[static_cast<std::size_t>(d)] * ob;
        idx[d] = 0;
        if (d > 0) {
          ++idx[d - 1];
          for (int k = 0; k < n_in; ++k)
            in_at[k] += strides[k][static_cast<std::size_t>(d - 1)] * cp.in_bytes[static_cast<std::size_t>(k)];
          out_at += out_strides[static_cast<std::size_t>(d - 1)] * ob;
        }
      }
    }
  });
}
}  // namespace detail

/// @brief Runs a fused elementwise program; outputs have the broadcast shape, C-contiguous or
/// with rows of adjacent elements (a region of a larger array: IncSubtensor's fused value).
inline void run_program(const compiled_program& cp, const ndarray* const* ins, ndarray* const* outs,
                        const parallelism& par = {}) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  const shape_t& shape = outs[0]->shape();
  const std::int64_t total = shape.size();
  if (total == 0) return;
  if (cp.reg_types.size() > detail::max_registers) throw std::logic_error("xsym: fused program too large");
  bool dense = true;  // every output C-contiguous; else the rows' path, each row at its place
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const ndarray& out = *outs[o];
    if (out.is_c_contiguous()) continue;
    if (out.stride(out.rank() - 1) != 1 && out.shape(out.rank() - 1) != 1)
      throw std::logic_error("xsym: an elementwise output whose rows are not adjacent elements");
    dense = false;
  }

  std::size_t n_copies = 0;
  const ndarray* arr[detail::max_registers];
  const std::byte* base[detail::max_registers];
  bool scalar[detail::max_registers];
  bool flat = true;
  // Contiguous copies of strided inputs, in buffers kept per thread between calls; sized before
  // the loop, since arr[] points into it.
  thread_local std::vector<ndarray> contiguous;
  if (contiguous.size() < static_cast<std::size_t>(n_in)) contiguous.resize(static_cast<std::size_t>(n_in));
  for (int k = 0; k < n_in; ++k) {
    const ndarray* a = ins[k];
    const bool one = a->size() == 1;
    if (!one && a->rank() > 0 && a->stride(a->rank() - 1) != 1 && a->shape(a->rank() - 1) != 1) {
      ndarray& c = contiguous[n_copies++];
      a->copy_contiguous_into(c);
      a = &c;
    }
    arr[k] = a;
    base[k] = a->data();
    scalar[k] = one;
    if (!one && !(a->shape() == shape && a->is_c_contiguous())) flat = false;
  }
  flat = flat && dense;
  std::byte* out_base[limits::max_outputs];
  for (std::size_t o = 0; o < p.outputs.size(); ++o) out_base[o] = outs[o]->data();
  const int threads = total >= par.elemwise_minsize ? par.threads : 1;
  const std::size_t n_out = p.outputs.size();
  // Chains in one pass (cp.chains) do not stream: they are bound by their exps and logs, the
  // hardware prefetcher keeps up with one pass, and the copy out of scratch that streaming
  // needs costs more than the non-temporal stores save. `in_cache`: inputs that are not read
  // from memory.
  auto streams = [&](const bool* in_cache) {
    if (cp.chains || total * cp.all_bytes < streaming_min_bytes()) return false;  // no count of the inputs reaches it
    std::int64_t bytes_per_element = 0;
    for (int k = 0; k < n_in; ++k) bytes_per_element += in_cache[k] ? 0 : cp.in_bytes[static_cast<std::size_t>(k)];
    for (std::int64_t b : cp.out_bytes) bytes_per_element += b;
    return total * bytes_per_element >= streaming_min_bytes();
  };
  if (flat) {
    const bool stream = streams(scalar);
    if (threads == 1) {  // one span from the start: no offset pointers to build
      detail::run_span(cp, base, scalar, out_base, total, stream);
      return;
    }
    // Threads take whole blocks: each element is computed as on one thread.
    parallel_chunks(total, cp.block, threads, [&](std::int64_t lo, std::int64_t hi) {
      const std::byte* in_at[detail::max_registers];
      std::byte* out_at[limits::max_outputs];
      for (int k = 0; k < n_in; ++k) in_at[k] = scalar[k] ? base[k] : base[k] + lo * cp.in_bytes[static_cast<std::size_t>(k)];
      for (std::size_t o = 0; o < n_out; ++o) out_at[o] = out_base[o] + lo * cp.out_bytes[o];
      detail::run_span(cp, in_at, scalar, out_at, hi - lo, stream);
    });
    return;
  }
  std::array<std::int64_t, max_rank> strides[detail::max_registers];
  for (int k = 0; k < n_in; ++k)
    for (int d = 0; d < shape.rank; ++d)
      strides[k][static_cast<std::size_t>(d)] = arr[k]->shape(d) == 1 ? 0 : arr[k]->stride(d);
  const std::int64_t len = shape[shape.rank - 1];
  const std::int64_t rows = total / len;
  bool row_scalar[detail::max_registers];
  for (int k = 0; k < n_in; ++k) row_scalar[k] = strides[k][static_cast<std::size_t>(shape.rank - 1)] == 0;
  if (detail::rows_in_one_call(cp, scalar, row_scalar, rows, len)) {
    const xsym::detail::byte_range out_bytes = xsym::detail::bytes_of(*outs[0]);
    bool apart = true;
    for (int k = 0; k < n_in; ++k) apart = apart && (scalar[k] || !xsym::detail::bytes_of(*arr[k]).overlaps(out_bytes));
    detail::run_rows(cp, base, strides, row_scalar, scalar, *outs[0], dense, threads, apart);
    return;
  }
  // Inputs that repeat a block (a row vector against a matrix) become spans of whole periods:
  // each is copied end to end into one span's length, the full-shape inputs and the outputs
  // advance, and a span covers many rows. Row by row, a row of 16 floats cost a kernel call
  // (about 16 ns) for 16 elements.
  // Each input's period (0: one value, or none), for these spans and the gathered ones below.
  std::int64_t period[detail::max_registers];
  for (int k = 0; k < n_in; ++k) period[k] = scalar[k] ? 0 : detail::repeat_period(*arr[k], shape);
  std::int64_t lcm = 1;
  bool periodic = true, in_cache[detail::max_registers];
  for (int k = 0; k < n_in && periodic; ++k) {
    periodic = scalar[k] || period[k] > 0;
    if (periodic && period[k] > 0 && period[k] < total) lcm = std::lcm(lcm, period[k]);
    periodic = periodic && lcm <= detail::max_period;
    in_cache[k] = scalar[k] || period[k] < total;
  }
  if (periodic && lcm > 1 && dense) {
    // A span: whole periods, at least 2048 elements where the periods allow.
    const std::int64_t span = lcm * std::max<std::int64_t>(1, 2048 / lcm);
    thread_local std::vector<std::byte> repeated;
    std::size_t bytes = 0;
    for (int k = 0; k < n_in; ++k)
      if (!scalar[k] && period[k] < total) bytes += static_cast<std::size_t>((span * cp.in_bytes[static_cast<std::size_t>(k)] + 63) / 64 * 64);
    if (repeated.size() < bytes + 64) repeated.resize(bytes + 64);
    std::byte* at = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(repeated.data()) + 63) & ~std::uintptr_t{63});
    const std::byte* from[detail::max_registers];
    for (int k = 0; k < n_in; ++k) {
      from[k] = base[k];
      if (scalar[k] || period[k] == total) continue;
      const std::int64_t es = cp.in_bytes[static_cast<std::size_t>(k)];
      detail::repeat_into(at, base[k], period[k], span, es);
      from[k] = at;
      at += (span * es + 63) / 64 * 64;
    }
    const bool stream = streams(in_cache);
    auto run_spans = [&](std::int64_t lo, std::int64_t hi) {
      const std::byte* in_at[detail::max_registers];
      std::byte* out_at[limits::max_outputs];
      for (std::int64_t off = lo; off < hi; off += span) {
        for (int k = 0; k < n_in; ++k)
          in_at[k] = in_cache[k] ? from[k] : from[k] + off * cp.in_bytes[static_cast<std::size_t>(k)];
        for (std::size_t o = 0; o < n_out; ++o) out_at[o] = out_base[o] + off * cp.out_bytes[o];
        detail::run_span(cp, in_at, scalar, out_at, std::min(span, hi - off), stream);
      }
    };
    if (threads == 1) run_spans(0, total);
    else parallel_chunks(total, span, threads, [&](std::int64_t lo, std::int64_t hi) { run_spans(lo, hi); });  // whole spans
    return;
  }
  // Row by row over the last axis; an input either walks the row (stride 1) or repeats one value.
  auto row_at = [&](int k, std::int64_t r) {  // where input k's row r starts
    const std::byte* at = base[k];
    for (int d = shape.rank - 2; d >= 0; --d) {
      const std::int64_t i = r % shape[d];
      r /= shape[d];
      at += i * strides[k][static_cast<std::size_t>(d)] * cp.in_bytes[static_cast<std::size_t>(k)];
    }
    return at;
  };
  // Spans of whole rows, with each input not laid out as the output gathered row by row into a
  // span of its own: a row's one value repeated (a column against a matrix), or its elements
  // copied (a view with a row stride). Where rows are short a kernel call per row costs more
  // than its elements (about 16 ns a row); copying rows of 128 floats or more cost more than the
  // calls it saved (examples/heat_equation.cpp's five views, 1.2-1.4 times slower), and
  // repeating a value did from rows of 400 floats (docs/performance.md).
  // An input that repeats within a span (a row vector beside a column) is copied end to end once.
  const std::int64_t per = std::max<std::int64_t>(1, 2048 / len), span = per * len;
  bool gather[detail::max_registers], once[detail::max_registers];
  bool copies = false;
  for (int k = 0; k < n_in; ++k) {
    gather[k] = !scalar[k] && period[k] != total;
    once[k] = gather[k] && period[k] > 0 && span % period[k] == 0;
    copies |= gather[k] && !once[k] && !row_scalar[k];
  }
  if (dense && rows > 1 && (len < 64 || (!copies && len < 256))) {
    std::size_t bytes = 64;
    for (int k = 0; k < n_in; ++k)
      if (gather[k]) bytes += static_cast<std::size_t>((span * cp.in_bytes[static_cast<std::size_t>(k)] + 63) / 64 * 64 + 64);
    parallel_chunks(rows, per, threads, [&](std::int64_t first, std::int64_t last) {
      thread_local std::vector<std::byte> spans;  // each thread its own
      if (spans.size() < bytes) spans.resize(bytes);
      std::byte* at = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(spans.data()) + 63) & ~std::uintptr_t{63});
      std::byte* buffer[detail::max_registers];
      for (int k = 0; k < n_in; ++k)
        if (gather[k]) {
          buffer[k] = at;
          at += (span * cp.in_bytes[static_cast<std::size_t>(k)] + 63) / 64 * 64 + 64;  // gather_rows' room
          if (once[k]) detail::repeat_into(buffer[k], base[k], period[k], span, cp.in_bytes[static_cast<std::size_t>(k)]);
        }
      const std::byte* in_at[detail::max_registers];
      std::byte* out_at[limits::max_outputs];
      for (std::int64_t r0 = first; r0 < last; r0 += per) {
        const std::int64_t nr = std::min(per, last - r0);
        for (int k = 0; k < n_in; ++k) {
          const std::int64_t es = cp.in_bytes[static_cast<std::size_t>(k)];
          if (!gather[k] || once[k]) {
            in_at[k] = once[k] ? buffer[k] : scalar[k] ? base[k] : base[k] + r0 * len * es;
            continue;
          }
          // Runs of rows equally spaced (a whole matrix: all of the span's rows) go at once;
          // the next run's start by an odometer over the leading axes.
          const int inner = shape.rank - 2;  // the axis the rows of a run walk
          const std::int64_t step = strides[k][static_cast<std::size_t>(inner)] * es;
          std::int64_t idx[max_rank] = {};
          for (std::int64_t r = r0, d = inner; d >= 0; --d) {
            idx[d] = r % shape[static_cast<int>(d)];
            r /= shape[static_cast<int>(d)];
          }
          const std::byte* from = row_at(k, r0);
          std::byte* to = buffer[k];
          for (std::int64_t left = nr; left > 0;) {
            const std::int64_t run = std::min(left, shape[inner] - idx[inner]);
            detail::gather_rows_bytes(to, from, run, len, step, row_scalar[k], es);
            to += run * len * es;
            left -= run;
            if (left == 0) break;
            from += run * step;
            idx[inner] += run;
            for (int d = inner; d >= 0 && idx[d] == shape[d]; --d) {  // carry
              from -= idx[d] * strides[k][static_cast<std::size_t>(d)] * es;
              idx[d] = 0;
              if (d > 0) {
                ++idx[d - 1];
                from += strides[k][static_cast<std::size_t>(d - 1)] * es;
              }
            }
          }
          in_at[k] = buffer[k];
        }
        for (std::size_t o = 0; o < n_out; ++o) out_at[o] = out_base[o] + r0 * len * cp.out_bytes[o];
        detail::run_span(cp, in_at, scalar, out_at, nr * len);
      }
    });
    return;
  }
  // Threads take whole rows; each row's start by an odometer over the leading axes (a division
  // per input and axis for every row cost more than a short row's elements).
  std::array<std::int64_t, max_rank> out_strides[limits::max_outputs];
  for (std::size_t o = 0; o < n_out; ++o)
    for (std::int64_t d = shape.rank - 1, step = 1; d >= 0; --d) {  // C order where dense
      out_strides[o][static_cast<std::size_t>(d)] = dense ? step : outs[o]->stride(static_cast<int>(d));
      step *= shape[static_cast<int>(d)];
    }
  parallel_chunks(rows, 1, threads, [&](std::int64_t first, std::int64_t last) {
    const std::byte* row_in[detail::max_registers];
    std::byte* row_out[limits::max_outputs];
    std::int64_t idx[max_rank] = {};
    for (std::int64_t r = first, d = shape.rank - 2; d >= 0; --d) {
      idx[d] = r % shape[static_cast<int>(d)];
      r /= shape[static_cast<int>(d)];
    }
    for (int k = 0; k < n_in; ++k) row_in[k] = row_at(k, first);
    for (std::size_t o = 0; o < n_out; ++o) {
      row_out[o] = out_base[o];
      for (int d = 0; d + 1 < shape.rank; ++d) row_out[o] += idx[d] * out_strides[o][static_cast<std::size_t>(d)] * cp.out_bytes[o];
    }
    for (std::int64_t r = first; r < last; ++r) {
      detail::run_span(cp, row_in, row_scalar, row_out, len);
      if (r + 1 == last) break;
      for (int d = shape.rank - 2; d >= 0; --d) {  // the next row
        const auto du = static_cast<std::size_t>(d);
        const bool carry = ++idx[d] == shape[d];
        const std::int64_t by = carry ? 1 - shape[d] : 1;
        for (int k = 0; k < n_in; ++k) row_in[k] += by * strides[k][du] * cp.in_bytes[static_cast<std::size_t>(k)];
        for (std::size_t o = 0; o < n_out; ++o) row_out[o] += by * out_strides[o][du] * cp.out_bytes[o];
        if (!carry) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace xsym::cpu

#endif
