#ifndef XSYM_BACKEND_CPU_TYPED_KERNEL_HPP
#define XSYM_BACKEND_CPU_TYPED_KERNEL_HPP

// The kernel of a typed tree (expr/typed.hpp): the whole tree on xsimd batches with every
// intermediate in registers, from the op table's expressions (detail::fn), instantiated where a
// program hands the tree to function(); and the registry from which the linker binds it to a
// fused program whose text is the tree's.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../config/intrinsics.hpp"  // before xtensor and xsimd
#include <xsimd/xsimd.hpp>

#include "../../expr/typed_rewrite.hpp"
#include "chain_kernels.hpp"
#include "fault.hpp"
#include "one_pass.hpp"
#include "program.hpp"
#include "reduce.hpp"

namespace xsym::cpu {

namespace detail {
// Leaf j's array, and its value where the leaf is rank 0 (read once, before the loop).
template <class T, int L>
struct typed_args {
  static constexpr bool rows = false;
  const T* p[L];
  T s[L];
};
// A row's leaves (typed_run_rows): leaf j reads p[j] + (i & m[j]), m[j] 0 for a leaf whose one
// value per row (a column along the rows) is a batch of copies at p[j], all bits set otherwise.
template <class T, int L>
struct typed_row_args : typed_args<T, L> {
  static constexpr bool rows = true;
  std::int64_t m[L];
};

// Each op's result is opaque to the compiler, which may then not contract a product and a sum
// into one fused multiply-add: a tree computes what the separate kernels compute, bit for bit,
// in a batch and in the tail alike (but for which NaN a result keeps where two NaNs meet:
// docs/semantics.md).
template <class X>
X settled(X x) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__)
  if constexpr (std::is_arithmetic_v<X>) {
    asm("" : "+v"(x));
  } else {
    typename X::register_type r = x;
    asm("" : "+v"(r));
    return X(r);
  }
#endif
  return x;
}

// Tree's value at element i, as X (T, or a batch of T); J is the index of its first leaf.
template <class Tree, int J>
struct typed_eval;
template <class T, std::size_t N, int J>
struct typed_eval<tree::leaf<T, N>, J> {
  template <class X, class Args>
  static X at(const Args& a, std::int64_t i) {
    if constexpr (N == 0) return X(a.s[J]);
    else if constexpr (Args::rows) return X::load_unaligned(a.p[J] + (i & a.m[J]));
    else if constexpr (std::is_same_v<X, T>) return a.p[J][i];
    else return X::load_unaligned(a.p[J] + i);
  }
};
template <class T, int J>
struct typed_eval<tree::number<T>, J> {
  template <class X, class Args>
  static X at(const Args& a, std::int64_t) {
    return X(a.s[J]);
  }
};
template <scalar_op S, class A, int J>
struct typed_eval<tree::apply<S, A>, J> {
  template <class X, class Args>
  static X at(const Args& a, std::int64_t i) {
    const X x = typed_eval<A, J>::template at<X>(a, i);
    return settled(fn<S>::apply(x, x));
  }
};
template <scalar_op S, class A, class B, int J>
struct typed_eval<tree::apply<S, A, B>, J> {
  template <class X, class Args>
  static X at(const Args& a, std::int64_t i) {
    return settled(fn<S>::apply(typed_eval<A, J>::template at<X>(a, i), typed_eval<B, J + A::leaves>::template at<X>(a, i)));
  }
};

template <class Tree>
struct leaf_ranks {
  static constexpr void into(bool*& out) { *out++ = Tree::rank == 0; }
};
template <scalar_op S, class... A>
struct leaf_ranks<tree::apply<S, A...>> {
  static constexpr void into(bool*& out) { (leaf_ranks<A>::into(out), ...); }
};
// Bit j: leaf j is rank 0 (one value for the whole span).
template <class Tree>
constexpr std::uint64_t scalar_leaves() {
  bool r[Tree::leaves] = {};
  bool* p = r;
  leaf_ranks<Tree>::into(p);
  std::uint64_t bits = 0;
  for (int j = 0; j < Tree::leaves; ++j) bits |= static_cast<std::uint64_t>(r[j]) << j;
  return bits;
}

// Whether each op of the tree gives a batch's lanes the bits its scalar form gives: the
// correctly rounded + - * / (settled keeps them from contracting) and the exact neg, sqr and
// abs. exp, log and the table's other functions give other bits on a batch than on a scalar,
// and a tree must give each op's own kernels' bits at every position, tail included.
template <class Tree>
struct lanes_as_scalars : std::true_type {};
template <scalar_op S, class... A>
struct lanes_as_scalars<tree::apply<S, A...>>
    : std::bool_constant<(S == scalar_op::add || S == scalar_op::sub || S == scalar_op::mul || S == scalar_op::true_div ||
                          S == scalar_op::neg || S == scalar_op::sqr || S == scalar_op::abs) &&
                         (lanes_as_scalars<A>::value && ...)> {};

// Whether spans of `len` bytes at p and at out share no byte: their starts differ by at least
// len either way, i.e. p - out + len - 1 (unsigned, wrapping) is not below 2 len - 1.
[[gnu::always_inline]] inline bool spans_apart(const void* p, const void* out, std::uintptr_t len) {
  return reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(out) + (len - 1) >= 2 * len - 1;
}

// Leaf j's array, from the program's inputs (leaf j reads in[map[j]]).
template <class Tree, class T = typename Tree::value_type, int L = Tree::leaves>
[[gnu::always_inline]] inline typed_args<T, L> run_args(const std::byte* const* in, const std::uint8_t* map) {
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  typed_args<T, L> a;
  for (int j = 0; j < L; ++j) {
    a.p[j] = reinterpret_cast<const T*>(in[map[j]]);
    a.s[j] = (one_value >> j) & 1u ? a.p[j][0] : T(0);
  }
  return a;
}

// Leaf j's array, from a call's arguments (typed_leaves): unrolled from the tree's type.
template <class Tree, class T = typename Tree::value_type, int L = Tree::leaves>
[[gnu::always_inline]] inline typed_args<T, L> direct_args(const typed_leaves& d, const std::byte* const* args) {
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  typed_args<T, L> a;
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (
        [&] {
          const int k = d.arg[J];
          a.p[J] = reinterpret_cast<const T*>(k < 0 ? d.constant[J] : args[k]);
          if constexpr ((one_value >> J) & 1u) a.s[J] = a.p[J][0];
        }(),
        ...);
  }(std::make_integer_sequence<int, L>{});
  return a;
}

// The last n - i elements (fewer than a batch) as one batch over copies of the leaves' last
// elements (tail_batch), as the ops' own kernels take theirs.
// Elements [i, n) into out[0, n - i).
template <class Tree, class T, int L>
[[gnu::always_inline]] inline void typed_tail_at(const typed_args<T, L>& a, T* const out, std::int64_t i, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  alignas(64) T copies[L][w];
  alignas(64) T result[w];
  typed_args<T, L> t = a;
  const std::int64_t r = n - i;
  for (int j = 0; j < L; ++j)
    if (!((one_value >> j) & 1u)) {
      tail_batch<B>(a.p[j] + i, r, copies[j]);
      t.p[j] = copies[j];
    }
  typed_eval<Tree, 0>::template at<B>(t, 0).store_aligned(result);
  for (std::int64_t j = 0; j < r; ++j) out[j] = result[j];
}
template <class Tree, class T, int L>
[[gnu::always_inline]] inline void typed_tail(const typed_args<T, L>& a, T* const out, std::int64_t i, std::int64_t n) {
  typed_tail_at<Tree>(a, out + i, i, n);
}

// The tails out of line, the leaves found again: with `a` (or the aligned copies) in the loop's
// function, every call set up a realigned frame for it.
template <class Tree>
[[gnu::noinline]] void typed_run_tail(const std::byte* const* in, const std::uint8_t* map, std::byte* out,
                                      std::int64_t i, std::int64_t n) {
  typed_tail<Tree>(run_args<Tree>(in, map), reinterpret_cast<typename Tree::value_type*>(out), i, n);
}
template <class Tree>
[[gnu::noinline]] void typed_direct_tail(const typed_leaves& d, const std::byte* const* args, std::byte* out,
                                         std::int64_t i, std::int64_t n) {
  typed_tail<Tree>(direct_args<Tree>(d, args), reinterpret_cast<typename Tree::value_type*>(out), i, n);
}

// The tree over n elements of out from a's leaves; returns where the elements it left start (n
// where none are left: the caller's tail takes them). With `stream`, and out on a cache line,
// the batches leave with non-temporal stores (as a streaming chain's do). With `apart` (out
// shares no byte with an array leaf) and ops whose lanes compute as their scalars do, the last
// n % w elements come from one batch ending at n: it recomputes a few elements already
// written, with the same bits, where a scalar tail takes one iteration per element (up to 15
// with AVX-512 floats).
// Inlined into both callers: `a` then never leaves registers, where a reference to it would
// make the stores (which may alias anything) reload its pointers at every batch.
template <class Tree, class T, class Args>
[[gnu::always_inline]] inline std::int64_t typed_loop(const Args& a, T* const out, std::int64_t n, bool stream,
                                                      bool apart) {
  using B = xsimd::batch<T>;
  std::int64_t i = 0;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  if (nt_stores && stream && reinterpret_cast<std::uintptr_t>(out) % 64 == 0) {
    for (; i + w <= n; i += w) nt_store(typed_eval<Tree, 0>::template at<B>(a, i), out + i);
    stream_fence();
  } else {
    for (; i + 4 * w <= n; i += 4 * w) {
      typed_eval<Tree, 0>::template at<B>(a, i).store_unaligned(out + i);
      typed_eval<Tree, 0>::template at<B>(a, i + w).store_unaligned(out + i + w);
      typed_eval<Tree, 0>::template at<B>(a, i + 2 * w).store_unaligned(out + i + 2 * w);
      typed_eval<Tree, 0>::template at<B>(a, i + 3 * w).store_unaligned(out + i + 3 * w);
    }
    for (; i + w <= n; i += w) typed_eval<Tree, 0>::template at<B>(a, i).store_unaligned(out + i);
  }
  if (i < n && lanes_as_scalars<Tree>::value && apart && n >= w) {
    typed_eval<Tree, 0>::template at<B>(a, n - w).store_unaligned(out + n - w);
    return n;
  }
  return i;
}

/// The tree over n elements: leaf j reads the program's input in[map[j]].
template <class Tree>
void typed_run(const std::byte* const* in, const std::uint8_t* map, std::byte* out_bytes, std::int64_t n, bool stream) {
  using T = typename Tree::value_type;
  constexpr int L = Tree::leaves;
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  constexpr std::int64_t w = static_cast<std::int64_t>(xsimd::batch<T>::size);
  if (n <= 0) return;
  // Under a batch (a OnePassGemv's block of rows), the tail alone: no loop to set up.
  if (n < w) return typed_run_tail<Tree>(in, map, out_bytes, 0, n);
  const typed_args<T, L> a = run_args<Tree>(in, map);
  // Whether out is apart from every array leaf, asked only where there is a tail to take.
  bool apart = lanes_as_scalars<Tree>::value && n % w != 0 && n >= w;
  if (apart) {
    const std::uintptr_t len = static_cast<std::uintptr_t>(n) * sizeof(T);
    for (int j = 0; j < L; ++j)
      if (!((one_value >> j) & 1u)) apart &= spans_apart(a.p[j], out_bytes, len);
  }
  const std::int64_t i = typed_loop<Tree>(a, reinterpret_cast<T*>(out_bytes), n, stream, apart);
  if (i < n) typed_run_tail<Tree>(in, map, out_bytes, i, n);
}

/// The tree over n elements straight from a call's arguments (typed_direct_fn): each leaf's
/// place and overlap check are unrolled from the tree's type, with no table of program inputs
/// between the call and the loop.
template <class Tree>
bool typed_direct(const typed_leaves& d, const std::byte* const* args, std::byte* out_bytes, std::int64_t n) {
  using T = typename Tree::value_type;
  constexpr int L = Tree::leaves;
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  if (n <= 0) return true;
  const std::uintptr_t len = static_cast<std::uintptr_t>(n) * sizeof(T);
  const typed_args<T, L> a = direct_args<Tree>(d, args);
  // An array leaf beside the destination, or a one-value leaf inside it (the tail reads it
  // again after the loop wrote it): the call loop computes into a buffer of its own.
  bool apart = true;
  for (int j = 0; j < L; ++j)
    apart &= (one_value >> j) & 1u ? reinterpret_cast<std::uintptr_t>(a.p[j]) - reinterpret_cast<std::uintptr_t>(out_bytes) >= len
                                   : spans_apart(a.p[j], out_bytes, len);
  if (!apart) return false;
  const std::int64_t i = typed_loop<Tree>(a, reinterpret_cast<T*>(out_bytes), n, false, true);
  if (i < n) typed_direct_tail<Tree>(d, args, out_bytes, i, n);
  return true;
}

// A row's last len - i elements (fewer than a batch), as typed_tail takes them: one batch over
// copies of each array leaf's last elements; a column's batch already holds its value.
template <class Tree, class T, int L>
[[gnu::noinline]] void typed_row_tail(const typed_row_args<T, L>& a, const bool* col, const T (*held)[xsimd::batch<T>::size],
                                      T* const out, std::int64_t i, std::int64_t len) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  alignas(64) T copies[L][w];
  alignas(64) T result[w];
  typed_args<T, L> t;
  const std::int64_t r = len - i;
  for (int j = 0; j < L; ++j) {
    t.s[j] = a.s[j];
    t.p[j] = held[j];
    if (!((one_value >> j) & 1u) && !col[j]) {
      tail_batch<B>(a.p[j] + i, r, copies[j]);
      t.p[j] = copies[j];
    }
  }
  typed_eval<Tree, 0>::template at<B>(t, 0).store_aligned(result);
  for (std::int64_t k = 0; k < r; ++k) out[i + k] = result[k];
}

/// The tree over `rows` rows of `len` elements (elemwise.hpp's rows path): leaf j reads the
/// program's input in[map[j]], whose rows are step[map[j]] bytes apart; where bit map[j] of
/// column is set, the input is one value per row (a column along the rows, step apart), held
/// in a register-width batch for the row. Every element is computed on a batch, the row's
/// last len % w ones as typed_run computes them: from copies (typed_tail), or with `apart`
/// (the output shares no byte with an array input) by one batch ending at the row's end.
template <class Tree>
void typed_run_rows(const std::byte* const* in, const std::uint8_t* map, const std::int64_t* step, std::uint64_t column,
                    std::byte* out_bytes, std::int64_t out_step, std::int64_t rows, std::int64_t len, bool apart) {
  using T = typename Tree::value_type;
  using B = xsimd::batch<T>;
  constexpr int L = Tree::leaves;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  apart = apart && lanes_as_scalars<Tree>::value && len >= w;
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  alignas(64) T held[L][w];
  typed_row_args<T, L> a;
  const std::byte* at[L];
  std::int64_t by[L];
  bool col[L];
  for (int j = 0; j < L; ++j) {
    at[j] = in[map[j]];
    by[j] = step[map[j]];
    col[j] = !((one_value >> j) & 1u) && ((column >> map[j]) & 1u);
    a.m[j] = col[j] ? 0 : ~std::int64_t{0};
    a.p[j] = col[j] ? held[j] : reinterpret_cast<const T*>(at[j]);
    a.s[j] = (one_value >> j) & 1u ? reinterpret_cast<const T*>(at[j])[0] : T(0);
  }
  for (std::int64_t r = 0; r < rows; ++r, out_bytes += out_step) {
    for (int j = 0; j < L; ++j) {
      if ((one_value >> j) & 1u) continue;
      if (col[j]) B(*reinterpret_cast<const T*>(at[j] + r * by[j])).store_aligned(held[j]);
      else a.p[j] = reinterpret_cast<const T*>(at[j] + r * by[j]);
    }
    T* const out = reinterpret_cast<T*>(out_bytes);
    std::int64_t i = 0;
    for (; i + w <= len; i += w) typed_eval<Tree, 0>::template at<B>(a, i).store_unaligned(out + i);
    if (i == len) continue;
    if (apart) typed_eval<Tree, 0>::template at<B>(a, len - w).store_unaligned(out + len - w);
    else typed_row_tail<Tree>(a, col, held, out, i, len);
  }
}

// The tree's values for sum_values (reduce.hpp): a block at a time into a buffer that stays
// in L1, each element computed as typed_run computes it (the tail from copies, typed_tail).
template <class Tree, class T, int L>
struct tree_values {
  using B = xsimd::batch<T>;
  static constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  static constexpr std::int64_t size = sum_block > w ? sum_block : w;
  typed_args<T, L> a;
  alignas(64) T buf[size];
  [[gnu::always_inline]] const T* block(std::int64_t i) {
    for (std::int64_t k = 0; k < sum_block; k += w) typed_eval<Tree, 0>::template at<B>(a, i + k).store_aligned(buf + k);
    return buf;
  }
  const T* rest(std::int64_t i, std::int64_t n) {
    std::int64_t k = 0;
    for (; i + k + w <= n; k += w) typed_eval<Tree, 0>::template at<B>(a, i + k).store_aligned(buf + k);
    if (i + k < n) typed_tail_at<Tree>(a, buf + k, i + k, n);
    return buf;
  }
};
/// The tree's sum over each of `rows` rows of `len` elements, in double, in sum_contiguous's
/// order: the bits run_reduce gives on the tree's values (sum_rows_fn).
template <class Tree>
void typed_sum_rows(const std::byte* const* in, const std::uint8_t* map, const std::int64_t* step, std::int64_t rows,
                    std::int64_t len, double* out) {
  using T = typename Tree::value_type;
  constexpr int L = Tree::leaves;
  constexpr std::uint64_t one_value = scalar_leaves<Tree>();
  tree_values<Tree, T, L> v{run_args<Tree>(in, map), {}};
  const T* first[L];
  std::int64_t by[L];
  for (int j = 0; j < L; ++j) {
    first[j] = v.a.p[j];
    by[j] = (one_value >> j) & 1u ? 0 : step[map[j]];
  }
  auto at_row = [&](std::int64_t r) {
    for (int j = 0; j < L; ++j) v.a.p[j] = reinterpret_cast<const T*>(reinterpret_cast<const std::byte*>(first[j]) + r * by[j]);
  };
  std::int64_t r = 0;
#if defined(__AVX512F__)
  // Rows of whole batches under a block: eight rows' vectors straight from the tree's batches,
  // then their sums at once, each to the bits sum_values gives it (as the plain row sums).
  using B = xsimd::batch<T>;
  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
  if constexpr (sizeof(B) == 64) {
    if (len % w == 0 && len > 0 && len < sum_block) {
      __m512d rv[8];
      for (; r + 8 <= rows; r += 8) {
        for (int q = 0; q < 8; ++q) {
          at_row(r + q);
          __m512d s = _mm512_setzero_pd();
          for (std::int64_t k = 0; k < len; k += w) {
            const B b = typed_eval<Tree, 0>::template at<B>(v.a, k);
            if constexpr (std::is_same_v<T, float>) {
              const __m512 f = b;
              s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
              s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
            } else {
              s = _mm512_add_pd(s, static_cast<__m512d>(b));
            }
          }
          rv[q] = row_total(s);
        }
        reduce_rows8(rv, out + r);
      }
    }
  }
#endif
  for (; r < rows; ++r) {
    at_row(r);
    out[r] = sum_values<T>(v, len);
  }
}

/// A OnePassGemv's blocks of rows with the tree as g, computed inside the loop: each block's g
/// is the tree's tail (typed_tail_at: one batch over copies of its rows, so the bits of its
/// kernel called on the block), and the loop's registers stay live across it where a call would
/// spill them. u's leaf reads the kept u (u_keep), written first.
template <class Tree>
void typed_blocks(const ndarray& a, const ndarray& x, const std::byte* const* base, int pass_u,
                  const std::uint8_t* map, std::byte* u_keep, std::byte* g_bytes, double alpha, const ndarray* y0,
                  double beta, ndarray& y, int threads, bool faulty) {
  using T = typename Tree::value_type;
  constexpr int L = Tree::leaves;
  constexpr std::int64_t w = static_cast<std::int64_t>(xsimd::batch<T>::size);
  T* const g = reinterpret_cast<T*>(g_bytes);
  T* const uk = reinterpret_cast<T*>(u_keep);
  const std::byte* in[limits::max_registers];
  for (int j = 0; j < L; ++j) in[map[j]] = map[j] == pass_u ? u_keep : base[map[j]];
  const typed_args<T, L> rows = run_args<Tree>(in, map);
  auto g_of = [&](std::int64_t r0, std::int64_t n, const T* u) {
    for (std::int64_t q = 0; q < n; ++q) uk[r0 + q] = u[q];
    for (std::int64_t i = r0; i < r0 + n; i += w)  // one batch where a block fits one (AVX2, AVX-512)
      typed_tail_at<Tree>(rows, g + i, i, std::min(i + w, r0 + n));
    if (faulty) [[unlikely]]
      perturb(g + r0, dtype_of<T>(), n, perturb_how::middle);
  };
  one_pass_blocks_with<T>(a.data_as<T>(), a.stride(0), a.shape(0), a.shape(1), x.data_as<T>(), g_of, g,
                          static_cast<T>(alpha), y0 ? y0->data_as<T>() : nullptr, static_cast<T>(beta), y.data_as<T>(),
                          threads);
}

struct typed_blocks_entry {
  std::string pattern;
  dtype type;
  typed_blocks_fn blocks;
  std::uint64_t scalar_leaves;
  int leaves;
};

struct typed_sum_entry {
  std::string pattern;
  dtype type;
  sum_rows_fn sum;
  std::uint64_t scalar_leaves;
  int leaves;
};

struct typed_entry {
  std::string pattern;  // the tree's text, each leaf written i#
  dtype type;
  typed_fn run;
  typed_direct_fn direct;
  rows_fn rows;
  std::uint64_t scalar_leaves;
  int leaves;
};

XSYM_COLD_BEGIN
// Leaf j of the pattern is the program's input map[j]; false where the text is another tree's.
inline bool match_tree(std::string_view pattern, std::string_view text, std::uint8_t* map, int leaves) {
  std::size_t i = 0, j = 0;
  int leaf = 0;
  while (i < pattern.size()) {
    if (pattern[i] == 'i' && i + 1 < pattern.size() && pattern[i + 1] == '#') {
      if (j >= text.size() || text[j] != 'i' || leaf >= leaves) return false;
      const std::size_t digits = ++j;
      int v = 0;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) && v < 256) v = v * 10 + (text[j++] - '0');
      if (j == digits || v >= 256) return false;
      map[leaf++] = static_cast<std::uint8_t>(v);
      i += 2;
      continue;
    }
    if (j >= text.size() || text[j] != pattern[i]) return false;
    ++i;
    ++j;
  }
  return j == text.size() && leaf == leaves;
}

/// A backend's tree kernels, each registered once under its tree's text (Entry: the pattern,
/// the element type, the number of leaves and what runs it; the GPU backend has its own).
template <class Entry>
class tree_registry {
 public:
  static tree_registry& instance() {
    static tree_registry r;
    return r;
  }
  void add(Entry e) {
    std::lock_guard hold(m_lock);
    m_entries.push_back(std::move(e));
  }
  /// The entry whose text is program p's, leaf j reading p's input map[j] (64 slots): for a
  /// program of one output, two steps or more and every register of the tree's element type.
  /// With one_value (bit r: input r is one value for the whole node), the entry whose rank-0
  /// leaves are those inputs: trees of one text may differ in which leaves are rank 0
  /// (`a * x + 1` with a scalar `a` and with a vector), and only that one's kernel can run.
  std::optional<Entry> find(const program& p, std::uint8_t* map, std::optional<std::uint64_t> one_value = {},
                            std::size_t min_steps = 2) {
    if (p.outputs.size() != 1 || p.code.size() < min_steps || p.n_inputs > 64 || p.reg_types.empty()) return std::nullopt;
    const dtype t = p.reg_types[0];
    for (dtype r : p.reg_types)
      if (r != t) return std::nullopt;
    std::lock_guard hold(m_lock);
    for (const Entry& e : m_entries) {
      if (e.type != t || e.leaves > 64 || !match_tree(e.pattern, p.text, map, e.leaves)) continue;
      for (int j = 0; j < e.leaves; ++j)
        if (map[j] >= p.n_inputs) return std::nullopt;
      if constexpr (requires { e.scalar_leaves; }) {
        // Each leaf one value exactly where its input is: a text read twice can map an array
        // leaf onto the input a number leaf reads (`c * 2 + d` onto `((i0 * i1) + i1)`).
        bool fits = true;
        for (int j = 0; j < e.leaves && one_value; ++j)
          fits &= ((e.scalar_leaves >> j) & 1u) == ((*one_value >> map[j]) & 1u);
        if (!fits) continue;
      }
      return e;
    }
    return std::nullopt;
  }

 private:
  std::mutex m_lock;
  std::vector<Entry> m_entries;
};
XSYM_COLD_END
}  // namespace detail

namespace detail {
// Registered when the program starts, not when the first function asking for it is built: a
// program fused at run time finds every tree compiled into the program, whatever order its
// functions are built in.
template <class Tree>
struct typed_registration {
  static inline const bool done =
      (tree_registry<typed_entry>::instance().add({tree_pattern<Tree>(), dtype_of<typename Tree::value_type>(),
                                                  &typed_run<Tree>, &typed_direct<Tree>, &typed_run_rows<Tree>,
                                                  scalar_leaves<Tree>(),
                                                  Tree::leaves}),
       true);
};
template <class Tree>
struct typed_blocks_registration {
  static inline const bool done =
      (tree_registry<typed_blocks_entry>::instance().add({tree_pattern<Tree>(), dtype_of<typename Tree::value_type>(),
                                                         &typed_blocks<Tree>, scalar_leaves<Tree>(), Tree::leaves}),
       true);
};
template <class Tree>
struct typed_sum_registration {
  static inline const bool done =
      (tree_registry<typed_sum_entry>::instance().add({tree_pattern<Tree>(), dtype_of<typename Tree::value_type>(),
                                                      &typed_sum_rows<Tree>, scalar_leaves<Tree>(), Tree::leaves}),
       true);
};
}  // namespace detail

/// @brief Compiles Tree's kernel into the program, registered at its start: function() calls it
/// for each output and update that is a typed expression.
/// A tree of more than 64 leaves (C++ numbers count) has none: its program runs interpreted,
/// as the registry would bind none (a program's one-value inputs are 64 bits).
template <class Tree>
void use_typed_kernel() {
  if constexpr (Tree::leaves <= 64) (void)detail::typed_registration<Tree>::done;
}
/// @brief Compiles a OnePassGemv's blocks with Tree as g into the program (the vector operand of
/// dot(A, g) with a matrix A: a gradient's product with the data, Aᵀ g, once transposed).
template <class Tree>
void use_typed_blocks() {
  if constexpr (Tree::leaves <= 64 && Tree::rank == 1) (void)detail::typed_blocks_registration<Tree>::done;
}
/// @brief Compiles Tree's sums into the program (sum and mean of a typed expression).
template <class Tree>
void use_typed_sum() {
  if constexpr (Tree::leaves <= 64) (void)detail::typed_sum_registration<Tree>::done;
}

XSYM_COLD_BEGIN
/// @brief Binds a registered tree's kernel to a fused program of two or more steps whose text is
/// the tree's, whose registers are all of the tree's element type and whose one-value inputs
/// (bit r: input r) are the tree's rank-0 leaves. False where none is.
inline bool bind_typed_kernel(compiled_program& cp, std::uint64_t one_value_inputs) {
  // Sigmoids and softpluses that share one exp(-|u|) (share_work) give other bits than each op's
  // own kernel, which a tree runs: such programs keep their steps, as the one-element path does.
  for (const compiled_step& st : cp.steps)
    if (st.shared >= 0) return false;
  // Under any other fault the programs stay interpreted, so a broken op shows wherever it runs.
  const testing::fault_kind fault = detail::fault_state().kind;
  if ((fault != testing::fault_kind::none && fault != testing::fault_kind::typed) || testing::broken_simd_kernel())
    return false;
  std::array<std::uint8_t, 64> map{};
  const auto e = detail::tree_registry<detail::typed_entry>::instance().find(*cp.prog, map.data(), one_value_inputs);
  if (!e) return false;
  cp.typed = e->run;
  cp.typed_direct = e->direct;
  std::copy(map.begin(), map.begin() + e->leaves, cp.typed_map.begin());
  cp.typed_scalar_bits = one_value_inputs;  // find matched the tree's rank-0 leaves to them
  cp.typed_faulty = fault == testing::fault_kind::typed;
  cp.rows = e->rows;
  cp.rows_scalar_bits = one_value_inputs;
  cp.rows_map = cp.typed_map;
  return true;
}
/// @brief Binds a registered tree's blocks (use_typed_blocks) to the program of a OnePassGemv's g
/// alone, as bind_typed_kernel binds its kernel (after it, whose fault state it keeps). False
/// where none is.
inline bool bind_typed_blocks(compiled_program& cp, std::uint64_t one_value_inputs) {
  if (!cp.typed) return false;
  std::array<std::uint8_t, 64> map{};
  const auto e = detail::tree_registry<detail::typed_blocks_entry>::instance().find(*cp.prog, map.data(), one_value_inputs);
  if (!e) return false;
  cp.typed_blocks = e->blocks;
  std::copy(map.begin(), map.begin() + e->leaves, cp.blocks_map.begin());
  return true;
}
/// @brief Binds a registered tree's sums (use_typed_sum) to a reduction's fused program of one
/// step or more whose text is the tree's, as bind_typed_kernel binds its kernel. False where none is.
inline bool bind_typed_sum(compiled_program& cp, std::uint64_t one_value_inputs) {
  for (const compiled_step& st : cp.steps)
    if (st.shared >= 0) return false;
  if (detail::fault_state().kind != testing::fault_kind::none || testing::broken_simd_kernel()) return false;
  std::array<std::uint8_t, 64> map{};
  const auto e = detail::tree_registry<detail::typed_sum_entry>::instance().find(*cp.prog, map.data(), one_value_inputs, 1);
  if (!e) return false;
  cp.typed_sum = e->sum;
  cp.typed_sum_scalar_bits = one_value_inputs;
  std::copy(map.begin(), map.begin() + e->leaves, cp.sum_map.begin());
  return true;
}
XSYM_COLD_END

}  // namespace xsym::cpu

#endif
