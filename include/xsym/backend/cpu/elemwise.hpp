#ifndef XSYM_BACKEND_CPU_ELEMWISE_HPP
#define XSYM_BACKEND_CPU_ELEMWISE_HPP

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif
#if defined(__linux__)
#include <fcntl.h>
#endif
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../../config/cold.hpp"
#include "../../config/limits.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "fault.hpp"
#include "kernel_table.hpp"
#include "parallel.hpp"
#include "scalar_kernels.hpp"

namespace xsym::cpu {

/// @brief One instruction, or a chain of them (detail::fuse_chains), with everything the
/// executor needs, looked up once.
struct compiled_step {
  kernel_fn kernel = nullptr;
  detail::chain_fn chain = nullptr;  // set instead of kernel for a chain
  void (*chain_one)(void* dst, const void* const* args, std::uint32_t codes, int links) = nullptr;  // its one-element form
  std::uint32_t chain_codes = 0;     // 4 bits per link (see detail::chain)
  int links = 0;                     // a chain's links (unary ones take no argument)
  int arity = 0;
  int args[detail::max_chain_links + 1] = {};
  int dst = 0;
  int link_code = -1;  // detail::chain_code of the instruction: it may join a chain
  // What the step computes, for the code generator (backend/cpu/jit.hpp): the op, or one of
  // the shared sigmoid/softplus kernels (shared >= 0, a shared_exp_kernel), or a chain.
  scalar_op op = scalar_op::identity;
  int shared = -1;

  // `stream`: a chain stores its results with non-temporal stores (see detail::chain).
  void run(void* dst_data, const void* const* arg_data, unsigned scalar_mask, std::int64_t n,
           bool stream = false) const {
    if (chain) chain(dst_data, arg_data, scalar_mask, n, chain_codes, links, stream);
    else kernel(dst_data, arg_data, scalar_mask, n);
  }
};

/// @brief A program compiled to machine code by cxx (backend/cpu/jit.hpp): the same
/// arguments as detail::run_span, every element computed in one pass.
using jit_fn = void (*)(const std::byte* const* in, std::byte* const* out, std::int64_t n, bool stream);

/// @brief A program with its kernels looked up once, when the function is built.
struct compiled_program {
  std::shared_ptr<const program> prog;
  // What runs: the program's instructions, or for the vectorized set an equivalent sequence
  // with repeated subexpressions computed once (see detail::share_work).
  std::vector<compiled_step> steps;
  std::vector<dtype> reg_types;         // the program's registers, then any the steps added
  std::vector<std::int64_t> out_bytes;  // element size of each output
  std::vector<std::int64_t> in_bytes;   // element size of each input
  std::int64_t all_bytes = 0;           // bytes per element of every input and output
  bool direct = false;     // one instruction writing the only output: no scratch needed
  // Set where every step is a chain or could be one (a lone add, sub, mul, true_div or
  // chain_unary_ops op), all of one dtype, and some step takes an exp or a log: a block runs
  // them in one pass (detail::chain_loop), and the program does not stream.
  detail::chains_fn chains = nullptr;
  // The output that only the last instruction writes, or -1: that instruction writes it in
  // place (nothing reads it after, so an output sharing an input's buffer is still safe).
  int last_out = -1;
  // Elements per block of a span: the scratch registers of one block stay in L1, and a block
  // is long enough that a kernel call's fixed cost is small next to its loop; a streaming span
  // takes smaller ones (see block_budget). Always a multiple of 64, hence of every SIMD width:
  // only a span's last n % width elements take the scalar tail, whatever the block, so the
  // block size does not change any result.
  std::int64_t block = 256, stream_block = 256;
  // Byte offset of each scratch register in the per-thread scratch area (inputs: unused), and
  // the area's size. Registers are packed by their dtype's size, each on its own cache lines,
  // staggered by one line so that no two sit 4 KiB apart (store-to-load aliasing).
  std::vector<std::size_t> reg_offset;
  std::size_t scratch_bytes = 0;
  // With cxx set, the program compiled to loops: jit[k] takes the inputs in jit_scalar_bits[k]
  // (bit r: input r) as one value each and all others as arrays. A span whose inputs are one
  // value in another combination runs the steps above.
  jit_fn jit[2] = {nullptr, nullptr};
  std::uint64_t jit_scalar_bits[2] = {0, 0};
};

namespace detail {
inline constexpr std::int64_t min_block = 256, max_block = 4096;
// Bytes per block of the scratch registers and of the inputs twice over: a 32 KiB L1, or half
// of it when streaming, where the next block's inputs arrive while this one computes. xent
// with 4 scratch registers and 2 inputs, over 1e5 floats: 0.84-0.86 ns per element with
// blocks of 896, 0.87-0.89 with 448; over 1e7 (streaming): 1.03-1.07 with blocks of 512,
// 1.15-1.30 with 768.
inline constexpr std::int64_t block_budget = 32 * 1024, stream_block_budget = 16 * 1024;  // bytes of scratch registers per block
inline constexpr std::size_t max_registers = limits::max_registers;

XSYM_COLD_BEGIN  // compiling a program: once per function
// Fusion emits a Composite's graph as a tree, so a subexpression used twice is computed twice
// (the logistic regression's gradient Composite computes dot + b five times). For the
// vectorized set this computes each distinct step once, and lets sigmoid and softplus of u
// and -u share one exp(-|u|) (four exps and two log1ps become one of each). The reference set
// runs the program as written, which is what DebugMode compares against.
inline void share_work(const program& p, std::vector<compiled_step>& steps, std::vector<dtype>& reg_types) {
  const std::size_t n_regs = reg_types.size();
  std::vector<char> written(n_regs, 0), is_output(n_regs, 0);
  for (const auto& ins : p.code) {
    if (ins.dst < p.n_inputs || written[static_cast<std::size_t>(ins.dst)]) return;  // not single-assignment
    written[static_cast<std::size_t>(ins.dst)] = 1;
  }
  for (int r : p.outputs) is_output[static_cast<std::size_t>(r)] = 1;

  // 1. Each distinct (kernel, arguments) once; commutative arguments in a fixed order.
  std::vector<int> alias(n_regs);
  for (std::size_t r = 0; r < n_regs; ++r) alias[r] = static_cast<int>(r);
  std::vector<compiled_step> kept;
  std::vector<scalar_op> kept_op;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    compiled_step st = steps[i];
    const scalar_op op = p.code[i].op;
    for (int j = 0; j < st.arity; ++j) st.args[j] = alias[static_cast<std::size_t>(st.args[j])];
    const bool commutative = op == scalar_op::add || op == scalar_op::mul || op == scalar_op::eq || op == scalar_op::neq;
    if (commutative && st.args[1] < st.args[0]) std::swap(st.args[0], st.args[1]);
    int same = -1;
    for (std::size_t k = 0; k < kept.size() && same < 0; ++k)
      if (kept[k].kernel == st.kernel && kept[k].arity == st.arity && kept[k].args[0] == st.args[0] &&
          kept[k].args[1] == st.args[1] && kept[k].args[2] == st.args[2])
        same = kept[k].dst;
    if (same >= 0 && !is_output[static_cast<std::size_t>(st.dst)]) {
      alias[static_cast<std::size_t>(st.dst)] = same;
      continue;
    }
    kept.push_back(st);
    kept_op.push_back(op);
  }

  // 2. sigmoid/softplus of u or -u, grouped by u: with two or more, share e = exp(-|u|).
  std::vector<int> neg_of(n_regs, -1);  // register r = -neg_of[r]
  for (std::size_t k = 0; k < kept.size(); ++k)
    if (kept_op[k] == scalar_op::neg) neg_of[static_cast<std::size_t>(kept[k].dst)] = kept[k].args[0];
  auto base_of = [&](int r) { return neg_of[static_cast<std::size_t>(r)] >= 0 ? neg_of[static_cast<std::size_t>(r)] : r; };
  std::vector<compiled_step> out;
  std::vector<char> rewritten(kept.size(), 0);
  auto shareable = [&](std::size_t k) {
    const dtype t = reg_types[static_cast<std::size_t>(kept[k].dst)];
    return !rewritten[k] && (kept_op[k] == scalar_op::sigmoid || kept_op[k] == scalar_op::softplus) &&
           (t == dtype::float32 || t == dtype::float64);
  };
  for (std::size_t k = 0; k < kept.size(); ++k) {
    if (!shareable(k)) {
      out.push_back(kept[k]);
      continue;
    }
    const dtype t = reg_types[static_cast<std::size_t>(kept[k].dst)];
    const int u = base_of(kept[k].args[0]);
    std::vector<std::size_t> group;
    bool any_softplus = false;
    int sigmoids = 0;
    for (std::size_t m = k; m < kept.size(); ++m)
      if (shareable(m) && reg_types[static_cast<std::size_t>(kept[m].dst)] == t && base_of(kept[m].args[0]) == u) {
        group.push_back(m);
        any_softplus |= kept_op[m] == scalar_op::softplus;
        sigmoids += kept_op[m] == scalar_op::sigmoid;
      }
    // Two or more sigmoids share r = 1/(1 + e) too: a division is the costliest step left.
    const bool share_recip = sigmoids >= 2;
    if (group.size() < 2 || reg_types.size() + (any_softplus ? 2 : 1) + (share_recip ? 1 : 0) > max_registers) {
      out.push_back(kept[k]);
      continue;
    }
    auto kernel = [&](shared_exp_kernel which) { return kernels_of(t).shared_exp(which); };
    auto unary_step = [&](kernel_fn f, int arg, scalar_op op, int shared) {
      compiled_step st;
      st.kernel = f;
      st.op = op;
      st.shared = shared;
      st.arity = 1;
      st.args[0] = arg;
      reg_types.push_back(t);
      st.dst = static_cast<int>(reg_types.size() - 1);
      out.push_back(st);
      return st.dst;
    };
    // e and log1p(e) go just before the first member; u is computed before it.
    const int e_reg = unary_step(kernel(shared_exp_kernel::exp_neg_abs), u, scalar_op::exp,
                                 static_cast<int>(shared_exp_kernel::exp_neg_abs));
    int l_reg = -1;
    if (any_softplus) {
      instruction log1p{};
      log1p.op = scalar_op::log1p;
      log1p.in_type = log1p.out_type = t;
      l_reg = unary_step(kernel_for<true>(log1p), e_reg, scalar_op::log1p, -1);
    }
    const int r_reg = share_recip ? unary_step(kernel(shared_exp_kernel::recip_1p), e_reg, scalar_op::true_div,
                                               static_cast<int>(shared_exp_kernel::recip_1p))
                                  : -1;
    for (std::size_t m : group) {
      const bool sig = kept_op[m] == scalar_op::sigmoid;
      const auto which = !sig ? shared_exp_kernel::softplus_from_log1p
                         : share_recip ? shared_exp_kernel::sigmoid_from_recip
                                       : shared_exp_kernel::sigmoid_from_exp;
      kept[m].kernel = kernel(which);
      kept[m].shared = static_cast<int>(which);
      kept[m].arity = which == shared_exp_kernel::sigmoid_from_recip ? 3 : 2;
      kept[m].args[1] = sig ? e_reg : l_reg;
      if (kept[m].arity == 3) kept[m].args[2] = r_reg;
      rewritten[m] = 1;  // the others stay where they are: their arguments may come later
    }
    out.push_back(kept[k]);
  }
  steps = std::move(out);
}

// -a * b and b / -a are -(a * b) and -(b / a), bitwise but for a NaN's sign: a negation whose
// only reader is a product or a quotient moves after it, so that a chain can go on through
// both (xent's -y * log(x): log, * y, neg in one pass instead of a pass for -y).
inline void sink_negations(const program& p, std::vector<compiled_step>& steps, const std::vector<dtype>& reg_types) {
  std::vector<int> reads(reg_types.size(), 0), writes(reg_types.size(), 0);
  for (const auto& st : steps) {
    for (int j = 0; j < st.arity; ++j) ++reads[static_cast<std::size_t>(st.args[j])];
    ++writes[static_cast<std::size_t>(st.dst)];
  }
  for (int r : p.outputs) reads[static_cast<std::size_t>(r)] += 2;
  auto once = [&](int r) { return reads[static_cast<std::size_t>(r)] == 1 && writes[static_cast<std::size_t>(r)] == 1; };
  // The step after i that is a product or quotient of step i's negation, its only reader; 0 if none.
  auto product_of_negation = [&](std::size_t i) -> std::size_t {
    const compiled_step& neg = steps[i];
    if (neg.op != scalar_op::neg || neg.link_code < 0 || !once(neg.dst)) return 0;
    for (std::size_t m = i + 1; m < steps.size(); ++m) {
      const compiled_step& st = steps[m];
      if (st.arity < 1 || (st.args[0] != neg.dst && (st.arity < 2 || st.args[1] != neg.dst) &&
                           (st.arity < 3 || st.args[2] != neg.dst)))
        continue;
      const bool product = st.op == scalar_op::mul || st.op == scalar_op::true_div;
      const bool same_type = reg_types[static_cast<std::size_t>(st.dst)] == reg_types[static_cast<std::size_t>(neg.dst)];
      return product && st.link_code >= 0 && st.arity == 2 && same_type && writes[static_cast<std::size_t>(st.dst)] == 1 ? m : 0;
    }
    return 0;
  };
  for (std::size_t i = 0; i < steps.size();) {
    const std::size_t m = product_of_negation(i);
    if (m == 0) {
      ++i;
      continue;
    }
    // The reader takes a and writes the negation's register; the negation, moved after it,
    // writes the reader's. The step now at i is the one after the negation: look at it next.
    const compiled_step neg = steps[i];
    compiled_step& reader = steps[m];
    const int result = reader.dst;
    for (int j = 0; j < 2; ++j)
      if (reader.args[j] == neg.dst) reader.args[j] = neg.args[0];
    reader.dst = neg.dst;
    compiled_step moved = neg;
    moved.args[0] = neg.dst;
    moved.dst = result;
    steps.insert(steps.begin() + static_cast<std::ptrdiff_t>(m) + 1, moved);
    steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// Runs of steps where each takes the one before's result (read nowhere else, not an output)
// become one chain step: (x + y + z) * 2 is one pass instead of three, each of which stored its
// block and the next loaded it back, and -y * log(x) is one instead of three. Steps stay in
// order, so every argument is computed before the chain runs.
inline void fuse_chains(const program& p, std::vector<compiled_step>& steps, const std::vector<dtype>& reg_types) {
  std::vector<int> reads(reg_types.size(), 0), writes(reg_types.size(), 0);
  for (const auto& st : steps) {
    for (int j = 0; j < st.arity; ++j) ++reads[static_cast<std::size_t>(st.args[j])];
    ++writes[static_cast<std::size_t>(st.dst)];
  }
  for (int r : p.outputs) reads[static_cast<std::size_t>(r)] += 2;  // an output is never folded away
  auto is_link = [](const compiled_step& st) {
    return st.link_code >= 0 && st.arity == (st.link_code >= static_cast<int>(first_unary_link) ? 1 : 2);
  };
  std::vector<compiled_step> out;
  for (std::size_t i = 0; i < steps.size();) {
    compiled_step fused = steps[i];
    std::uint32_t codes = 0;
    int links = 0, n_args = fused.arity;
    if (is_link(fused)) {
      codes = static_cast<std::uint32_t>(fused.link_code);
      links = 1;
    }
    std::size_t j = i + 1;
    for (; links > 0 && links < max_chain_links && j < steps.size(); ++j) {
      const compiled_step& next = steps[j];
      const auto acc = static_cast<std::size_t>(fused.dst);
      if (!is_link(next) || reg_types[static_cast<std::size_t>(next.dst)] != reg_types[acc] || reads[acc] != 1 ||
          writes[acc] != 1)
        break;
      int code = next.link_code;
      if (next.arity == 1) {
        if (next.args[0] != fused.dst) break;
      } else {
        const bool left = next.args[0] == fused.dst, right = next.args[1] == fused.dst;
        if (left == right) break;  // not read, or read twice (acc * acc)
        if (right) code += link_reversed;  // b OP acc; for + and * the same as acc OP b, bitwise
        fused.args[n_args++] = right ? next.args[0] : next.args[1];
      }
      codes |= static_cast<std::uint32_t>(code) << (4 * links);
      ++links;
      fused.dst = next.dst;
    }
    if (links < 2) {
      out.push_back(steps[i++]);
      continue;
    }
    const typed_kernels& typed = kernels_of(reg_types[static_cast<std::size_t>(fused.dst)]);
    fused.chain = typed.chain;
    fused.chain_one = typed.chain_one;
    fused.kernel = nullptr;
    fused.chain_codes = codes;
    fused.links = links;
    fused.arity = n_args;
    fused.link_code = -1;
    out.push_back(fused);
    i = j;
  }
  steps = std::move(out);
}

// One copy for both kernel sets: only the kernel lookup differs.
inline compiled_program compile_program_with(std::shared_ptr<const program> p, kernel_fn (*kernel_of)(const instruction&),
                                             bool share) {
  compiled_program cp;
  cp.reg_types = p->reg_types;
  for (const auto& ins : p->code) {
    compiled_step st;
    st.kernel = kernel_of(ins);
    st.op = ins.op;
    st.arity = info(ins.op).arity;
    st.dst = ins.dst;
    for (int j = 0; j < st.arity; ++j) st.args[j] = ins.args[j];
    // A kernel made wrong on purpose (fault.hpp) stays a step of its own.
    if (share && !fault_on_op(ins.op, share)) st.link_code = chain_code(ins);
    cp.steps.push_back(st);
  }
  if (share) {
    share_work(*p, cp.steps, cp.reg_types);
    sink_negations(*p, cp.steps, cp.reg_types);
    fuse_chains(*p, cp.steps, cp.reg_types);
  }
  for (int r = 0; r < p->n_inputs; ++r)
    cp.in_bytes.push_back(static_cast<std::int64_t>(dtype_size(cp.reg_types[static_cast<std::size_t>(r)])));
  for (int r : p->outputs) cp.out_bytes.push_back(static_cast<std::int64_t>(dtype_size(cp.reg_types[static_cast<std::size_t>(r)])));
  for (std::int64_t b : cp.in_bytes) cp.all_bytes += b;
  for (std::int64_t b : cp.out_bytes) cp.all_bytes += b;
  cp.direct = cp.steps.size() == 1 && p->outputs.size() == 1 && p->outputs[0] == cp.steps[0].dst;
  // Chains in one pass need an exp or a log to pay for it: a jump per operation and per four
  // batches is small next to one, but not next to an add ((x + y) * (x - z) over 1e5 floats:
  // 0.24 ns per element in one pass, 0.22 in two).
  if (share && testing::one_pass_chains() && cp.steps.size() >= 2 &&
      cp.steps.size() <= static_cast<std::size_t>(detail::max_fused_chains)) {
    const dtype t = cp.reg_types[static_cast<std::size_t>(cp.steps[0].dst)];
    bool all = true, transcendental = false;
    for (const compiled_step& st : cp.steps) {
      all = all && (st.chain || (st.link_code >= 0 && st.shared < 0)) && cp.reg_types[static_cast<std::size_t>(st.dst)] == t;
      transcendental = transcendental || (st.chain ? !chain_is_exact(st.chain_codes, st.links)
                                                   : st.link_code >= static_cast<int>(chain_exp_link));
    }
    if (all && transcendental) cp.chains = kernels_of(t).chains;
  }
  apply_fault(cp, share);  // test-only (fault.hpp): returns at once when no fault is set
  if (!cp.steps.empty() && cp.steps.back().dst >= p->n_inputs) {
    const int r = cp.steps.back().dst;
    bool written_before = false;
    for (std::size_t i = 0; i + 1 < cp.steps.size(); ++i) written_before |= cp.steps[i].dst == r;
    for (std::size_t o = 0; o < p->outputs.size() && !written_before; ++o)
      if (p->outputs[o] == r) {
        cp.last_out = static_cast<int>(o);
        break;
      }
  }
  // Registers a block writes in scratch: every step's result (a chain's inner values stay in
  // its registers; the output that the last step writes in place needs none, but counting it
  // keeps this simple).
  std::vector<char> in_scratch(cp.reg_types.size(), 0);
  for (const compiled_step& st : cp.steps)
    if (st.dst >= p->n_inputs) in_scratch[static_cast<std::size_t>(st.dst)] = 1;
  std::int64_t bytes_per_element = 0;
  for (std::size_t r = 0; r < cp.reg_types.size(); ++r)
    if (in_scratch[r] || static_cast<int>(r) < p->n_inputs)
      bytes_per_element += static_cast<std::int64_t>(dtype_size(cp.reg_types[r])) * (in_scratch[r] ? 1 : 2);
  auto fit = [&](std::int64_t budget) {
    return std::clamp(budget / std::max<std::int64_t>(1, bytes_per_element) / 64 * 64, detail::min_block, detail::max_block);
  };
  cp.block = fit(detail::block_budget);
  cp.stream_block = std::min(cp.block, fit(detail::stream_block_budget));  // scratch is laid out for cp.block
  cp.reg_offset.assign(cp.reg_types.size(), 0);
  std::size_t at = 0;
  for (std::size_t r = static_cast<std::size_t>(p->n_inputs); r < cp.reg_types.size(); ++r) {
    if (!in_scratch[r]) continue;
    cp.reg_offset[r] = at;
    const std::size_t bytes = static_cast<std::size_t>(cp.block) * dtype_size(cp.reg_types[r]);
    at += (bytes + 63) / 64 * 64 + 64;
  }
  cp.scratch_bytes = at;
  cp.prog = std::move(p);
  return cp;
}
XSYM_COLD_END
}  // namespace detail

/// @brief The program with its kernels looked up; Simd=false gives the reference kernels.
template <bool Simd>
compiled_program compile_program(std::shared_ptr<const program> p) {
  return detail::compile_program_with(std::move(p), &kernel_for<Simd>, Simd);
}

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

XSYM_COLD_BEGIN  // run once, for the streaming threshold

// The size of the last-level cache that CPU 0 shares, as Linux's sysfs lists it ("32768K"), or
// -1. A virtual machine's sysconf may report the whole host's: 320 MiB on the AMD VM of
// docs/performance.md, where sysfs and lscpu say 32 MiB.
inline std::int64_t sysfs_llc_bytes() {
#if defined(__linux__)
  std::int64_t best = -1;
  int best_level = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    auto read_line = [](const std::string& path) {
      std::string text;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return text;
      char buf[64];
      const auto got = ::read(fd, buf, sizeof buf - 1);
      ::close(fd);
      if (got > 0) text.assign(buf, static_cast<std::size_t>(got));
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      return text;
    };
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type"), size = read_line(dir + "size");
    if (level.empty()) break;
    if (type == "Instruction" || size.empty()) continue;
    char* end = nullptr;
    const long long value = std::strtoll(size.c_str(), &end, 10);
    const std::int64_t bytes = value * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1);
    const int lv = std::atoi(level.c_str());
    if (value > 0 && lv >= best_level) {
      best_level = lv;
      best = bytes;
    }
  }
  return best;
#else
  return -1;
#endif
}

// Bytes of a call's arrays (inputs and outputs) from which a node streams: 3/8 of the last-level
// cache, the fraction glibc takes for its non-temporal memcpy (12 MiB on the machine of
// docs/performance.md). Below it, the output is likely still cached when the next node reads
// it, and the ordinary stores and hardware prefetch are faster. The cache is sysfs's when it
// lists one, else sysconf's; with neither, the threshold is 32 MiB.
inline std::int64_t default_streaming_min_bytes() {
  std::int64_t llc = sysfs_llc_bytes();
#if defined(_SC_LEVEL3_CACHE_SIZE)
  if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  return llc > 0 ? llc / 8 * 3 : std::int64_t{32} << 20;
}

XSYM_COLD_END
}  // namespace detail

/// @brief The streaming threshold in bytes (see detail::default_streaming_min_bytes); tests
/// set it low to run the streaming path on small arrays.
inline std::int64_t& streaming_min_bytes() {
  static std::int64_t bytes = detail::default_streaming_min_bytes();
  return bytes;
}

namespace detail {
// Runs the program over n elements; inputs either advance with i (stride 1) or are one value.
// With `stream`, outputs leave with non-temporal stores and each block asks for the next block
// of its inputs before computing (see streaming_min_bytes). A program that is one chain stores
// from the chain's registers; others go through scratch, block by block: step after step over
// the block, or with cp.chains all the steps in one pass over it.
inline void run_span(const compiled_program& cp, const std::byte* const* in, const bool* in_scalar,
                     std::byte* const* out, std::int64_t n, bool stream = false) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  if (cp.jit[0]) {
    std::uint64_t bits = 0;
    for (int r = 0; r < n_in; ++r) bits |= static_cast<std::uint64_t>(in_scalar[r]) << r;
    for (int k = 0; k < 2; ++k)
      if (cp.jit[k] && bits == cp.jit_scalar_bits[k]) {
        cp.jit[k](in, out, n, stream);
        return;
      }
  }
  const void* args[detail::max_chain_links + 1];
  // A lone chain stores non-temporally itself. Any other lone op writes its output directly
  // even when streaming: through scratch, the copy is a second pass that costs more than the
  // non-temporal stores save (sigmoid over 1e8 floats: 0.49 ns per element against 0.27).
  // Other programs stream through scratch, below.
  if (cp.direct) {
    const compiled_step& st = cp.steps[0];
    unsigned mask = 0;
    for (int j = 0; j < st.arity; ++j) {
      args[j] = in[st.args[j]];
      if (in_scalar[st.args[j]]) mask |= 1u << j;
    }
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
  // Bit r: input register r is one value broadcast over the span (no other register is).
  std::uint64_t scalar_bits = 0;
  for (int r = 0; r < n_in; ++r) scalar_bits |= static_cast<std::uint64_t>(in_scalar[r]) << r;
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
    // lines: all at once, the requests fill the core's miss buffers and stall it (xent over 1e7
    // floats: 1.29-1.34 ns per element, 1.21-1.25 spread).
    const bool prefetch = stream && off + 2 * block_size <= n;
    if (last_out >= 0) {
      tmp[last_reg] = out[last_out] + off * cp.out_bytes[static_cast<std::size_t>(last_out)];
      reg[last_reg] = tmp[last_reg];
    }
    // A step's arguments for this block, and which of them are one value.
    auto bind_args = [&](const compiled_step& st, const void** to) {
      unsigned mask = 0;
      for (int j = 0; j < st.arity; ++j) {
        to[j] = reg[st.args[j]];
        mask |= static_cast<unsigned>((scalar_bits >> st.args[j]) & 1u) << j;
      }
      return mask;
    };
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
}  // namespace detail

/// @brief Runs a fused elementwise program; outputs are C-contiguous with the broadcast shape.
inline void run_program(const compiled_program& cp, const ndarray* const* ins, ndarray* const* outs,
                        const parallelism& par = {}) {
  const program& p = *cp.prog;
  const int n_in = p.n_inputs;
  const shape_t& shape = outs[0]->shape();
  const std::int64_t total = shape.size();
  if (total == 0) return;
  if (cp.reg_types.size() > detail::max_registers) throw std::logic_error("xsym: fused program too large");

  std::size_t n_copies = 0;
  const ndarray* arr[detail::max_registers];
  const std::byte* base[detail::max_registers];
  bool scalar[detail::max_registers];
  bool flat = true;
  for (int k = 0; k < n_in; ++k) {
    const ndarray* a = ins[k];
    const bool one = a->size() == 1;
    if (!one && a->rank() > 0 && a->stride(a->rank() - 1) != 1 && a->shape(a->rank() - 1) != 1) {
      // Contiguous copies of strided inputs, in buffers kept per thread between calls.
      thread_local std::vector<ndarray> copies;
      if (copies.size() <= n_copies) copies.resize(n_copies + 8);
      ndarray& c = copies[n_copies++];
      a->copy_contiguous_into(c);
      a = &c;
    }
    arr[k] = a;
    base[k] = a->data();
    scalar[k] = one;
    if (!one && !(a->shape() == shape && a->is_c_contiguous())) flat = false;
  }
  std::byte* out_base[limits::max_outputs];
  for (std::size_t o = 0; o < p.outputs.size(); ++o) out_base[o] = outs[o]->data();
  const int threads = total >= par.elemwise_minsize ? par.threads : 1;
  const std::size_t n_out = p.outputs.size();
  if (flat) {
    bool stream = false;
    // Chains in one pass (cp.chains) do not stream: they are bound by their exps and logs, the
    // hardware prefetcher keeps up with one pass, and the copy out of scratch that streaming
    // needs costs more than the non-temporal stores save (xent over 1e7 floats: 0.79 ns per
    // element against 1.02; with cxx, 0.67 against 0.75).
    if (!cp.chains && total * cp.all_bytes >= streaming_min_bytes()) {  // else no count of the inputs reaches it
      std::int64_t bytes_per_element = 0;
      for (int k = 0; k < n_in; ++k) bytes_per_element += scalar[k] ? 0 : cp.in_bytes[static_cast<std::size_t>(k)];
      for (std::int64_t b : cp.out_bytes) bytes_per_element += b;
      stream = total * bytes_per_element >= streaming_min_bytes();
    }
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
  // Row by row over the last axis; an input either walks the row (stride 1) or repeats one value.
  const std::int64_t len = shape[shape.rank - 1];
  const std::int64_t rows = total / len;
  bool row_scalar[detail::max_registers];
  for (int k = 0; k < n_in; ++k) row_scalar[k] = strides[k][static_cast<std::size_t>(shape.rank - 1)] == 0;
  // Threads take whole rows.
  parallel_chunks(rows, 1, threads, [&](std::int64_t first, std::int64_t last) {
    const std::byte* row_in[detail::max_registers];
    std::byte* row_out[limits::max_outputs];
    for (std::int64_t r = first; r < last; ++r) {
      std::int64_t rem = r;
      for (int k = 0; k < n_in; ++k) row_in[k] = base[k];
      for (int d = shape.rank - 2; d >= 0; --d) {
        const std::int64_t i = rem % shape[d];
        rem /= shape[d];
        for (int k = 0; k < n_in; ++k)
          row_in[k] += i * strides[k][static_cast<std::size_t>(d)] * cp.in_bytes[static_cast<std::size_t>(k)];
      }
      for (std::size_t o = 0; o < n_out; ++o) row_out[o] = out_base[o] + r * len * cp.out_bytes[o];
      detail::run_span(cp, row_in, row_scalar, row_out, len);
    }
  });
}

}  // namespace xsym::cpu

#endif
