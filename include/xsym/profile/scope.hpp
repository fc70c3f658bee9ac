#ifndef XSYM_PROFILE_SCOPE_HPP
#define XSYM_PROFILE_SCOPE_HPP

// Scoped profilers and user regions. With XSYM_PROFILING=0 the region macro expands to
// nothing and profile_scope records nothing: a build without profiling pays nothing.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile_stats.hpp"

#ifndef XSYM_PROFILING
#define XSYM_PROFILING 1
#endif

namespace xsym {

/// @brief False when the library was built with XSYM_PROFILING=0 (every timer compiled out).
inline constexpr bool profiling_compiled_in = XSYM_PROFILING != 0;

class profile_scope;

namespace detail {
struct scope_registry {
  std::atomic<int> active{0};
  std::mutex mutex;
  std::vector<profile_scope*> scopes;
};
inline scope_registry& scope_list() {
  static scope_registry* r = new scope_registry;  // outlives every static object that may use it
  return *r;
}
}  // namespace detail

/// @brief Aggregates every function call and user region run while it lives, on any thread.
///
/// `{ xsym::profile_scope scope("epoch"); train(X, Y); predict(X); }` prints one report
/// (to profiling.destination) when the scope ends, unless constructed with print=false.
class profile_scope {
 public:
  explicit profile_scope(std::string name, bool print = true)
      : m_stats(std::make_shared<profile_stats>(std::move(name))), m_print(print) {
    if constexpr (profiling_compiled_in) {
      auto& r = detail::scope_list();
      std::lock_guard lock(r.mutex);
      r.scopes.push_back(this);
      r.active.fetch_add(1, std::memory_order_relaxed);
    }
  }
  profile_scope(const profile_scope&) = delete;
  profile_scope& operator=(const profile_scope&) = delete;
  ~profile_scope();

  /// @brief What the scope has recorded so far.
  profile_stats& stats() { return *m_stats; }
  const std::shared_ptr<profile_stats>& shared_stats() const { return m_stats; }

  /// @brief Whether the function with these facts has a record here yet (its first call here takes its shapes).
  bool has_record(const function_facts* facts) {
    std::lock_guard lock(m_mutex);
    return m_records.count(facts) != 0;
  }
  /// @brief The scope's record for one function (made on its first call inside the scope). Keyed
  /// by the function's facts, which the record keeps alive: keyed by the function's address, a
  /// function built where a destroyed one was took that one's record.
  function_profile& record_for(const std::shared_ptr<const function_facts>& facts) {
    std::lock_guard lock(m_mutex);
    auto& rec = m_records[facts.get()];
    if (!rec) {
      rec = m_stats->add_function(facts);
      rec->skip_next_call = facts->ignore_first_call;  // as in the function's own profile
    }
    return *rec;
  }

 private:
  std::shared_ptr<profile_stats> m_stats;
  bool m_print;
  std::mutex m_mutex;
  std::unordered_map<const function_facts*, std::shared_ptr<function_profile>> m_records;
};

namespace detail {
/// Calls f(scope) for every live scope; the caller's data is added to each.
template <class F>
void for_each_active_scope(F&& f) {
  if constexpr (profiling_compiled_in) {
    auto& r = scope_list();
    if (r.active.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard lock(r.mutex);
    for (profile_scope* s : r.scopes) f(*s);
  }
}

inline bool any_scope_active() {
  if constexpr (profiling_compiled_in) return scope_list().active.load(std::memory_order_relaxed) > 0;
  else return false;
}

inline std::shared_ptr<profile_stats>& global_regions();

/// Times a user region of plain C++ code (XSYM_PROFILE_SCOPE).
class region_timer {
 public:
  explicit region_timer(const char* name) : m_name(name), m_start(ticks()) {}
  region_timer(const region_timer&) = delete;
  region_timer& operator=(const region_timer&) = delete;
  ~region_timer();

 private:
  const char* m_name;
  std::uint64_t m_start;
};
}  // namespace detail

}  // namespace xsym

#define XSYM_DETAIL_CONCAT2(a, b) a##b
#define XSYM_DETAIL_CONCAT(a, b) XSYM_DETAIL_CONCAT2(a, b)
#if XSYM_PROFILING
/// @brief Times the rest of the enclosing block as a user region named `name` (a string literal).
#define XSYM_PROFILE_SCOPE(name) ::xsym::detail::region_timer XSYM_DETAIL_CONCAT(xsym_region_, __LINE__)(name)
#else
#define XSYM_PROFILE_SCOPE(name) static_cast<void>(0)
#endif

#endif
