#ifndef XSYM_BACKEND_CPU_PROGRAM_HPP
#define XSYM_BACKEND_CPU_PROGRAM_HPP

// A fused elementwise program made ready to run, once per function: each step's kernel looked
// up, work shared between steps, runs of steps joined into chains.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "../../config/cold.hpp"
#include "../../config/limits.hpp"
#include "../../expr/op.hpp"
#include "fault.hpp"
#include "kernel_table.hpp"

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
/// @brief A cxx program's loops straight on a call's arguments (into(...)'s short path): input k
/// reads the argument arg[k], or constant[k] where arg[k] is negative. False, having written
/// nothing, where an input overlaps out.
using jit_direct_fn = bool (*)(const int* arg, const std::byte* const* constant, const std::byte* const* args,
                               std::byte* out, std::int64_t n);
/// @brief A typed tree's kernel (backend/cpu/typed_kernel.hpp): leaf j reads in[map[j]].
using typed_fn = void (*)(const std::byte* const* in, const std::uint8_t* map, std::byte* out, std::int64_t n,
                          bool stream);
/// @brief Where a typed tree's leaves are for into(...)'s short path: leaf j reads the call's
/// argument arg[j], or constant[j] where arg[j] is negative.
struct typed_leaves {
  std::array<int, 64> arg{};
  std::array<const std::byte*, 64> constant{};
};
/// @brief A typed tree's kernel on a call's arguments (typed_kernel.hpp's typed_direct): false,
/// having written nothing, where an argument that is not one value overlaps out.
using typed_direct_fn = bool (*)(const typed_leaves& leaves, const std::byte* const* args, std::byte* out,
                                 std::int64_t n);

/// @brief A kernel over rows of equal length (elemwise.hpp's rows path): input k of the program
/// (arg j reads in[map[j]]) starts its rows step[k] bytes apart; bit k of `column`: input k is
/// one value per row (a column along the rows). The inputs in the bits the kernel was bound
/// for are one value for the whole node; the output's rows are out_step bytes apart. `apart`:
/// the output shares no byte with any array input.
using rows_fn = void (*)(const std::byte* const* in, const std::uint8_t* map, const std::int64_t* step,
                         std::uint64_t column, std::byte* out, std::int64_t out_step, std::int64_t rows, std::int64_t len,
                         bool apart);

/// @brief A typed tree's sums in double over `rows` rows of `len` elements (typed_kernel.hpp's
/// typed_sum_rows, a reduction's fused program): input k of the program (arg j reads
/// in[map[j]]) starts its rows step[k] bytes apart (0: the same row for every row); the inputs
/// in the bits the kernel was bound for are one value. Row r's sum goes to out[r].
using sum_rows_fn = void (*)(const std::byte* const* in, const std::uint8_t* map, const std::int64_t* step,
                             std::int64_t rows, std::int64_t len, double* out);

/// @brief A OnePassGemv's blocks (one_pass.hpp's one_pass_blocks) with a typed tree's g inlined
/// (typed_kernel.hpp's typed_blocks): y = beta y0 + alpha Aᵀ g, g from u = A x row by row, leaf j
/// reading the program's input map[j] (base[r]: input r's first row, or its one value where the
/// kernel was bound for that; pass_u: u's input). u and g are kept at u_keep and g for every row.
using typed_blocks_fn = void (*)(const ndarray& a, const ndarray& x, const std::byte* const* base,
                                 int pass_u, const std::uint8_t* map, std::byte* u_keep,
                                 std::byte* g, double alpha, const ndarray* y0, double beta, ndarray& y, int threads,
                                 bool faulty);

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
  jit_direct_fn jit_direct = nullptr;  // jit[0]'s, for a program of one float output
  // The kernel a typed tree with this program's text instantiated (bind_typed_kernel): spans
  // whose one-value inputs are typed_scalar_bits run it; typed_faulty: the "typed" test fault.
  typed_fn typed = nullptr;
  typed_direct_fn typed_direct = nullptr;
  // A OnePassGemv's g alone: the blocks with the tree inlined (bind_typed_blocks), leaf j
  // reading blocks_map[j], for the one-value inputs typed_scalar_bits.
  typed_blocks_fn typed_blocks = nullptr;
  std::array<std::uint8_t, 64> blocks_map{};
  std::array<std::uint8_t, 64> typed_map{};
  std::uint64_t typed_scalar_bits = 0;
  bool typed_faulty = false;
  // Rows of a broadcast or a strided output in one call (a column along the rows stays in a
  // register): a typed tree's, which takes one-value inputs exactly where rows_scalar_bits
  // says, or a lone +, -, * or / of floats (any); rows_map: arg j's input.
  rows_fn rows = nullptr;
  std::uint64_t rows_scalar_bits = 0;
  std::array<std::uint8_t, 64> rows_map{};
  // A reduction's program: a typed tree's sums (bind_typed_sum), arg j reading sum_map[j].
  sum_rows_fn typed_sum = nullptr;
  std::uint64_t typed_sum_scalar_bits = 0;  // the inputs typed_sum reads as one value
  std::array<std::uint8_t, 64> sum_map{};
};

namespace detail {
inline constexpr std::int64_t min_block = 256, max_block = 4096;
// Bytes per block of the scratch registers and of the inputs twice over: a 32 KiB L1, or half
// of it when streaming, where the next block's inputs arrive while this one computes (larger
// blocks spill out of L1, smaller ones pay the per-block cost more often).
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
  // batches is small next to one, but not next to an add.
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
  // A lone +, -, * or / of floats also runs rows in one call (not under a fault: the wrapped
  // kernel is what a fault test must see).
  if (share && cp.direct && cp.steps[0].kernel && cp.steps[0].arity == 2 &&
      detail::fault_state().kind == testing::fault_kind::none && !testing::broken_simd_kernel()) {
    const compiled_step& st = cp.steps[0];
    const dtype t = cp.reg_types[static_cast<std::size_t>(st.dst)];
    if (cp.reg_types[static_cast<std::size_t>(st.args[0])] == t && cp.reg_types[static_cast<std::size_t>(st.args[1])] == t) {
      if (t == dtype::float32) cp.rows = rows_kernel_of<float>(st.op);
      else if (t == dtype::float64) cp.rows = rows_kernel_of<double>(st.op);
      cp.rows_map[0] = static_cast<std::uint8_t>(st.args[0]);
      cp.rows_map[1] = static_cast<std::uint8_t>(st.args[1]);
    }
  }
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

/// The instructions of p that output `out` needs, as a program of that one output (the same
/// inputs; only the registers those instructions write): what a OnePassGemv's blocks compute
/// per block (one_pass_blocks).
inline std::shared_ptr<const program> output_program(const program& p, int out) {
  auto q = std::make_shared<program>();
  q->n_inputs = p.n_inputs;
  q->absorbed = p.absorbed;
  const int result = p.outputs[static_cast<std::size_t>(out)];
  std::vector<char> needed(p.reg_types.size(), 0);
  needed[static_cast<std::size_t>(result)] = 1;
  std::vector<instruction> code;
  for (auto it = p.code.rbegin(); it != p.code.rend(); ++it) {
    if (!needed[static_cast<std::size_t>(it->dst)]) continue;
    code.push_back(*it);
    const int arity = info(it->op).arity;
    for (int j = 0; j < arity; ++j) needed[static_cast<std::size_t>(it->args[j])] = 1;
  }
  // Registers renumbered in the order they are written: another output's registers (a
  // comparison's bools) would keep a typed tree's kernel, all of one element type, from binding.
  std::vector<int> reg(p.reg_types.size(), -1);
  q->reg_types.assign(p.reg_types.begin(), p.reg_types.begin() + p.n_inputs);
  for (int r = 0; r < p.n_inputs; ++r) reg[static_cast<std::size_t>(r)] = r;
  for (auto it = code.rbegin(); it != code.rend(); ++it) {
    instruction ins = *it;
    for (int j = 0; j < info(ins.op).arity; ++j) ins.args[j] = reg[static_cast<std::size_t>(ins.args[j])];
    int& d = reg[static_cast<std::size_t>(ins.dst)];
    if (d < 0) {
      d = static_cast<int>(q->reg_types.size());
      q->reg_types.push_back(p.reg_types[static_cast<std::size_t>(ins.dst)]);
    }
    ins.dst = d;
    q->code.push_back(ins);
  }
  q->outputs = {reg[static_cast<std::size_t>(result)]};
  // The output's own term: a typed tree with that text binds its kernel (bind_typed_kernel).
  q->text = xsym::detail::register_texts(*q)[static_cast<std::size_t>(q->outputs[0])];
  return q;
}
XSYM_COLD_END
}  // namespace detail

/// @brief The program with its kernels looked up; Simd=false gives the reference kernels.
template <bool Simd>
compiled_program compile_program(std::shared_ptr<const program> p) {
  return detail::compile_program_with(std::move(p), &kernel_for<Simd>, Simd);
}

}  // namespace xsym::cpu

#endif
