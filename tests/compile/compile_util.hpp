#ifndef XSYM_TESTS_COMPILE_COMPILE_UTIL_HPP
#define XSYM_TESTS_COMPILE_COMPILE_UTIL_HPP

#include "expr/expr_util.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <unistd.h>

namespace xsym_test {

/// What f throws (its what()), or "" when it throws nothing.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// A concurrency test's loop count: a tenth of it where XSYM_TEST_SANITIZED=1 (the Makefile's
/// sanitizer runs). A sanitizer reports an unordered access the first time it happens; the full
/// counts are what make a lost update or a torn read likely enough to show in plain builds.
inline int iterations(int n) {
  static const bool sanitized = [] {
    const char* e = std::getenv("XSYM_TEST_SANITIZED");
    return e && std::string(e) == "1";
  }();
  return sanitized ? std::max(1, n / 10) : n;
}

/// Gives a test the built-in flag defaults: no XSYM_FLAGS, no rc file, no code assignments.
/// Restores the environment and resets the config when it goes out of scope.
class clean_config {
 public:
  clean_config() : m_flags(get("XSYM_FLAGS")), m_rc(get("XSYMRC")) {
    ::unsetenv("XSYM_FLAGS");
    ::setenv("XSYMRC", "", 1);  // an empty list: read no rc file
    xsym::config.reset();
  }
  ~clean_config() {
    restore("XSYM_FLAGS", m_flags);
    restore("XSYMRC", m_rc);
    xsym::config.reset();
  }
  clean_config(const clean_config&) = delete;
  clean_config& operator=(const clean_config&) = delete;

 private:
  static std::optional<std::string> get(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  }
  static void restore(const char* name, const std::optional<std::string>& v) {
    if (v) ::setenv(name, v->c_str(), 1);
    else ::unsetenv(name);
  }
  std::optional<std::string> m_flags, m_rc;
};

#ifdef XSYM_TEST_CXX
/// Turns on cxx (the compiler that built the tests, XSYM_TEST_CXX) with a compiledir of its own,
/// removed at the end. Use inside a clean_config, which resets the flags afterwards.
class cxx_on {
 public:
  explicit cxx_on(const std::string& tag) {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("xsym-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
    xsym::config.cxx = XSYM_TEST_CXX;
    xsym::config.compiledir = m_dir.string();
  }
  ~cxx_on() {
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
  }
  cxx_on(const cxx_on&) = delete;
  cxx_on& operator=(const cxx_on&) = delete;
  const std::filesystem::path& dir() const { return m_dir; }

 private:
  std::filesystem::path m_dir;
};
#endif

/// The op names of a compiled function's Apply nodes, in execution order.
template <class F>
std::vector<std::string> op_names(const F& f) {
  std::vector<std::string> names;
  for (const auto& n : f.toposort()) names.push_back(n.op_name());
  return names;
}

}  // namespace xsym_test

#endif
