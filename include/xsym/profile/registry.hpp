#ifndef XSYM_PROFILE_REGISTRY_HPP
#define XSYM_PROFILE_REGISTRY_HPP

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <vector>

#include "export.hpp"
#include "report.hpp"
#include "scope.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // exit reports run once

namespace xsym {

namespace detail {
inline std::ostream& report_stream(std::ofstream& file);
inline bool json_destination();

struct exit_registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<profile_stats>> stats;
};
inline exit_registry& exit_reports() {
  static exit_registry* r = new exit_registry;  // never destroyed: the atexit handler reads it
  return *r;
}

/// Prints every registered profile, then their sum, where profiling.destination says.
inline void print_exit_reports() {
  auto& r = exit_reports();
  std::lock_guard lock(r.mutex);
  std::vector<std::shared_ptr<function_profile>> all;
  region_list regions;
  for (const auto& s : r.stats) {
    for (const auto& f : s->snapshot()) all.push_back(f);
    for (auto& reg : s->regions()) regions.push_back(reg);
  }
  if (all.empty() && regions.empty()) return;
  std::ofstream file;
  std::ostream* os = &report_stream(file);
  if (os == &file && json_destination()) {  // one document: every function and region
    const std::string message = r.stats.size() == 1 ? r.stats[0]->message()
                                                    : "Sum of all(" + std::to_string(r.stats.size()) + ") printed profiles at exit.";
    write_json(message, all, regions, *os);
    os->flush();
    return;
  }
  for (const auto& s : r.stats) s->print_summary(*os);
  if (r.stats.size() > 1)
    print_profile(*os, "Sum of all(" + std::to_string(r.stats.size()) + ") printed profiles at exit.", all,
                  report_limits::from_config(), regions);
  os->flush();
}
}  // namespace detail

/// @brief Prints this profile when the process exits (what profile=True does for every function).
inline void register_for_exit_report(const std::shared_ptr<profile_stats>& s) {
  auto& r = detail::exit_reports();
  std::lock_guard lock(r.mutex);
  if (std::find(r.stats.begin(), r.stats.end(), s) != r.stats.end()) return;
  if (r.stats.empty()) std::atexit(&detail::print_exit_reports);
  r.stats.push_back(s);
}

namespace detail {
inline std::string report_destination() {
  try {
    return config.profiling.destination.value();
  } catch (const std::exception&) {
    return "stderr";
  }
}

// A destination named *.json gets the JSON export (write_json), written anew by each report:
// the file holds the last one (at exit, every function's).
inline bool is_json_path(const std::string& dest) {
  return dest.size() > 5 && dest.compare(dest.size() - 5, 5, ".json") == 0;
}
inline bool json_destination() { return is_json_path(report_destination()); }

inline std::ostream& report_stream(std::ofstream& file) {
  const std::string dest = report_destination();
  if (dest == "stdout") return std::cout;
  if (dest == "stderr") return std::cerr;
  file.open(dest, is_json_path(dest) ? std::ios::trunc : std::ios::app);
  if (file) return file;
  std::cerr << "xsym: cannot open profiling.destination '" << dest << "'; printing the profile to stderr\n";
  return std::cerr;
}

/// User regions timed outside any scope, printed at exit when profile=True.
inline std::shared_ptr<profile_stats>& global_regions() {
  static std::shared_ptr<profile_stats>* s = [] {
    auto* p = new std::shared_ptr<profile_stats>(std::make_shared<profile_stats>("user regions"));
    register_for_exit_report(*p);
    return p;
  }();
  return *s;
}

XSYM_COLD_END  // what follows runs per timed region

inline region_timer::~region_timer() {
  const std::uint64_t t = ticks() - m_start;
  bool any = false;
  for_each_active_scope([&](profile_scope& s) {
    s.stats().add_region(m_name, t);
    any = true;
  });
  if (!any) {
    bool on = false;
    try {
      on = config.profile.value();
    } catch (const std::exception&) {
    }
    if (on) global_regions()->add_region(m_name, t);
  }
}
}  // namespace detail

inline profile_scope::~profile_scope() {
  if constexpr (profiling_compiled_in) {
    auto& r = detail::scope_list();
    {
      std::lock_guard lock(r.mutex);
      r.scopes.erase(std::find(r.scopes.begin(), r.scopes.end(), this));
      r.active.fetch_sub(1, std::memory_order_relaxed);
    }
    if (m_print) {
      std::ofstream file;
      std::ostream& os = detail::report_stream(file);
      if (&os == &file && detail::json_destination()) write_json(*m_stats, os);
      else m_stats->print_summary(os);
    }
  }
}

}  // namespace xsym

#endif
