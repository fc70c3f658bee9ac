#ifndef XSYM_BACKEND_CPU_CHAIN_KERNELS_HPP
#define XSYM_BACKEND_CPU_CHAIN_KERNELS_HPP

// Chains: runs of elementwise steps, each taking the one before's result, computed in one pass
// with the running value in registers; and the non-temporal stores they and cxx's kernels use.
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "scalar_kernels.hpp"

namespace xsym::cpu {

namespace detail {

// A non-temporal store of a whole batch to an address aligned to its size (x86: SSE2, AVX,
// AVX-512 registers), and the fence that orders such stores; as text too, for the kernels cxx
// compiles (the intrinsics are declared whatever the target; only the batch size in use is
// instantiated).
#define XSYM_NT_STORE                                                 \
  template <class V, class U>                                         \
  void nt_store(const V& v, U* p) {                                   \
    constexpr std::size_t bytes = sizeof(typename V::register_type); \
    constexpr bool f = std::is_same_v<U, float>;                      \
    if constexpr (bytes == 64) {                                      \
      if constexpr (f) _mm512_stream_ps(p, v);                        \
      else _mm512_stream_pd(p, v);                                    \
    } else if constexpr (bytes == 32) {                               \
      if constexpr (f) _mm256_stream_ps(p, v);                        \
      else _mm256_stream_pd(p, v);                                    \
    } else if constexpr (bytes == 16) {                               \
      if constexpr (f) _mm_stream_ps(p, v);                           \
      else _mm_stream_pd(p, v);                                       \
    } else {                                                          \
      v.store_aligned(p);                                             \
    }                                                                 \
  }                                                                   \
  inline void stream_fence() { _mm_sfence(); }
#define XSYM_NT_STORE_FALLBACK     \
  template <class V, class U>      \
  void nt_store(const V& v, U* p) { \
    v.store_aligned(p);            \
  }                                \
  inline void stream_fence() {}
#if defined(__SSE2__)
XSYM_NT_STORE
inline constexpr bool nt_stores = true;
#else
XSYM_NT_STORE_FALLBACK
inline constexpr bool nt_stores = false;
#endif
inline constexpr const char* nt_store_text = XSYM_STRINGIFY(XSYM_NT_STORE);
inline constexpr const char* nt_store_fallback_text = XSYM_STRINGIFY(XSYM_NT_STORE_FALLBACK);

/// A run of elementwise steps, each taking the one before's result, in one pass: acc = arg 0,
/// then link k (4 bits of codes) makes acc = acc OP b with b the next argument (codes 0-3:
/// add, sub, mul, div), or b OP acc (codes 4-7), or acc = OP(acc) with no argument (codes
/// 8-12: chain_unary_ops). The running value stays in registers: one load per argument and
/// one store per element, where separate kernels store and reload every intermediate. With
/// `stream`, the results from dst's first cache line on leave with non-temporal stores (the
/// caller fences).
using chain_fn = void (*)(void* dst, const void* const* args, unsigned scalar_mask, std::int64_t n,
                          std::uint32_t codes, int links, bool stream);
inline constexpr int max_chain_links = 7;
/// A link's 4-bit code: acc OP b, or b OP acc with link_reversed added, or OP(acc).
enum chain_link : unsigned {
  link_add = 0, link_sub = 1, link_mul = 2, link_div = 3,
  link_reversed = 4,
  link_neg = 8, link_sqr = 9, link_abs = 10, link_exp = 11, link_log = 12,
};
inline constexpr unsigned first_unary_link = link_neg;
/// The op of each unary link, from link_neg on.
inline constexpr scalar_op chain_unary_ops[] = {scalar_op::neg, scalar_op::sqr, scalar_op::abs, scalar_op::exp,
                                                scalar_op::log};
static_assert(std::size(chain_unary_ops) == link_log - link_neg + 1, "one unary op per unary link code");
constexpr unsigned chain_link_code(std::uint32_t codes, int k) { return (codes >> (4 * k)) & 15u; }

// A unary link on a value or a batch: the separate kernel's function, so the same bits.
template <class X>
X chain_unary(X a, unsigned code) {
  switch (code) {
    case link_neg: return fn<scalar_op::neg>::apply(a, a);
    case link_sqr: return fn<scalar_op::sqr>::apply(a, a);
    case link_abs: return fn<scalar_op::abs>::apply(a, a);
    case link_exp: return fn<scalar_op::exp>::apply(a, a);
    default: return fn<scalar_op::log>::apply(a, a);
  }
}

// One link on one value: the same IEEE operation, in the same order, as the separate kernel,
// so a chain's results are bitwise theirs.
template <class T>
T chain_link(T acc, T b, unsigned code) {
  switch (code) {
    case link_add: case link_add + link_reversed: return acc + b;  // b + acc is acc + b, bitwise
    case link_sub: return acc - b;
    case link_sub + link_reversed: return b - acc;
    case link_mul: case link_mul + link_reversed: return acc * b;
    case link_div: return acc / b;
    case link_div + link_reversed: return b / acc;
    default: return chain_unary(acc, code);
  }
}

// The links decoded once: each one's code, and for links with an argument, where it is and
// whether it is one value broadcast. The separate kernels compute a step whose arguments are
// all broadcast values once, on a batch, and every later step's input is an array: a chain
// whose arg 0 is broadcast computes a leading unary link the same way (`lead`, `start`), which
// matters where a batch and a scalar give different bits (exp, log).
template <class T>
struct chain_plan {
  unsigned code[max_chain_links];
  const T* from[max_chain_links];
  bool broadcast[max_chain_links];
  const T* first = nullptr;
  T* dst = nullptr;
  bool first_broadcast = false;
  int links = 0, start = 0;
  T lead{};

  // Filled in place: chain_loop's plans live in an array, and a temporary copied into it is
  // read back with wider loads than its fields were written with, a stalled store forward
  // each (a quarter of the chain loop's time on the logistic regression's 400 elements).
  void set(void* d, const void* const* args, unsigned mask, std::uint32_t codes, int n_links) {
    dst = static_cast<T*>(d);
    links = n_links;
    start = 0;
    int j = 1;
    for (int k = 0; k < links; ++k) {
      code[k] = chain_link_code(codes, k);
      from[k] = nullptr;
      broadcast[k] = true;
      if (code[k] < first_unary_link) {
        from[k] = static_cast<const T*>(args[j]);
        broadcast[k] = ((mask >> j) & 1u) != 0;
        ++j;
      }
    }
    first = static_cast<const T*>(args[0]);
    first_broadcast = (mask & 1u) != 0;
    if (first_broadcast) {
      lead = first[0];
      if (links > 0 && code[0] >= first_unary_link) {
        if constexpr (simd_type<T>) {  // as the separate kernel computes one value: on a batch
          alignas(64) T r[xsimd::batch<T>::size];
          chain_unary(xsimd::batch<T>(lead), code[start++]).store_aligned(r);
          lead = r[0];
        } else {
          lead = chain_unary(lead, code[start++]);
        }
      }
    }
  }
  // The first argument that is an array, not one value (nullptr when none is).
  const T* first_array() const {
    if (!first_broadcast) return first;
    for (int k = 0; k < links; ++k)
      if (from[k] && !broadcast[k]) return from[k];
    return nullptr;
  }
  T scalar(std::int64_t i) const {
    T acc = first[first_broadcast ? 0 : i];
    for (int k = 0; k < links; ++k) acc = chain_link(acc, from[k] ? from[k][broadcast[k] ? 0 : i] : acc, code[k]);
    return acc;
  }
};

// exp and log give other bits on a batch than on a scalar; the elements before the first cache
// line, which chain_loop computes as scalars, would then differ from the separate kernels'.
inline constexpr unsigned chain_exp_link = link_exp;  // this code and the next: exp and log
inline bool chain_is_exact(std::uint32_t codes, int links) {
  for (int k = 0; k < links; ++k)
    if (chain_link_code(codes, k) >= chain_exp_link) return false;
  return true;
}

/// One chain of a run of several (chain_loop, chains): its result and arguments as chain_fn
/// takes them.
struct chain_call {
  void* dst;
  const void* const* args;
  unsigned scalar_mask;
  std::uint32_t codes;
  int links;
};
inline constexpr int max_fused_chains = 8;

// Every loop over the U batches unrolled, so that acc and b live in registers: at -O2 GCC kept
// them in memory, a store and a load per batch and link (interpreted programs ran 4 times
// slower than at -O3). Not under clang, which warns for each such loop it cannot unroll, nor
// nvcc, whose host pass misplaces the pragma after a case label.
#if defined(__clang__) || defined(__CUDACC__)
#define XSYM_EACH_BATCH
#else
#define XSYM_EACH_BATCH _Pragma("GCC unroll 4")
#endif
// chain_loop's main loop uses GCC's and clang's labels as values (not nvcc's front end, nor
// other compilers: those keep the switch).
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__NVCOMPILER)
#define XSYM_THREADED_CHAINS 1
#define XSYM_CHAIN_LOOP_ALIGN [[gnu::aligned(64)]]
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#if defined(__clang__)
#pragma GCC diagnostic ignored "-Wgnu-label-as-value"
#endif
#else
#define XSYM_THREADED_CHAINS 0
#define XSYM_CHAIN_LOOP_ALIGN
#endif
// Runs chains in order over the same n elements, four batches at a time: every chain on these
// batches before any goes on to the next, so a chain reads the ones before it while they are
// still in L1 and one pass covers the lot (xent is three chains). Per element the order of the
// operations is that of running the chains one after the other, so the results are the same.
// NT (one chain only): the results from dst's first cache line on leave with non-temporal
// stores, the elements before it computed as scalars (the same operations, so the same bits,
// for chains of arithmetic; see chain). A template parameter, so that the ordinary loop is
// compiled as if streaming did not exist.
// Its start is on a cache line: otherwise where the linker put it decided how fast its threaded
// loop ran.
template <class T, bool NT>
XSYM_CHAIN_LOOP_ALIGN void chain_loop(const chain_call* calls, int n_chains, std::int64_t n) {
  chain_plan<T> plans[max_fused_chains];
  for (int c = 0; c < n_chains; ++c) {
    const chain_call& cc = calls[c];
    plans[c].set(cc.dst, cc.args, cc.scalar_mask, cc.codes, cc.links);
  }
  std::int64_t i = 0;
  if constexpr (simd_type<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t w = static_cast<std::int64_t>(B::size);
    // U batches at once; the switch is per link and per U batches, not per element.
    auto run = [&]<int U>(std::integral_constant<int, U>, const chain_plan<T>& plan, std::int64_t at) {
      B acc[U];
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = plan.first_broadcast ? B(plan.lead) : B::load_unaligned(plan.first + at + u * w);
      for (int k = plan.start; k < plan.links; ++k) {
        const unsigned code = plan.code[k];
        if (code >= first_unary_link) {
          XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = chain_unary(acc[u], code);
          continue;
        }
        const T* p = plan.from[k];
        B b[U];
        if (plan.broadcast[k])
          XSYM_EACH_BATCH for (int u = 0; u < U; ++u) b[u] = B(p[0]);
        else
          XSYM_EACH_BATCH for (int u = 0; u < U; ++u) b[u] = B::load_unaligned(p + at + u * w);
        switch (code) {
          case link_add: case link_add + link_reversed: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = acc[u] + b[u]; break;
          case link_sub: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = acc[u] - b[u]; break;
          case link_sub + link_reversed: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = b[u] - acc[u]; break;
          case link_mul: case link_mul + link_reversed: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = acc[u] * b[u]; break;
          case link_div: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = acc[u] / b[u]; break;
          default: XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = b[u] / acc[u]; break;
        }
      }
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) {
        if constexpr (NT) nt_store(acc[u], plan.dst + at + u * w);
        else acc[u].store_unaligned(plan.dst + at + u * w);
      }
    };
    // The elements before dst's first cache line as scalars, so that every batch stores a
    // whole line: when streaming, and for one chain without exp or log (whose scalars give the
    // batches' bits) whose first array argument sits as far past a line as dst does, over a
    // span long enough to pay for them. Arrays from one allocator that aligns to less than 64
    // bytes (xtensor's default gives 16) then all load and store whole lines, where each
    // access would split two; where only dst is off, aligning it would split the loads instead.
    const auto line_offset = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64; };
    const std::uintptr_t dst_offset = line_offset(plans[0].dst);
    if (NT || (n_chains == 1 && n >= 8 * w && dst_offset != 0 && chain_is_exact(calls[0].codes, calls[0].links) &&
               (!plans[0].first_array() || line_offset(plans[0].first_array()) == dst_offset)))
      for (const std::int64_t head = std::min(n, static_cast<std::int64_t>((64 - dst_offset) % 64 / sizeof(T))); i < head;
           ++i)
        plans[0].dst[i] = plans[0].scalar(i);
#if XSYM_THREADED_CHAINS
    // The main loop as threaded code: each link's body jumps straight to the next one's, and
    // each chain's store to the next chain's first load. The switch above spends a shift, a
    // bounds check, a table jump and a branch per link and per four batches, which a short chain
    // such as (x + y + z) * 2 feels.
    constexpr int U = 4;
    static void* const vector_link[13] = {&&add_v, &&sub_v, &&mul_v, &&div_v, &&add_v, &&rsub_v, &&mul_v,
                                          &&rdiv_v, &&neg_u, &&sqr_u, &&abs_u, &&exp_u, &&log_u};
    static void* const scalar_link[13] = {&&add_s, &&sub_s, &&mul_s, &&div_s, &&add_s, &&rsub_s, &&mul_s,
                                          &&rdiv_s, &&neg_u, &&sqr_u, &&abs_u, &&exp_u, &&log_u};
    // The chains flattened into one sequence of operations k: a later chain's first load, the
    // links, and each chain's store; from[k] and value[k] are operation k's array or one value.
    constexpr int max_ops = max_fused_chains * (max_chain_links + 2);
    void* next[max_ops];
    const T* from[max_ops];
    T* to[max_ops];
    T value[max_ops];
    int n_ops = 0;
    for (int c = 0; c < n_chains; ++c) {
      const chain_plan<T>& plan = plans[c];
      if (c > 0) {  // chain 0's first load opens the loop body
        next[n_ops] = plan.first_broadcast ? &&first_s : &&first_v;
        from[n_ops] = plan.first;
        value[n_ops++] = plan.lead;
      }
      for (int k = plan.start; k < plan.links; ++k) {
        const unsigned code = plan.code[k];
        next[n_ops] = plan.broadcast[k] ? scalar_link[code] : vector_link[code];
        from[n_ops] = plan.from[k];
        value[n_ops++] = plan.from[k] && plan.broadcast[k] ? plan.from[k][0] : T{};
      }
      next[n_ops] = c + 1 < n_chains ? &&store_next : &&store_last;
      to[n_ops++] = plan.dst;
    }
    const T* first = plans[0].first;
    T* const last_dst = plans[n_chains - 1].dst;  // in a register, as the one chain's dst was
    const bool first_broadcast = plans[0].first_broadcast;
    const B lead(plans[0].lead);
    B acc[U], b[U];
    int k = 0;
    for (; i + U * w <= n; i += U * w) {
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = first_broadcast ? lead : B::load_unaligned(first + i + u * w);
      k = 0;
      goto *next[0];
#define XSYM_CHAIN_VECTOR XSYM_EACH_BATCH for (int u = 0; u < U; ++u) b[u] = B::load_unaligned(from[k] + i + u * w);
#define XSYM_CHAIN_SCALAR XSYM_EACH_BATCH for (int u = 0; u < U; ++u) b[u] = B(value[k]);
#define XSYM_CHAIN_LINK(label, load, expr)        \
  label:                                          \
    load XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = expr; \
    goto *next[++k];
      XSYM_CHAIN_LINK(first_v, XSYM_CHAIN_VECTOR, b[u])
      XSYM_CHAIN_LINK(first_s, XSYM_CHAIN_SCALAR, b[u])
      XSYM_CHAIN_LINK(add_v, XSYM_CHAIN_VECTOR, acc[u] + b[u])
      XSYM_CHAIN_LINK(sub_v, XSYM_CHAIN_VECTOR, acc[u] - b[u])
      XSYM_CHAIN_LINK(rsub_v, XSYM_CHAIN_VECTOR, b[u] - acc[u])
      XSYM_CHAIN_LINK(mul_v, XSYM_CHAIN_VECTOR, acc[u] * b[u])
      XSYM_CHAIN_LINK(div_v, XSYM_CHAIN_VECTOR, acc[u] / b[u])
      XSYM_CHAIN_LINK(rdiv_v, XSYM_CHAIN_VECTOR, b[u] / acc[u])
      XSYM_CHAIN_LINK(add_s, XSYM_CHAIN_SCALAR, acc[u] + b[u])
      XSYM_CHAIN_LINK(sub_s, XSYM_CHAIN_SCALAR, acc[u] - b[u])
      XSYM_CHAIN_LINK(rsub_s, XSYM_CHAIN_SCALAR, b[u] - acc[u])
      XSYM_CHAIN_LINK(mul_s, XSYM_CHAIN_SCALAR, acc[u] * b[u])
      XSYM_CHAIN_LINK(div_s, XSYM_CHAIN_SCALAR, acc[u] / b[u])
      XSYM_CHAIN_LINK(rdiv_s, XSYM_CHAIN_SCALAR, b[u] / acc[u])
      XSYM_CHAIN_LINK(neg_u, , fn<scalar_op::neg>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(sqr_u, , fn<scalar_op::sqr>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(abs_u, , fn<scalar_op::abs>::apply(acc[u], acc[u]))
      XSYM_CHAIN_LINK(exp_u, , fn<scalar_op::exp>::apply(acc[u], acc[u]))
    log_u:
      // Where the table log runs (vlog_common), one test for special lanes in the four batches:
      // the common path alone schedules them together, faster than testing each batch. If any
      // has one, each batch takes the kernel's log.
      if constexpr (requires(const B& a) { vlog_common(a); }) {
        bool special = false;
        XSYM_EACH_BATCH for (int u = 0; u < U; ++u) special |= vlog_special_lanes(acc[u]);
        if (!special) {
          XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = vlog_common(acc[u]);
          goto *next[++k];
        }
      }
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u] = fn<scalar_op::log>::apply(acc[u], acc[u]);
      goto *next[++k];
#undef XSYM_CHAIN_LINK
#undef XSYM_CHAIN_SCALAR
#undef XSYM_CHAIN_VECTOR
    store_next:
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) acc[u].store_unaligned(to[k] + i + u * w);
      goto *next[++k];
    store_last:
      XSYM_EACH_BATCH for (int u = 0; u < U; ++u) {
        if constexpr (NT) nt_store(acc[u], last_dst + i + u * w);
        else acc[u].store_unaligned(last_dst + i + u * w);
      }
    }
#else
    for (; i + 4 * w <= n; i += 4 * w)
      for (int c = 0; c < n_chains; ++c) run(std::integral_constant<int, 4>{}, plans[c], i);
#endif
    // The rest chain by chain: batches, then the tail as one batch over copies (tail_batch), at
    // the positions a lone chain uses. A later chain reads an earlier one's tail once written.
    for (int c = 0; c < n_chains; ++c) {
      std::int64_t j = i;
      for (; j + w <= n; j += w) run(std::integral_constant<int, 1>{}, plans[c], j);
      if (j == n) continue;
      alignas(64) T copies[max_chain_links + 2][w];
      const std::int64_t r = n - j;
      chain_plan<T> tail = plans[c];
      if (!tail.first_broadcast) {
        tail_batch<B>(plans[c].first + j, r, copies[0]);
        tail.first = copies[0];
      }
      for (int k = 0; k < tail.links; ++k)
        if (tail.from[k] && !tail.broadcast[k]) {
          tail_batch<B>(plans[c].from[k] + j, r, copies[k + 1]);
          tail.from[k] = copies[k + 1];
        }
      tail.dst = copies[max_chain_links + 1];
      run(std::integral_constant<int, 1>{}, tail, 0);
      for (std::int64_t q = 0; q < r; ++q) plans[c].dst[j + q] = copies[max_chain_links + 1][q];
    }
  } else {
    for (int c = 0; c < n_chains; ++c)
      for (std::int64_t j = 0; j < n; ++j) plans[c].dst[j] = plans[c].scalar(j);
  }
}
#undef XSYM_EACH_BATCH
#if XSYM_THREADED_CHAINS
#pragma GCC diagnostic pop
#endif

// A chain over one element: chain_plan's scalar path without its set-up (the seeds'
// call-overhead function is one chain of three links).
template <class T>
void chain_one(void* dst, const void* const* args, std::uint32_t codes, int links) {
  if constexpr (simd_type<T>)
    if (!chain_is_exact(codes, links)) {  // exp and log: a batch's bits, as chain_loop's tail
      const chain_call call{dst, args, 0u, codes, links};
      return chain_loop<T, false>(&call, 1, 1);
    }
  T acc = *static_cast<const T*>(args[0]);
  for (int k = 0, j = 1; k < links; ++k) {
    const unsigned code = chain_link_code(codes, k);
    acc = code >= first_unary_link ? chain_unary(acc, code) : chain_link(acc, *static_cast<const T*>(args[j++]), code);
  }
  *static_cast<T*>(dst) = acc;
}

template <class T>
void chain(void* dstv, const void* const* args, unsigned mask, std::int64_t n, std::uint32_t codes, int links,
           bool stream) {
  const chain_call call{dstv, args, mask, codes, links};
  if constexpr (simd_type<T> && nt_stores)
    if (stream && reinterpret_cast<std::uintptr_t>(dstv) % (chain_is_exact(codes, links) ? sizeof(T) : 64) == 0)
      return chain_loop<T, true>(&call, 1, n);
  chain_loop<T, false>(&call, 1, n);
}

/// The link code of an instruction that may be a chain's link (float32 and float64 only): add, sub, mul, true_div, and the unary ops in
/// chain_unary_ops; -1 for any other op or dtype.
inline int chain_code(const instruction& ins) {
  if (ins.in_type != ins.out_type || (ins.in_type != dtype::float32 && ins.in_type != dtype::float64)) return -1;
  switch (ins.op) {
    case scalar_op::add: return link_add;
    case scalar_op::sub: return link_sub;
    case scalar_op::mul: return link_mul;
    case scalar_op::true_div: return link_div;
    default: break;
  }
  for (unsigned k = 0; k < std::size(chain_unary_ops); ++k)
    if (ins.op == chain_unary_ops[k]) return static_cast<int>(first_unary_link + k);
  return -1;
}
/// Several chains of one dtype over the same span (see chain_loop).
using chains_fn = void (*)(const chain_call* calls, int n_chains, std::int64_t n);
}  // namespace detail

namespace testing {
/// Test-only: when false, functions built afterwards run their chains step by step even where
/// they would run them in one pass (detail::chain_loop with several chains), for comparison.
inline bool& one_pass_chains() {
  static bool on = true;
  return on;
}
}  // namespace testing

}  // namespace xsym::cpu

#endif
