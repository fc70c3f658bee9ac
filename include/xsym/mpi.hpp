#ifndef XSYM_MPI_HPP
#define XSYM_MPI_HPP

/// @file
/// @brief xsym over MPI (CMake target xsym::mpi): AllReduce nodes on an MPI communicator,
/// shared variables kept identical on every rank, and profiles merged across ranks at exit.
/// Only programs that include this header need MPI.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "xsym.hpp"

namespace xsym::mpi {

/// @brief Raised by check_shared when a shared variable is not the same on every rank.
class replica_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

XSYM_COLD_BEGIN  // set-up, checks and exit reports; the reduction itself is the MPI call
namespace detail {
inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string("xsym::mpi: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

inline void require_initialized(const char* what) {
  int on = 0, off = 0;
  MPI_Initialized(&on);
  MPI_Finalized(&off);
  if (!on || off)
    throw std::logic_error(std::string("xsym::mpi::") + what +
                           ": MPI is not running; create an xsym::mpi::environment at the top of main()");
}

inline MPI_Datatype mpi_type(dtype t) {
  switch (t) {
    case dtype::bool_: return MPI_C_BOOL;
    case dtype::int32: return MPI_INT32_T;
    case dtype::int64: return MPI_INT64_T;
    case dtype::float32: return MPI_FLOAT;
    case dtype::float64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// Max and min of floats that are NaN where any rank's element is (MPI_MAX may drop a NaN,
// depending on which rank holds it).
template <class T, bool Max>
void nan_extreme(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i)
    if (!std::isnan(b[i]) && (std::isnan(a[i]) || (Max ? a[i] > b[i] : a[i] < b[i]))) b[i] = a[i];
}

// Created once, on first use (MPI is running then); left to MPI_Finalize.
template <class T, bool Max>
MPI_Op nan_extreme_op() {
  static const MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    check(MPI_Op_create(&nan_extreme<T, Max>, 1, &o), "MPI_Op_create");
    return o;
  }();
  return op;
}

inline MPI_Op mpi_op(reduce_op r, dtype t) {
  const bool b = t == dtype::bool_;  // max of bools is any, min is all
  switch (r) {
    case reduce_op::sum: return MPI_SUM;
    case reduce_op::prod: return MPI_PROD;
    case reduce_op::max:
      if (t == dtype::float32) return nan_extreme_op<float, true>();
      if (t == dtype::float64) return nan_extreme_op<double, true>();
      return b ? MPI_LOR : MPI_MAX;
    case reduce_op::min:
      if (t == dtype::float32) return nan_extreme_op<float, false>();
      if (t == dtype::float64) return nan_extreme_op<double, false>();
      return b ? MPI_LAND : MPI_MIN;
    case reduce_op::mean: break;
  }
  throw std::logic_error("xsym::mpi: mean is not a collective reduction");
}

// MPI counts are ints: larger arrays go in pieces.
inline constexpr std::int64_t max_count = INT_MAX / 2;

inline std::string shape_text(const std::int64_t* v, int rank) {
  std::string s = "(";
  for (int d = 0; d < rank; ++d) s += std::to_string(v[d]) + (rank == 1 || d + 1 < rank ? "," : "");
  return s + ")";
}

// FNV-1a over a value's dtype, shape and elements in C order (a value a device=cuda call
// left in device memory is read through a host copy).
inline std::uint64_t hash_value(const ndarray& a) {
  const ndarray c = xsym::detail::on_host(a).contiguous();
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  const auto t = static_cast<int>(c.type());
  mix(&t, sizeof t);
  for (int d = 0; d < c.rank(); ++d) {
    const std::int64_t e = c.shape(d);
    mix(&e, sizeof e);
  }
  mix(c.data(), c.nbytes());
  return h;
}

// What a rank is doing in an xsym collective: the first field of the header each one starts with.
enum class exchange_kind : std::int64_t { allreduce = 1, profiles, check_shared, broadcast };

// The header: kind, the rank's AllReduce count on the communicator, then what the ranks must agree on.
inline constexpr int header_size = 4 + max_rank;

// The header's fields over the ranks: their minimum and maximum.
struct header_range {
  std::int64_t lo[header_size], hi[header_size];
  bool same(int i) const { return lo[i] == hi[i]; }
};

inline std::string doing(std::int64_t kind, std::int64_t count) {
  const std::string after = " (AllReduce calls so far: " + std::to_string(count) + ")";
  switch (static_cast<exchange_kind>(kind)) {
    case exchange_kind::allreduce: return "in AllReduce call " + std::to_string(count);
    case exchange_kind::profiles: return "merging profiles" + after;
    case exchange_kind::check_shared: return "in check_shared" + after;
    case exchange_kind::broadcast: return "broadcasting a shared variable" + after;
  }
  return "in an exchange of unknown kind " + std::to_string(kind);
}
}  // namespace detail

/// @brief An MPI communicator as xsym's AllReduce nodes use it. Every rank must call the
/// functions holding its nodes in the same order (MPI's rule for collectives).
class communicator final : public xsym::communicator {
 public:
  communicator(MPI_Comm comm, std::string name) : m_comm(comm), m_name(std::move(name)) {
    detail::require_initialized("communicator");
    detail::check(MPI_Comm_size(comm, &m_size), "MPI_Comm_size");
    detail::check(MPI_Comm_rank(comm, &m_rank), "MPI_Comm_rank");
  }
  MPI_Comm get() const { return m_comm; }
  int size() const override { return m_size; }
  int rank() const override { return m_rank; }
  std::string name() const override { return m_name; }

  /// @brief Before the data, one exchange of every rank's header: its AllReduce count, dtype
  /// and shape. Ranks that disagree all throw instead of waiting on, or pairing up, mismatched
  /// reductions. That exchange is where the first rank waits for the last, so its time is the
  /// wait the profile reports.
  void allreduce(const ndarray& in, ndarray& out, reduce_op r, std::uint64_t& wait_ticks) const override {
    detail::require_initialized("allreduce");
    const std::int64_t call = ++m_next;
    m_begun = std::max(m_begun, m_next);  // a reduction outside a function call counts too
    std::int64_t mine[2 + max_rank] = {static_cast<std::int64_t>(in.type()), in.rank()};
    for (int d = 0; d < in.rank(); ++d) mine[2 + d] = in.shape(d);
    const detail::header_range h = exchange(detail::exchange_kind::allreduce, call, mine, 2 + max_rank, &wait_ticks);
    bool agree = true;
    for (int i = 2; i < detail::header_size; ++i) agree &= h.same(i);
    if (!agree) disagree(mine, h);
    const ndarray src = in.contiguous();
    const MPI_Datatype type = detail::mpi_type(in.type());
    const MPI_Op op = detail::mpi_op(r, in.type());
    const std::size_t item = dtype_size(in.type());
    for (std::int64_t done = 0; done < src.size(); done += detail::max_count) {
      const auto n = static_cast<int>(std::min(detail::max_count, src.size() - done));
      detail::check(MPI_Allreduce(src.data() + done * static_cast<std::int64_t>(item),
                                  out.data() + done * static_cast<std::int64_t>(item), n, type, op, m_comm),
                    "MPI_Allreduce");
    }
  }

  void begin_call(int nodes) const override {
    m_next = m_begun;  // the AllReduce nodes a failed call did not reach stay counted
    m_begun += nodes;
  }

  /// @brief The AllReduce calls begun on this communicator by this rank (reached or not).
  std::int64_t allreduce_calls() const { return m_begun; }

  /// @brief The exchange every xsym collective on this communicator starts with: one
  /// MPI_Allreduce of a fixed-size header (what this rank is doing, `count`, then `n` numbers,
  /// with their negations: maximum and minimum in one MPI_MAX). When the ranks are not doing
  /// the same thing at the same count, every rank throws, naming what each one does, and every
  /// later exchange on this communicator throws the same at once (the ranks stay out of step).
  detail::header_range exchange(detail::exchange_kind kind, std::int64_t count, const std::int64_t* values, int n,
                                std::uint64_t* wait_ticks = nullptr) const {
    if (!m_out_of_step.empty()) throw std::runtime_error(m_out_of_step);
    constexpr int k = detail::header_size;
    std::int64_t h[2 * k] = {static_cast<std::int64_t>(kind), count};
    std::copy(values, values + n, h + 2);
    for (int i = 0; i < k; ++i) h[k + i] = -h[i];
    const std::int64_t mine[2] = {h[0], h[1]};
    const std::uint64_t t0 = xsym::detail::ticks();
    detail::check(MPI_Allreduce(MPI_IN_PLACE, h, 2 * k, MPI_INT64_T, MPI_MAX, m_comm), "MPI_Allreduce (header)");
    if (wait_ticks) *wait_ticks = xsym::detail::ticks() - t0;
    detail::header_range r;
    for (int i = 0; i < k; ++i) {
      r.hi[i] = h[i];
      r.lo[i] = -h[k + i];
    }
    if (!r.same(0) || !r.same(1)) out_of_step(mine);
    return r;
  }

 private:
  // Every rank saw the same header range, so every rank is here: one more exchange names each one's state.
  [[noreturn]] void out_of_step(const std::int64_t* mine) const {
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(m_size));
    detail::check(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, m_comm), "MPI_Allgather (header)");
    std::string msg = "xsym::mpi: the ranks of " + m_name + " are out of step:";
    std::vector<bool> told(static_cast<std::size_t>(m_size));
    for (int r = 0; r < m_size; ++r) {  // ranks doing the same thing in one clause
      if (told[static_cast<std::size_t>(r)]) continue;
      std::string who;
      int n = 0;
      for (int q = r; q < m_size; ++q) {
        const auto iq = static_cast<std::size_t>(q), ir = static_cast<std::size_t>(r);
        if (told[iq] || all[2 * iq] != all[2 * ir] || all[2 * iq + 1] != all[2 * ir + 1]) continue;
        told[iq] = true;
        if (++n <= 8) who += (n > 1 ? "," : "") + std::to_string(q);
      }
      if (n > 8) who += ",... (" + std::to_string(n) + " ranks)";
      msg += std::string(r ? ";" : "") + (n > 1 ? " ranks " : " rank ") + who + (n > 1 ? " are " : " is ") +
             detail::doing(all[2 * static_cast<std::size_t>(r)], all[2 * static_cast<std::size_t>(r) + 1]);
    }
    msg += ". A rank whose call failed before its AllReduce (or that skipped a collective) would pair its later "
           "collectives with the others' earlier ones; every later xsym collective on " + m_name +
           " fails with this error: end the job (MPI_Abort)";
    m_out_of_step = msg;
    throw std::runtime_error(msg);
  }

  [[noreturn]] void disagree(const std::int64_t* mine, const detail::header_range& range) const {
    const std::int64_t* lo = range.lo + 2;
    const std::int64_t* h = range.hi + 2;
    std::string msg = "xsym::mpi: the ranks of " + m_name + " disagree on what to reduce: rank " +
                      std::to_string(m_rank) + " has " + std::string(dtype_name(static_cast<dtype>(mine[0]))) + " " +
                      detail::shape_text(mine + 2, static_cast<int>(mine[1]));
    if (h[0] != lo[0]) msg += "; the ranks' dtypes differ";
    else if (h[1] != lo[1]) msg += "; the ranks' ranks run from " + std::to_string(lo[1]) + " to " + std::to_string(h[1]);
    else
      msg += "; the ranks' shapes run from " + detail::shape_text(lo + 2, static_cast<int>(lo[1])) + " to " +
             detail::shape_text(h + 2, static_cast<int>(h[1])) + " (dimension by dimension)";
    throw shape_error(msg);
  }

  MPI_Comm m_comm;
  std::string m_name;
  int m_size = 1, m_rank = 0;
  // Calls are serialized (MPI_THREAD_SERIALIZED), so plain counters do.
  mutable std::int64_t m_begun = 0;  // AllReduce calls begun, including those a failed call skipped
  mutable std::int64_t m_next = 0;   // the last AllReduce call this rank reached
  mutable std::string m_out_of_step;  // once set, every exchange throws it
};

/// @brief MPI_COMM_WORLD (MPI must be running: see environment).
inline std::shared_ptr<const communicator> world() {
  static std::shared_ptr<const communicator> w = [] {
    detail::require_initialized("world");
    return std::make_shared<const communicator>(MPI_COMM_WORLD, "MPI_COMM_WORLD");
  }();
  return w;
}

/// @brief This process's rank in MPI_COMM_WORLD, and their number.
inline int rank() { return world()->rank(); }
inline int size() { return world()->size(); }

/// @brief x reduced elementwise over every rank of comm (sum, prod, max or min): an
/// `AllReduce{sum}` Apply node, of x's dtype and shape. Typical use:
/// `gw = mpi::allreduce(grad(cost_on_shard, w)) / n_total`.
template <class E, std::size_t N>
var<E, N> allreduce(const var<E, N>& x, reduce_op r = reduce_op::sum,
                    std::shared_ptr<const communicator> comm = world(),
                    xsym::detail::source_site where = xsym::detail::source_site::current()) {
  return xsym::allreduce(x, std::move(comm), r, where);
}

namespace detail {
template <class F>
std::vector<shared_value*> shared_values_of(const F& f) {
  std::vector<shared_value*> out;
  for (const slot& s : f.runtime()->graph().slots)
    if (s.kind == var_kind::shared && s.source && s.source->shared) {
      shared_value* v = s.source->shared.get();
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  return out;
}

// Root's value of one shared variable to every rank of comm (dtype and rank are the variable's).
inline void broadcast_value(shared_value& sv, int root, const communicator& c) {
  require_initialized("broadcast");
  std::lock_guard lock(sv.mutex);
  const std::int64_t what[2] = {root, static_cast<std::int64_t>(sv.value.type())};
  const header_range agreed = c.exchange(exchange_kind::broadcast, c.allreduce_calls(), what, 2);
  if (!agreed.same(2) || !agreed.same(3))
    throw std::runtime_error("xsym::mpi::broadcast: the ranks of " + c.name() + " disagree on the root or on the dtype of '" +
                             (sv.name.empty() ? std::string("<unnamed>") : sv.name) + "'");
  std::int64_t head[1 + max_rank] = {sv.value.rank()};
  for (int d = 0; d < sv.value.rank(); ++d) head[1 + d] = sv.value.shape(d);
  check(MPI_Bcast(head, 1 + max_rank, MPI_INT64_T, root, c.get()), "MPI_Bcast (shape)");
  ndarray v = sv.value;
  if (c.rank() != root) {
    shape_t s;
    s.rank = static_cast<int>(head[0]);
    for (int d = 0; d < s.rank; ++d) s[d] = head[1 + d];
    v = ndarray::empty(sv.value.type(), s);
  } else {
    v = xsym::detail::on_host(sv.value).contiguous();  // MPI reads host memory (no CUDA-aware MPI)
  }
  const std::size_t item = dtype_size(v.type());
  for (std::int64_t done = 0; done < v.size(); done += max_count) {
    const auto n = static_cast<int>(std::min(max_count, v.size() - done));
    check(MPI_Bcast(v.data() + done * static_cast<std::int64_t>(item), n, mpi_type(v.type()), root, c.get()), "MPI_Bcast");
  }
  if (c.rank() != root) sv.value = std::move(v);
}
}  // namespace detail

/// @brief Gives every shared variable f reads the value it has on `root`, in the order of f's
/// graph (the same on every rank). Call it once after building f, before the first step.
template <class F>
void broadcast_shared(const F& f, int root = 0, const std::shared_ptr<const communicator>& comm = world()) {
  for (shared_value* v : detail::shared_values_of(f)) detail::broadcast_value(*v, root, *comm);
}

/// @brief Gives one shared variable the value it has on `root`.
template <class E, std::size_t N>
void broadcast(const shared_var<E, N>& v, int root = 0, const std::shared_ptr<const communicator>& comm = world()) {
  detail::broadcast_value(*v.node()->shared, root, *comm);
}

/// @brief The check mode: compares a hash of each shared variable f reads across the ranks of
/// comm and throws replica_error on every rank, naming the first variable that differs and the
/// ranks whose copy differs from rank 0's.
template <class F>
void check_shared(const F& f, const std::shared_ptr<const communicator>& comm = world()) {
  detail::require_initialized("check_shared");
  const auto vars = detail::shared_values_of(f);
  std::vector<std::uint64_t> mine;
  std::vector<std::string> names;
  for (shared_value* v : vars) {
    std::lock_guard lock(v->mutex);
    mine.push_back(detail::hash_value(v->value));
    names.push_back(v->name.empty() ? "<unnamed>" : v->name);
  }
  const int p = comm->size();
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(p));
  const auto n = static_cast<int>(mine.size());
  // Every rank must read as many hashes: agree on the count first.
  const std::int64_t what[1] = {n};
  if (!comm->exchange(detail::exchange_kind::check_shared, comm->allreduce_calls(), what, 1).same(2))
    throw replica_error("xsym::mpi::check_shared: the ranks of " + comm->name() + " hold different numbers of shared " +
                        "variables for '" + f.runtime()->name() + "' (this rank: " + std::to_string(n) + ")");
  detail::check(MPI_Allgather(mine.data(), n, MPI_UINT64_T, all.data(), n, MPI_UINT64_T, comm->get()), "MPI_Allgather");
  for (int i = 0; i < n; ++i) {
    std::string differ;
    for (int r = 1; r < p; ++r)
      if (all[static_cast<std::size_t>(r * n + i)] != all[static_cast<std::size_t>(i)])
        differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    if (differ.empty()) continue;
    throw replica_error("xsym::mpi::check_shared: shared variable '" + names[static_cast<std::size_t>(i)] + "' of '" +
                        f.runtime()->name() + "' differs across the ranks of " + comm->name() + ": rank(s) " + differ +
                        " hold a value other than rank 0's");
  }
}

/// @brief f in the check mode: each call runs f, then check_shared(f).
template <class F>
auto checked(F& f, std::shared_ptr<const communicator> comm = world()) {
  return [&f, comm](auto&&... args) -> decltype(auto) {
    if constexpr (std::is_void_v<decltype(f(std::forward<decltype(args)>(args)...))>) {
      f(std::forward<decltype(args)>(args)...);
      check_shared(f, comm);
    } else {
      decltype(auto) r = f(std::forward<decltype(args)>(args)...);
      check_shared(f, comm);
      return r;
    }
  };
}

namespace detail {
// One rank's exit profiles as numbers, in the order the registry holds them: per function its
// calls, times (seconds: ranks may tick at other rates) and per node time, calls, wait, flops
// and bytes (over its calls).
struct rank_profiles {
  std::vector<std::shared_ptr<profile_stats>> stats;
  std::vector<std::shared_ptr<function_profile>> fns;  // every stats' functions, in order
  std::uint64_t layout = 0;                            // a hash of the names and node texts
  std::vector<double> numbers;
};

inline rank_profiles collect_profiles(const std::vector<std::shared_ptr<profile_stats>>& stats) {
  rank_profiles r;
  r.stats = stats;
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;
  };
  for (const auto& s : r.stats) {
    mix(s->message());
    for (const auto& f : s->snapshot()) {
      r.fns.push_back(f);
      mix(f->name());
      const function_graph& g = f->graph();
      for (const auto& n : g.nodes) mix(g.node_text(n));
      r.numbers.push_back(static_cast<double>(f->calls));
      r.numbers.push_back(f->call_time());
      r.numbers.push_back(f->fn_time());
      for (std::size_t i = 0; i < g.nodes.size(); ++i) {
        r.numbers.push_back(f->node_time(i));
        r.numbers.push_back(static_cast<double>(f->node_calls[i]));
        r.numbers.push_back(f->node_wait_time(i));
        // This rank's work from its own shapes: other ranks may see other shapes.
        const auto [flops, bytes] = xsym::detail::node_work(*f, i);
        r.numbers.push_back(flops);
        r.numbers.push_back(bytes);
      }
    }
    for (const auto& [name, reg] : s->regions()) {
      mix(name);
      r.numbers.push_back(static_cast<double>(reg.ticks) * xsym::detail::seconds_per_tick());
      r.numbers.push_back(static_cast<double>(reg.calls));
    }
  }
  r.layout = h;
  return r;
}

inline std::string with_rank(std::string path, int rank, int size) {
  const auto at = path.find("{rank}");
  if (at != std::string::npos) return path.replace(at, 6, std::to_string(rank));
  return size > 1 ? path + "." + std::to_string(rank) : path;
}
}  // namespace detail

/// @brief Profiles summed over the ranks of a communicator (merge_profiles).
struct merged_profiles {
  bool same = true;  // every rank held the same functions and nodes (else nothing is merged)
  std::vector<std::shared_ptr<profile_stats>> stats;  // rank 0: one per given profile; elsewhere empty
};

/// @brief Sums `stats` over comm's ranks, collectively (every rank calls it with its own
/// profiles of the same functions, in the same order). On rank 0, each merged profile holds the
/// ranks' summed calls and times and, per Apply node, the time of its fastest and slowest rank
/// (ranks may tick at other rates: times go through seconds).
inline merged_profiles merge_profiles(const std::vector<std::shared_ptr<profile_stats>>& stats,
                                      const std::shared_ptr<const communicator>& comm = world()) {
  detail::require_initialized("merge_profiles");
  const detail::rank_profiles mine = detail::collect_profiles(stats);
  const MPI_Comm c = comm->get();
  const int p = comm->size(), me = comm->rank();
  const auto count = static_cast<std::int64_t>(mine.numbers.size());
  const std::int64_t what[2] = {static_cast<std::int64_t>(mine.layout >> 1), count};  // >> 1: negated in the header
  const detail::header_range agreed = comm->exchange(detail::exchange_kind::profiles, comm->allreduce_calls(), what, 2);
  merged_profiles out;
  out.same = agreed.same(2) && agreed.same(3);
  if (!out.same) return out;
  std::vector<double> all(me == 0 ? mine.numbers.size() * static_cast<std::size_t>(p) : 0);
  detail::check(MPI_Gather(mine.numbers.data(), static_cast<int>(count), MPI_DOUBLE, all.data(), static_cast<int>(count),
                           MPI_DOUBLE, 0, c),
                "MPI_Gather (profiles)");
  if (me != 0) return out;
  const std::size_t stride = mine.numbers.size();
  const double tick = xsym::detail::seconds_per_tick();
  auto at_rank = [&](int r, std::size_t k) { return all[static_cast<std::size_t>(r) * stride + k]; };
  auto sum = [&](std::size_t k) {
    double v = 0;
    for (int r = 0; r < p; ++r) v += at_rank(r, k);
    return v;
  };
  auto ticks = [&](std::size_t k) { return static_cast<std::uint64_t>(std::llround(sum(k) / tick)); };
  std::size_t at = 0, fi = 0;
  for (const auto& s : mine.stats) {
    auto merged = std::make_shared<profile_stats>(s->message(), false);
    for (std::size_t j = 0; j < s->functions().size(); ++j, ++fi) {
      auto m = std::make_shared<function_profile>(*mine.fns[fi]);
      const std::size_t n = m->node_ticks.size();
      m->ranks = p;
      m->calls = static_cast<std::int64_t>(sum(at));
      m->call_ticks = ticks(at + 1);
      m->fn_ticks = ticks(at + 2);
      at += 3;
      m->node_rank_min_s.assign(n, 0);
      m->node_rank_max_s.assign(n, 0);
      m->node_flops_sum.assign(n, 0);
      m->node_bytes_sum.assign(n, 0);
      m->summed_calls = m->calls;  // the sums hold every call
      for (std::size_t i = 0; i < n; ++i, at += 5) {
        m->node_ticks[i] = ticks(at);
        m->node_calls[i] = static_cast<std::int64_t>(sum(at + 1));
        m->node_wait_ticks[i] = ticks(at + 2);
        m->node_flops_sum[i] = sum(at + 3);
        m->node_bytes_sum[i] = sum(at + 4);
        double lo = at_rank(0, at), hi = lo;
        for (int r = 1; r < p; ++r) {
          lo = std::min(lo, at_rank(r, at));
          hi = std::max(hi, at_rank(r, at));
        }
        m->node_rank_min_s[i] = lo;
        m->node_rank_max_s[i] = hi;
      }
      merged->add_profile(std::move(m));
    }
    for (const auto& [name, reg] : s->regions()) {
      merged->add_region(name, ticks(at), static_cast<std::int64_t>(sum(at + 1)));
      at += 2;
    }
    out.stats.push_back(std::move(merged));
  }
  return out;
}

/// @brief The exit profiles (every profile=True function, every profile_stats registered for
/// the exit report), merged over comm's ranks, collectively. Rank 0 prints their sum in the
/// usual format, each Apply node with its time on its fastest and slowest rank, where
/// profiling.destination says (stdout or stderr; stderr when it names a file). When it names
/// a file, every rank also writes its own profiles there as one JSON document (replacing the
/// file), `{rank}` in the path replaced by its rank (without one, ".<rank>" is appended on
/// several ranks). The profiles are then
/// taken out of the report printed at exit (unless the merge fails: then each rank prints its
/// own there). The environment that initialised MPI calls it when destroyed; call it yourself
/// before MPI_Finalize when you start MPI yourself.
inline void print_merged_profiles(const std::shared_ptr<const communicator>& comm = world()) {
  std::vector<std::shared_ptr<profile_stats>> stats;
  {
    auto& reg = xsym::detail::exit_reports();
    std::lock_guard lock(reg.mutex);
    stats = std::move(reg.stats);
    reg.stats.clear();  // printed here, not again at exit
  }
  std::string dest = "stderr";
  try {
    dest = config.profiling.destination.value();
  } catch (const std::exception&) {
  }
  const int p = comm->size(), me = comm->rank();
  if (dest != "stdout" && dest != "stderr") {
    // One JSON document per rank: every exit profile's functions and regions in one.
    profile_stats all(stats.size() == 1 ? stats[0]->message() : "every profile at exit, rank " + std::to_string(me), false);
    for (const auto& s : stats) {
      for (const auto& f : s->snapshot()) all.add_profile(f);
      for (const auto& [name, r] : s->regions()) all.add_region(name, r.ticks, r.calls);
    }
    const std::string path = detail::with_rank(dest, me, p);
    std::ofstream json(path, std::ios::trunc);
    if (json) write_json(all, json);
    else std::cerr << "xsym: cannot open '" << path << "' for rank " << me << "'s profile\n";
  }
  merged_profiles merged;
  try {
    merged = merge_profiles(stats, comm);
  } catch (...) {
    // Not merged: back to the exit report, where each rank prints its own.
    auto& reg = xsym::detail::exit_reports();
    std::lock_guard lock(reg.mutex);
    reg.stats.insert(reg.stats.begin(), stats.begin(), stats.end());
    throw;
  }
  if (me != 0) return;
  std::ostream& os = dest == "stdout" ? std::cout : std::cerr;
  if (!merged.same) {
    os << "xsym: the ranks of " << comm->name() << " profiled different functions; rank 0's profiles alone:\n";
    for (const auto& s : stats) s->print_summary(os);
    return;
  }
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const auto fns = merged.stats[i]->functions();
    const auto regions = merged.stats[i]->regions();
    if (fns.empty() && regions.empty()) continue;
    std::string message = stats[i]->message();
    if (message.empty() && fns.size() == 1) message = fns.front()->name();
    os << "xsym: the sum over the " << p << " ranks of " << comm->name() << "\n";
    print_profile(os, message, fns, report_limits::from_config(), regions);
  }
  os.flush();
}

/// @brief MPI for the program's lifetime: initialises it (unless it runs already) and, when
/// destroyed, if it initialised MPI, prints the merged profiles (print_merged_profiles) and
/// finalises it; an environment made while MPI runs does nothing when destroyed. Make one at
/// the top of main(), before any xsym::mpi call. Destroyed while an exception propagates, it
/// does not merge (the other ranks may be elsewhere): each rank prints its own profile at exit.
class environment {
 public:
  environment() : environment(nullptr, nullptr) {}
  environment(int& argc, char**& argv) : environment(&argc, &argv) {}
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    if (!m_owns) return;  // the one that started MPI reports: a nested one would take its profiles
    int off = 0;
    MPI_Finalized(&off);
    if (off) return;  // finalised by the program: each rank prints its own profile at exit
    if (std::uncaught_exceptions() == 0) {
      try {
        print_merged_profiles();
      } catch (const std::exception& e) {
        std::cerr << "xsym::mpi: at exit, the ranks' last exchange (of their profiles, if any) failed: " << e.what() << "\n";
      }
    }
    MPI_Finalize();
  }
  int rank() const { return world()->rank(); }
  int size() const { return world()->size(); }

 private:
  environment(int* argc, char*** argv) {
    int on = 0;
    MPI_Initialized(&on);
    if (on) return;
    // xsym calls MPI from the thread that calls a function, one call at a time per function.
    int provided = 0;
    detail::check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    m_owns = true;
  }
  bool m_owns = false;
};
XSYM_COLD_END

}  // namespace xsym::mpi

#endif
