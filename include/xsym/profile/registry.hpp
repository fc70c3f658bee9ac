#ifndef XSYM_PROFILE_REGISTRY_HPP
#define XSYM_PROFILE_REGISTRY_HPP

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <vector>

#include "report.hpp"

namespace xsym {

namespace detail {
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
  for (const auto& s : r.stats)
    for (const auto& f : s->functions()) all.push_back(f);
  if (all.empty()) return;
  std::string dest = "stderr";
  try {
    dest = config.profiling.destination.value();
  } catch (const std::exception&) {
  }
  std::ofstream file;
  std::ostream* os = &std::cerr;
  if (dest == "stdout") os = &std::cout;
  else if (dest != "stderr") {
    file.open(dest);
    if (file) os = &file;
    else std::cerr << "xsym: cannot open profiling.destination '" << dest << "'; printing the profile to stderr\n";
  }
  for (const auto& s : r.stats) s->print_summary(*os);
  if (all.size() > 1)
    print_profile(*os, "Sum of all(" + std::to_string(r.stats.size()) + ") printed profiles at exit.", all,
                  report_limits::from_config());
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

}  // namespace xsym

#endif
