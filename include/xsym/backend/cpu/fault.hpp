#ifndef XSYM_BACKEND_CPU_FAULT_HPP
#define XSYM_BACKEND_CPU_FAULT_HPP

// Test-only faults: one scalar op, product, reduction or executor path computes slightly wrong
// values, so that a test suite can show that it notices (tests/oracle/mutation.sh). Nothing
// here runs on a call unless a fault is set: kernels are wrapped when a function is built, and
// the product and reduction entries of the kernel tables are swapped for wrappers.

#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../config/cold.hpp"
#include "../../expr/ndarray.hpp"
#include "../../expr/op.hpp"
#include "kernel_table.hpp"
#include "chain_kernels.hpp"

namespace xsym::cpu {

namespace testing {
/// Test-only: the vectorized kernel of this op is deliberately wrong (its first element is
/// off by 1e-3), to prove that DebugMode catches a broken op. Read when a function is built.
inline std::optional<scalar_op>& broken_simd_kernel() {
  static std::optional<scalar_op> op;
  return op;
}

/// What a fault breaks: one scalar op (its steps never join a chain, so its kernel runs
/// wherever the op is computed), in both kernel sets or, with ":ref" or ":simd" after its name,
/// in the reference or the vectorized one only; a product or reduction entry; the chains run by
/// the block executor (chain), by the one-element path (chain_one) or in one pass
/// (chains_pass); or the kernels that share exp(-|u|) among sigmoids and softpluses.
enum class fault_kind : std::uint8_t { none, scalar, product, reduction, chain, chain_one, chains_pass, shared_exp, typed };

struct fault {
  fault_kind kind = fault_kind::none;
  scalar_op scalar = scalar_op::identity;
  op_kind product = op_kind::dot;
  reduce_op reduction = reduce_op::sum;
  int kernel_set = -1;  // scalar: -1 both, 0 the reference kernels, 1 the vectorized ones
  std::string name;
};
}  // namespace testing

namespace detail {
XSYM_COLD_BEGIN  // names and parsing: when a fault is set
// "abs_" -> "abs", "scalar_sigmoid" -> "sigmoid": the op's name without Theano's decorations.
inline std::string fault_name(scalar_op op) {
  std::string_view n = info(op).name;
  if (n.substr(0, 7) == "scalar_") n.remove_prefix(7);
  if (!n.empty() && n.back() == '_') n.remove_suffix(1);
  return std::string(n);
}

inline std::vector<std::pair<std::string, testing::fault>> fault_table() {
  using testing::fault;
  using testing::fault_kind;
  std::vector<std::pair<std::string, fault>> t;
  for (int k = 0; k <= static_cast<int>(scalar_op::identity); ++k) {
    fault f;
    f.kind = fault_kind::scalar;
    f.scalar = static_cast<scalar_op>(k);
    t.push_back({fault_name(f.scalar), f});
    for (int set : {0, 1}) {
      f.kernel_set = set;
      t.push_back({fault_name(f.scalar) + (set ? ":simd" : ":ref"), f});
    }
  }
  for (auto [name, kind] : {std::pair{"dot", op_kind::dot}, {"gemv", op_kind::gemv}, {"dot22", op_kind::dot22}}) {
    fault f;
    f.kind = fault_kind::product;
    f.product = kind;
    t.push_back({name, f});
  }
  for (int r = 0; r <= static_cast<int>(reduce_op::mean); ++r) {
    fault f;
    f.kind = fault_kind::reduction;
    f.reduction = static_cast<reduce_op>(r);
    std::string name(reduce_name(f.reduction));
    for (auto& c : name) c = static_cast<char>(c | 0x20);  // "Sum" -> "sum"
    t.push_back({"reduce_" + name, f});
  }
  for (auto [name, kind] : {std::pair{"chain", fault_kind::chain}, {"chain_one", fault_kind::chain_one},
                            {"chains_pass", fault_kind::chains_pass}, {"shared_exp", fault_kind::shared_exp},
                            {"typed", fault_kind::typed}}) {
    fault f;
    f.kind = kind;
    t.push_back({name, f});
  }
  for (auto& [name, f] : t) f.name = name;
  return t;
}

inline testing::fault parse_fault(std::string_view name) {
  if (name.empty() || name == "none") return {};
  std::string known;
  for (const auto& [n, f] : fault_table()) {
    if (n == name) return f;
    known += (known.empty() ? "" : ", ") + n;
  }
  throw std::invalid_argument("xsym: unknown fault '" + std::string(name) + "' (known: " + known + ")");
}
XSYM_COLD_END

// The fault in force, first from the environment variable XSYM_TEST_FAULT.
inline testing::fault& fault_state() {
  static testing::fault f = [] {
    const char* env = std::getenv("XSYM_TEST_FAULT");
    return parse_fault(env ? env : "");
  }();
  return f;
}

// How a wrapped kernel spoils its result: the fault hook changes the middle element of each
// call (in the SIMD body or the scalar tail, by the call's length) by a relative 2^-14 in
// float32 and 2^-42 in float64 (512 ulps or more: within no honest tolerance of one op, yet
// far below what a loose one lets through), adds 1 to an integer and negates a bool;
// broken_simd_kernel adds 1e-3 to the first float element.
enum class perturb_how : std::uint8_t { middle, first_plus };

inline void perturb(void* base, dtype t, std::int64_t n, perturb_how how) {
  if (n <= 0) return;
  const std::int64_t i = how == perturb_how::middle ? n / 2 : 0;
  const bool first = how == perturb_how::first_plus;
  switch (t) {
    case dtype::bool_:
      if (!first) static_cast<bool*>(base)[i] = !static_cast<bool*>(base)[i];
      break;
    case dtype::int32:
      if (!first) {
        auto& v = static_cast<std::int32_t*>(base)[i];
        v = static_cast<std::int32_t>(static_cast<std::uint32_t>(v) + 1u);
      }
      break;
    case dtype::int64:
      if (!first) {
        auto& v = static_cast<std::int64_t*>(base)[i];
        v = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) + 1u);
      }
      break;
    case dtype::float32: {
      float& v = static_cast<float*>(base)[i];
      v = first ? v + 1e-3f : v == 0 ? 0x1p-14f : v + v * 0x1p-14f;
      break;
    }
    case dtype::float64: {
      double& v = static_cast<double*>(base)[i];
      v = first ? v + 1e-3 : v == 0 ? 0x1p-42 : v + v * 0x1p-42;
      break;
    }
  }
}

// A wrapped kernel finds the kernel it wraps in its slot: kernel_fn carries no data of its own.
struct fault_slot {
  kernel_fn inner = nullptr;
  dtype out = dtype::float64;
  perturb_how how = perturb_how::middle;
};
inline constexpr int fault_slot_count = 32;
inline std::array<fault_slot, fault_slot_count>& fault_slots() {
  static std::array<fault_slot, fault_slot_count> s;
  return s;
}
template <int K>
void faulty_kernel(void* dst, const void* const* args, unsigned mask, std::int64_t n) {
  const fault_slot& s = fault_slots()[K];
  s.inner(dst, args, mask, n);
  perturb(dst, s.out, n, s.how);
}
template <dtype D>
void faulty_chain(void* dst, const void* const* args, unsigned mask, std::int64_t n, std::uint32_t codes, int links,
                  bool stream) {
  kernels_of(D).chain(dst, args, mask, n, codes, links, stream);
  perturb(dst, D, n, perturb_how::middle);
}
template <dtype D>
void faulty_chain_one(void* dst, const void* const* args, std::uint32_t codes, int links) {
  kernels_of(D).chain_one(dst, args, codes, links);
  perturb(dst, D, 1, perturb_how::middle);
}
template <dtype D>
void faulty_chains(const chain_call* calls, int n_chains, std::int64_t n) {
  kernels_of(D).chains(calls, n_chains, n);
  for (int c = 0; c < n_chains; ++c) perturb(calls[c].dst, D, n, perturb_how::middle);
}

XSYM_COLD_BEGIN  // when a function is built with a fault set
template <int... K>
kernel_fn faulty_kernel_at(int k, std::integer_sequence<int, K...>) {
  static constexpr kernel_fn table[] = {&faulty_kernel<K>...};
  return table[k];
}

// inner, spoiled as `how` says, through a slot (the same slot for the same kernel).
inline kernel_fn wrap_kernel(kernel_fn inner, dtype out, perturb_how how) {
  static std::mutex m;
  std::lock_guard lock(m);
  auto& slots = fault_slots();
  int k = 0;
  for (; k < fault_slot_count && slots[static_cast<std::size_t>(k)].inner; ++k) {
    const fault_slot& s = slots[static_cast<std::size_t>(k)];
    if (s.inner == inner && s.out == out && s.how == how) break;
  }
  if (k == fault_slot_count) throw std::logic_error("xsym: more kernels to break than fault slots");
  slots[static_cast<std::size_t>(k)] = {inner, out, how};
  return faulty_kernel_at(k, std::make_integer_sequence<int, fault_slot_count>{});
}

// Whether steps of op are wrapped in this kernel set (simd: the vectorized one). Such a step
// never joins a chain, so the wrapped kernel is what computes the op.
inline bool fault_in_set(const testing::fault& f, bool simd) {
  return f.kernel_set < 0 || f.kernel_set == static_cast<int>(simd);
}
inline bool fault_on_op(scalar_op op, bool simd) {
  const testing::fault& f = fault_state();
  return (f.kind == testing::fault_kind::scalar && f.scalar == op && fault_in_set(f, simd)) ||
         (simd && testing::broken_simd_kernel() == op);
}

// Wraps the steps of a compiled program that the fault in force breaks (Program:
// compiled_program, whose steps' chains are built already).
template <class Program>
void apply_fault(Program& cp, bool simd) {
  using testing::fault_kind;
  const testing::fault& f = fault_state();
  if (f.kind == fault_kind::none && !(simd && testing::broken_simd_kernel())) return;
  auto dtype_of_reg = [&](int r) { return cp.reg_types[static_cast<std::size_t>(r)]; };
  auto is_float32 = [](dtype t) { return t == dtype::float32; };
  for (auto& st : cp.steps) {
    const dtype out = dtype_of_reg(st.dst);
    if (st.chain) {
      if (f.kind == fault_kind::chain)
        st.chain = is_float32(out) ? &faulty_chain<dtype::float32> : &faulty_chain<dtype::float64>;
      if (f.kind == fault_kind::chain_one)
        st.chain_one = is_float32(out) ? &faulty_chain_one<dtype::float32> : &faulty_chain_one<dtype::float64>;
      continue;
    }
    if (simd && testing::broken_simd_kernel() == st.op && st.shared < 0 &&
        (out == dtype::float32 || out == dtype::float64))
      st.kernel = wrap_kernel(st.kernel, out, perturb_how::first_plus);
    if ((f.kind == fault_kind::scalar && f.scalar == st.op && fault_in_set(f, simd)) ||
        (f.kind == fault_kind::shared_exp && st.shared >= 0))
      st.kernel = wrap_kernel(st.kernel, out, perturb_how::middle);
  }
  if (cp.chains && f.kind == fault_kind::chains_pass)
    cp.chains =
        is_float32(dtype_of_reg(cp.steps[0].dst)) ? &faulty_chains<dtype::float32> : &faulty_chains<dtype::float64>;
}
XSYM_COLD_END

// Products and reductions are looked up per call: a fault on one is a copy of the kernel table
// with that entry swapped for a wrapper, installed while the fault is set.
inline const typed_kernels*& original_kernels(dtype d) {
  static const typed_kernels* tables[5] = {};
  return tables[static_cast<int>(d)];
}

inline void faulty_gemv(const ndarray& a, std::int64_t rs, std::int64_t cs, const ndarray& x, ndarray& y,
                        std::int64_t m, std::int64_t k, double alpha, bool accumulate, const ndarray* y0, double beta,
                        const parallelism& par) {
  original_kernels(a.type())->gemv(a, rs, cs, x, y, m, k, alpha, accumulate, y0, beta, par);
  perturb(y.data(), y.type(), m, perturb_how::middle);
}
inline void faulty_dot(const ndarray& a, const ndarray& b, ndarray& out) {
  original_kernels(a.type())->dot(a, b, out);
  perturb(out.data(), out.type(), 1, perturb_how::middle);
}
inline void faulty_dot22(const ndarray& a, const ndarray& b, ndarray& c, double alpha, bool accumulate) {
  original_kernels(c.type())->dot22(a, b, c, alpha, accumulate);
  perturb(c.data(), c.type(), c.size(), perturb_how::middle);
}
inline void faulty_reduce(const op& o, const reduce_layout& l, const ndarray& in, ndarray& out) {
  original_kernels(in.type())->reduce(o, l, in, out);
  if (o.reduction == fault_state().reduction) perturb(out.data(), out.type(), out.size(), perturb_how::middle);
}

XSYM_COLD_BEGIN  // registering kernels and setting faults
// The table to look element type d up in: its own, or a copy with the faulty entry.
inline const typed_kernels* kernels_with_fault(dtype d) {
  static typed_kernels copies[5];
  const typed_kernels* table = original_kernels(d);
  const testing::fault& f = fault_state();
  if (!table || (f.kind != testing::fault_kind::product && f.kind != testing::fault_kind::reduction)) return table;
  typed_kernels& c = copies[static_cast<int>(d)];
  c = *table;
  if (f.kind == testing::fault_kind::reduction) c.reduce = &faulty_reduce;
  else if (f.product == op_kind::gemv && c.gemv) c.gemv = &faulty_gemv;
  else if (f.product == op_kind::dot && c.dot) c.dot = &faulty_dot;
  else if (f.product == op_kind::dot22 && c.dot22) c.dot22 = &faulty_dot22;
  return &c;
}

inline void install_kernels(dtype d, const typed_kernels* table) {
  original_kernels(d) = table;
  kernel_slot(d).store(kernels_with_fault(d), std::memory_order_release);
}
XSYM_COLD_END
}  // namespace detail

namespace testing {
XSYM_COLD_BEGIN
/// @brief Every fault a test can set: each scalar op by name ("exp", "abs", "switch", ...),
/// also as "exp:ref" and "exp:simd", the products "dot", "gemv" and "dot22", the reductions
/// "reduce_sum" ... "reduce_mean", and the executor paths "chain", "chain_one", "chains_pass"
/// and "shared_exp".
inline std::vector<std::string> fault_targets() {
  std::vector<std::string> names;
  for (const auto& [n, f] : detail::fault_table()) names.push_back(n);
  return names;
}

/// @brief Test-only: sets the fault in force ("" or "none" clears it; an unknown name throws).
/// Elementwise faults reach functions built afterwards, product and reduction faults every
/// call from now on. Set it while no function runs. The environment variable XSYM_TEST_FAULT
/// sets the first one.
inline void set_fault(std::string_view name) {
  detail::fault_state() = detail::parse_fault(name);
  for (int d = 0; d < 5; ++d)
    if (detail::original_kernels(static_cast<dtype>(d)))
      detail::kernel_slot(static_cast<dtype>(d)).store(detail::kernels_with_fault(static_cast<dtype>(d)),
                                                       std::memory_order_release);
}

/// @brief The fault in force.
inline const fault& current_fault() { return detail::fault_state(); }
XSYM_COLD_END
}  // namespace testing

}  // namespace xsym::cpu

#endif
