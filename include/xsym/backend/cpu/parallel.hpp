#ifndef XSYM_BACKEND_CPU_PARALLEL_HPP
#define XSYM_BACKEND_CPU_PARALLEL_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace xsym::cpu {

/// @brief How many threads a kernel may use (openmp=True), and from which size it does.
struct parallelism {
  int threads = 1;
  std::int64_t elemwise_minsize = 200000;  // elements of an elementwise node's output
  std::int64_t product_minsize = 32768;    // elements of a matrix-vector product's matrix
};

/// @brief True when this translation unit was compiled with OpenMP (-fopenmp).
inline constexpr bool openmp_compiled_in =
#ifdef _OPENMP
    true;
#else
    false;
#endif

/// @brief Threads OpenMP would use (1 without OpenMP).
inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

namespace detail {
/// xsym's worker threads for openmp=True (OpenMP says how many: omp_get_max_threads()). A job
/// is cut into a fixed number of chunks that the calling thread and the workers claim one at a
/// time, so a call never waits for a worker the scheduler has not run yet: it waits only for
/// chunks a worker has begun. (An OpenMP team's barrier waits for every thread: when another
/// process holds the other core, a step could wait a time slice, milliseconds.)
class worker_pool {
 public:
  using chunk_fn = void (*)(void* ctx, std::int64_t chunk);

  // Never destroyed: a function may still run from a static destructor, and the workers sleep
  // in the kernel when idle.
  static worker_pool& get() {
    static worker_pool* pool = new worker_pool;
    return *pool;
  }

  /// Runs fn(ctx, c) for every c in [0, chunks), on this thread and up to `helpers` workers;
  /// returns false, running nothing, when another thread's job holds the pool.
  bool run(int helpers, std::int64_t chunks, chunk_fn fn, void* ctx) {
    std::unique_lock lock(m_job, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    while (static_cast<int>(m_threads.size()) < helpers) {
      m_threads.emplace_back([this] { work_loop(); });
      m_threads.back().detach();
    }
    m_error = nullptr;
    m_fn.store(fn, std::memory_order_relaxed);
    m_ctx.store(ctx, std::memory_order_relaxed);
    m_done.store(0, std::memory_order_relaxed);
    const std::uint32_t e = m_epoch.load(std::memory_order_relaxed) + 1;
    m_state.store(static_cast<std::uint64_t>(e) << 32 | static_cast<std::uint64_t>(chunks), std::memory_order_release);
    m_epoch.store(e, std::memory_order_seq_cst);
    if (m_sleepers.load(std::memory_order_seq_cst) > 0) m_epoch.notify_all();
    claim_chunks(e);
    for (int spins = 0; m_done.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < 4096) pause();
      else std::this_thread::yield();  // the worker finishing our chunk may share this core
    }
    if (m_error) std::rethrow_exception(m_error);
    return true;
  }

 private:
  worker_pool() = default;

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // Claims and runs chunks of job e until none is left; a claim is a compare-exchange on
  // (epoch, chunks left), one word, so no thread runs a chunk of a job that has ended. (The
  // count is in the word: read beside it, a late worker of the last job could take the next
  // job's count for its own and claim a chunk that does not exist.) Chunks go last first.
  void claim_chunks(std::uint32_t e) {
    std::uint64_t s = m_state.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::uint32_t>(s >> 32) != e) return;
      const auto left = static_cast<std::int64_t>(s & 0xffffffffu);
      if (left == 0) return;
      const std::int64_t c = left - 1;
      if (!m_state.compare_exchange_weak(s, s - 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      try {
        m_fn.load(std::memory_order_relaxed)(m_ctx.load(std::memory_order_relaxed), c);
      } catch (...) {
        std::lock_guard g(m_error_mutex);
        if (!m_error) m_error = std::current_exception();
      }
      m_done.fetch_add(1, std::memory_order_release);
      s = m_state.load(std::memory_order_acquire);
    }
  }

  void work_loop() {
    std::uint32_t seen = 0;
    for (;;) {
      // Spin a while (the next product of a training step comes within microseconds), then sleep.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      std::uint32_t e = m_epoch.load(std::memory_order_acquire);
      for (int i = 1; e == seen; ++i) {
        // Yield after a short spin: on a core another process wants, spinning would take the
        // time of that process or of the thread that runs the step.
        if (i < 64) pause();
        else std::this_thread::yield();
        if (i % 16 == 0 && std::chrono::steady_clock::now() > until) {
          m_sleepers.fetch_add(1, std::memory_order_seq_cst);
          while ((e = m_epoch.load(std::memory_order_seq_cst)) == seen) m_epoch.wait(seen, std::memory_order_seq_cst);
          m_sleepers.fetch_sub(1, std::memory_order_seq_cst);
          break;
        }
        e = m_epoch.load(std::memory_order_acquire);
      }
      seen = e;
      claim_chunks(e);
    }
  }

  std::mutex m_job;  // one job at a time; a second caller runs serially
  std::vector<std::thread> m_threads;
  std::atomic<std::uint64_t> m_state{0};  // epoch << 32 | chunks left to claim
  std::atomic<std::uint32_t> m_epoch{0};
  std::atomic<int> m_sleepers{0};
  std::atomic<chunk_fn> m_fn{nullptr};
  std::atomic<void*> m_ctx{nullptr};
  std::atomic<std::int64_t> m_done{0};
  std::mutex m_error_mutex;
  std::exception_ptr m_error;
};
}  // namespace detail

/// @brief Runs f(begin, end) over [0, n), split among up to `threads` threads at multiples of
/// `grain`. Kernels pick a grain at which splitting changes no result (whole SIMD blocks, whole
/// rows), so a parallel run computes exactly what a serial one does, whichever thread runs
/// which chunk.
template <class F>
void parallel_chunks(std::int64_t n, std::int64_t grain, int threads, F&& f) {
#ifdef _OPENMP
  const std::int64_t units = (n + grain - 1) / grain;
  const int team = static_cast<int>(std::min<std::int64_t>(threads, units));
  if (team > 1) {
    // A few chunks per thread: a late thread's share is taken by the others.
    struct job {
      std::int64_t n, grain, units, chunks;
      F* f;
    } j{n, grain, units, std::min<std::int64_t>(units, std::int64_t{4} * team), &f};
    auto run_chunk = [](void* ctx, std::int64_t c) {
      const job& jb = *static_cast<const job*>(ctx);
      const std::int64_t lo = std::min(jb.n, jb.units * c / jb.chunks * jb.grain);
      const std::int64_t hi = std::min(jb.n, jb.units * (c + 1) / jb.chunks * jb.grain);
      if (lo < hi) (*jb.f)(lo, hi);
    };
    if (detail::worker_pool::get().run(team - 1, j.chunks, run_chunk, &j)) return;
  }
#else
  (void)grain;
  (void)threads;
#endif
  f(std::int64_t{0}, n);
}

}  // namespace xsym::cpu

#endif
