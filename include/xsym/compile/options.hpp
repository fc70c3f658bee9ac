#ifndef XSYM_COMPILE_OPTIONS_HPP
#define XSYM_COMPILE_OPTIONS_HPP

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../config/config.hpp"
#include "../rewrite/rewrites.hpp"

namespace xsym {

class profile_stats;

/// @brief Raised when a function cannot be built from what it was given.
class compile_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief Per-function choices; unset ones come from xsym::config.
struct function_options {
  std::optional<std::string> mode;
  std::optional<std::string> linker;
  std::optional<std::string> optimizer;
  std::optional<std::string> including, excluding, requiring;
  std::optional<bool> profile;
  std::shared_ptr<profile_stats> stats;
  bool ignore_unused_inputs = false;
};

/// @brief The mode a function compiles with, e.g. xsym::mode("FAST_COMPILE").
struct mode {
  std::string name;
  explicit mode(std::string n) : name(std::move(n)) {}
};
/// @brief The linker: cvm (frees intermediates), cvm_nogc (keeps buffers between calls), py (reference kernels).
struct linker {
  std::string name;
  explicit linker(std::string n) : name(std::move(n)) {}
};
/// @brief Rewrites to add, remove or require, as colon-separated names or tags.
struct optimizer_including { std::string names; explicit optimizer_including(std::string n) : names(std::move(n)) {} };
struct optimizer_excluding { std::string names; explicit optimizer_excluding(std::string n) : names(std::move(n)) {} };
struct optimizer_requiring { std::string names; explicit optimizer_requiring(std::string n) : names(std::move(n)) {} };
/// @brief Accept inputs that no output depends on (Theano's on_unused_input='ignore').
struct ignore_unused_inputs {};

namespace detail {
inline void apply_option(function_options& o, const mode& m) { o.mode = m.name; }
inline void apply_option(function_options& o, const linker& l) { o.linker = l.name; }
inline void apply_option(function_options& o, const optimizer_including& x) { o.including = x.names; }
inline void apply_option(function_options& o, const optimizer_excluding& x) { o.excluding = x.names; }
inline void apply_option(function_options& o, const optimizer_requiring& x) { o.requiring = x.names; }
inline void apply_option(function_options& o, const ignore_unused_inputs&) { o.ignore_unused_inputs = true; }

inline std::vector<std::string> split_colon(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ':'))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

/// What a function's build resolved: the rewrites to run and how to link.
struct resolved_plan {
  std::string mode;
  std::string linker;
  std::set<std::string> rewrites;
  bool reference_kernels = false;
  bool gc = true;
};

inline resolved_plan resolve_plan(const function_options& o) {
  config.ensure_loaded();
  resolved_plan p;
  p.mode = o.mode.value_or(config.mode.value());
  std::string optimizer = o.optimizer.value_or(config.optimizer.value());
  std::string link = o.linker.value_or(config.linker.value());
  if (p.mode == "FAST_COMPILE") {
    optimizer = "fast_compile";
    link = "py";
  } else if (p.mode != "FAST_RUN") {
    throw compile_error("xsym: mode '" + p.mode +
                        "' is not available yet in this version (FAST_RUN and FAST_COMPILE are)");
  }
  if (link != "cvm" && link != "cvm_nogc" && link != "py")
    throw compile_error("xsym: unknown linker '" + link + "' (choose cvm, cvm_nogc or py)");
  p.linker = link;
  p.reference_kernels = link == "py";
  p.gc = link != "cvm_nogc" && config.allow_gc.value();

  auto matches = [](const rewrite_info& r, const std::string& name_or_tag) {
    if (r.name == name_or_tag) return true;
    return std::find(r.tags.begin(), r.tags.end(), name_or_tag) != r.tags.end();
  };
  auto check_known = [&](const std::string& what, const std::string& flag) {
    for (const auto& r : rewrite_registry())
      if (matches(r, what)) return;
    std::string known;
    std::set<std::string_view> names;
    for (const auto& r : rewrite_registry()) {
      names.insert(r.name);
      for (auto t : r.tags) names.insert(t);
    }
    for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    throw compile_error("xsym: " + flag + " names '" + what + "', which is no rewrite name or tag (known: " + known + ")");
  };
  if (optimizer != "None")
    for (const auto& r : rewrite_registry())
      if (matches(r, optimizer)) p.rewrites.insert(std::string(r.name));
  for (const auto& t : split_colon(o.including.value_or(config.optimizer_including.value()))) {
    check_known(t, "optimizer_including");
    for (const auto& r : rewrite_registry())
      if (matches(r, t)) p.rewrites.insert(std::string(r.name));
  }
  for (const auto& t : split_colon(o.excluding.value_or(config.optimizer_excluding.value()))) {
    check_known(t, "optimizer_excluding");
    for (const auto& r : rewrite_registry())
      if (matches(r, t)) p.rewrites.erase(std::string(r.name));
  }
  for (const auto& t : split_colon(o.requiring.value_or(config.optimizer_requiring.value()))) {
    check_known(t, "optimizer_requiring");
    for (const auto& r : rewrite_registry())
      if (matches(r, t) && !p.rewrites.count(std::string(r.name)))
        throw compile_error("xsym: optimizer_requiring names '" + t + "' but rewrite '" + std::string(r.name) +
                            "' is turned off by the mode or optimizer_excluding");
  }
  return p;
}
}  // namespace detail
}  // namespace xsym

#endif
