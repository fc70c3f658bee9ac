#ifndef XSYM_COMPILE_OPTIONS_HPP
#define XSYM_COMPILE_OPTIONS_HPP

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../backend/cpu/parallel.hpp"
#include "../config/config.hpp"
#include "../graph/fgraph.hpp"
#include "pipeline.hpp"
#include "../config/cold.hpp"

XSYM_COLD_BEGIN  // options are resolved when a function is built

namespace xsym {

class profile_stats;

/// @brief Raised when a function cannot be built from what it was given.
class compile_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief What MonitorMode's callbacks see: one Apply node and its values.
struct node_event {
  const function_graph* graph = nullptr;
  const apply_node* node = nullptr;
  std::vector<const ndarray*> inputs;
  std::vector<const ndarray*> outputs;  // empty before the node runs
  std::string text() const { return graph->node_text(*node); }
};
using monitor_callback = std::function<void(const node_event&)>;

namespace detail {
// A MonitorMode callback's exception on its way out of the call loop: the loop cleans up,
// then the caller gets the exception as the callback threw it (not as a node's error).
struct callback_exception {
  std::exception_ptr error;
};
}  // namespace detail

/// @brief Per-function choices; unset ones come from xsym::config.
struct function_options {
  std::optional<std::string> mode;
  std::optional<std::string> linker;
  std::optional<std::string> optimizer;
  std::optional<std::string> including, excluding, requiring;
  std::optional<bool> profile;
  std::optional<std::string> device;                  // cpu | cuda; the flag when unset
  std::shared_ptr<profile_stats> stats;
  bool ignore_unused_inputs = false;
  std::optional<bool> check_isfinite;                 // DebugMode
  std::optional<std::array<bool, 3>> nan_guard;      // NanGuardMode: nan, inf, big are errors
  monitor_callback monitor_pre, monitor_post;          // MonitorMode
  bool is_reference = false;                          // DebugMode's unoptimised twin, or a test value's graph
  bool replays_collectives = false;                   // DebugMode's twin: AllReduce results come from the function
};

/// @brief DebugMode: every node is checked against the reference kernels, the outputs
/// against the graph without fusion or in-place rewrites; see xsym::debug_mode_error.
struct debug_mode {
  std::optional<bool> check_isfinite;
};
/// @brief NanGuardMode: raise xsym::nan_guard_error at the first node producing NaN, Inf or a
/// value of magnitude above 1e10, as selected.
struct nan_guard_mode {
  bool nan_is_error = true, inf_is_error = true, big_is_error = true;
};
/// @brief MonitorMode: call pre before and post after every Apply node.
struct monitor_mode {
  monitor_callback pre, post;
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
/// @brief The rewrite set: fast_run, fast_compile, merge, or None (no rewrite at all); any
/// other name is a compile_error, as for the optimizer flag.
struct optimizer {
  std::string name;
  explicit optimizer(std::string n) : name(std::move(n)) {}
};
/// @brief Rewrites to add, remove or require, as colon-separated names or tags.
struct optimizer_including { std::string names; explicit optimizer_including(std::string n) : names(std::move(n)) {} };
struct optimizer_excluding { std::string names; explicit optimizer_excluding(std::string n) : names(std::move(n)) {} };
struct optimizer_requiring { std::string names; explicit optimizer_requiring(std::string n) : names(std::move(n)) {} };
/// @brief Accept inputs that no output depends on (Theano's on_unused_input='ignore').
struct ignore_unused_inputs {};
/// @brief Where this function runs: "cpu", or "cuda" (needs <xsym/gpu.hpp>); the device flag otherwise.
struct device {
  std::string name;
  explicit device(std::string n) : name(std::move(n)) {}
};

namespace detail {
inline void apply_option(function_options& o, const mode& m) { o.mode = m.name; }
inline void apply_option(function_options& o, const linker& l) { o.linker = l.name; }
inline void apply_option(function_options& o, const optimizer& x) { o.optimizer = x.name; }
inline void apply_option(function_options& o, const optimizer_including& x) { o.including = x.names; }
inline void apply_option(function_options& o, const optimizer_excluding& x) { o.excluding = x.names; }
inline void apply_option(function_options& o, const optimizer_requiring& x) { o.requiring = x.names; }
inline void apply_option(function_options& o, const ignore_unused_inputs&) { o.ignore_unused_inputs = true; }
inline void apply_option(function_options& o, const device& d) { o.device = d.name; }
inline void apply_option(function_options& o, const debug_mode& d) {
  o.mode = "DebugMode";
  o.check_isfinite = d.check_isfinite;
}
inline void apply_option(function_options& o, const nan_guard_mode& n) {
  o.mode = "NanGuardMode";
  o.nan_guard = std::array<bool, 3>{n.nan_is_error, n.inf_is_error, n.big_is_error};
}
inline void apply_option(function_options& o, const monitor_mode& m) {
  o.mode = "MonitorMode";
  o.monitor_pre = m.pre;
  o.monitor_post = m.post;
}

/// What a function's build resolved: the rewrites to run and how to link.
struct resolved_plan {
  std::string mode;
  std::string linker;
  std::set<std::string> rewrites;  // the names of the rows chosen
  std::vector<std::shared_ptr<const rewrite_row>> rewrite_rows;  // every row, in run order
  bool reference_kernels = false;
  bool gc = true;
  bool gpu = false;  // device=cuda
  bool debug = false, check_isfinite = true;
  bool nan_guard = false;
  std::array<bool, 3> guard{true, true, true};
  bool monitor = false;
  bool profile = false;  // mode=ProfileMode
  cpu::parallelism par;  // openmp=True: OpenMP's thread count, else one thread
  // cxx: the compiler of fused programs (empty: none), its flags and where libraries are kept.
  std::string cxx, cxxflags, compiledir;
};

inline resolved_plan resolve_plan(const function_options& o) {
  config.ensure_loaded();
  // The per-function options take what their flags take, checked as the flags are (a
  // misspelt optimizer would otherwise select no rewrite at all, stabilize included).
  auto check_option = [](const std::optional<std::string>& v, const char* option, const auto& check) {
    if (!v) return;
    if (const std::string why = check(*v); !why.empty())
      throw compile_error("xsym: bad value in xsym::" + std::string(option) + "('" + *v + "'): " + why);
  };
  static const auto check_optimizer = one_of(optimizer_choices);
  check_option(o.optimizer, "optimizer", check_optimizer);
  check_option(o.including, "optimizer_including", check_tag_list);
  check_option(o.excluding, "optimizer_excluding", check_tag_list);
  check_option(o.requiring, "optimizer_requiring", check_tag_list);
  resolved_plan p;
  p.mode = o.mode.value_or(config.mode.value());
  std::string optimizer = o.optimizer.value_or(config.optimizer.value());
  std::string link = o.linker.value_or(config.linker.value());
  if (p.mode == "FAST_COMPILE") {
    optimizer = o.optimizer.value_or("fast_compile");
    link = o.linker.value_or("py");  // an explicit linker wins over the mode's
  } else if (p.mode == "DebugMode") {
    p.debug = true;
    p.check_isfinite = o.check_isfinite.value_or(config.DebugMode.check_isfinite.value());
  } else if (p.mode == "NanGuardMode") {
    p.nan_guard = true;
    if (o.nan_guard) p.guard = *o.nan_guard;
  } else if (p.mode == "MonitorMode") {
    p.monitor = true;
  } else if (p.mode == "ProfileMode") {
    // Theano's old name for FAST_RUN with the profiler on; said once per process, as Theano did.
    p.profile = true;
    static std::once_flag said;
    std::call_once(said, [] {
      std::fputs("xsym: mode=ProfileMode is deprecated: it is FAST_RUN with profile=True; set those instead\n", stderr);
    });
  } else if (p.mode != "FAST_RUN") {
    const std::string hint = detail::did_you_mean(p.mode, detail::mode_choices);
    throw compile_error("xsym: unknown mode '" + p.mode +
                        "' (choose FAST_RUN, FAST_COMPILE, DebugMode, NanGuardMode, MonitorMode or ProfileMode" +
                        (hint.empty() ? "" : "; " + hint) + ")");
  }
  // Flags that name what this build cannot do are errors, never silently ignored.
  const std::string dev = o.device.value_or(config.device.value());
  if (dev == "cuda") {
    if (!device_hooks().allocate)
      throw compile_error(
          "xsym: device=cuda, but this program was built without xsym's GPU backend: include <xsym/gpu.hpp> and "
          "compile with nvcc (or with g++ -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP "
          "-I<cuda>/include/cccl to run the GPU code on the CPU), or set device=cpu");
    if (p.debug || p.nan_guard || p.monitor)
      throw compile_error("xsym: mode=" + p.mode + " checks values on the host and is not available with device=cuda "
                          "(set device=cpu to debug the graph)");
    p.gpu = true;
  } else if (dev != "cpu") {
    throw compile_error("xsym: device=" + dev + " is unknown (choose cpu or cuda)");
  }
  if (config.openmp.value()) {
    if (!cpu::openmp_compiled_in)
      throw compile_error("xsym: openmp=True, but this program was compiled without OpenMP: compile with -fopenmp "
                          "(link CMake's xsym::openmp target) or set openmp=False");
    // Reference kernels (FAST_COMPILE, linker=py) stay serial: they are the plain loops DebugMode trusts.
    if (!p.gpu) p.par.threads = cpu::max_threads();
    p.par.elemwise_minsize = config.openmp_elemwise_minsize.value();
  }
  // Theano's linkers: c|py and c are the compiled kernels with gc, c|py_nogc without.
  if (link == "c|py" || link == "c") link = "cvm";
  else if (link == "c|py_nogc") link = "cvm_nogc";
  if (link != "cvm" && link != "cvm_nogc" && link != "py")
    throw compile_error("xsym: unknown linker '" + link + "' (choose cvm, cvm_nogc, py, c|py, c|py_nogc or c)");
  p.linker = link;
  p.reference_kernels = link == "py";
  p.gc = link != "cvm_nogc" && config.allow_gc.value();
  // The reference kernels (py, FAST_COMPILE, DebugMode's reference) are never compiled.
  if (!p.reference_kernels && !p.gpu) {
    p.cxx = std::string(detail::trim(config.cxx.value()));
    p.cxxflags = config.gcc.cxxflags.value();
    p.compiledir = config.compiledir.value();
  }

  // The same rows the pipeline runs (compile/pipeline.hpp), xsym's and the program's.
  p.rewrite_rows = rewrite_rows();
  const auto& rows = p.rewrite_rows;
  auto matches = [](const rewrite_row& r, const std::string& name_or_tag) {
    if (r.name == name_or_tag) return true;
    return std::find(r.tags.begin(), r.tags.end(), name_or_tag) != r.tags.end();
  };
  auto check_known = [&](const std::string& what, const std::string& flag) {
    for (const auto& r : rows)
      if (matches(*r, what)) return;
    std::string known;
    std::set<std::string> names;
    for (const auto& r : rows) {
      names.insert(r->name);
      for (const auto& t : r->tags) names.insert(t);
    }
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    const std::string guess = detail::did_you_mean(what, std::vector<std::string_view>(names.begin(), names.end()));
    throw compile_error("xsym: " + flag + " names '" + what + "', which is no rewrite name or tag" +
                        (guess.empty() ? "" : "; " + guess) + " (known: " + known + ")");
  };
  if (optimizer != "None")
    for (const auto& r : rows)
      if (matches(*r, optimizer)) p.rewrites.insert(r->name);
  for (const auto& t : split_colon(o.including.value_or(config.optimizer_including.value()))) {
    check_known(t, "optimizer_including");
    for (const auto& r : rows)
      if (matches(*r, t)) p.rewrites.insert(r->name);
  }
  for (const auto& t : split_colon(o.excluding.value_or(config.optimizer_excluding.value()))) {
    check_known(t, "optimizer_excluding");
    for (const auto& r : rows) {
      if (!matches(*r, t)) continue;
      if (p.gpu && r->name == gpu_placement_rewrite)
        throw compile_error("xsym: optimizer_excluding names '" + t + "', which would remove " +
                            std::string(gpu_placement_rewrite) + ": device=cuda needs it (set device=cpu instead)");
      p.rewrites.erase(r->name);
    }
  }
  // Placing nodes on the device is what device=cuda means, whatever the mode's rewrites.
  if (p.gpu) p.rewrites.insert(std::string(gpu_placement_rewrite));
  else p.rewrites.erase(std::string(gpu_placement_rewrite));
  if (p.gpu) {  // CPU kernels: with device=cuda the products and the Composite run on the device
    p.rewrites.erase(std::string(one_pass_rewrite));
    p.rewrites.erase(std::string(set_fusion_rewrite));
    p.rewrites.erase(std::string(reduce_fusion_rewrite));
  }
  for (const auto& t : split_colon(o.requiring.value_or(config.optimizer_requiring.value()))) {
    check_known(t, "optimizer_requiring");
    for (const auto& r : rows)
      if (matches(*r, t) && !p.rewrites.count(r->name))
        throw compile_error("xsym: optimizer_requiring names '" + t + "' but rewrite '" + r->name + "' " +
                            (r->name == gpu_placement_rewrite ? std::string("runs only with device=cuda")
                             : (r->name == one_pass_rewrite || r->name == set_fusion_rewrite || r->name == reduce_fusion_rewrite) && p.gpu
                                 ? std::string("does not run with device=cuda")
                                                              : std::string("is turned off by the mode or optimizer_excluding")));
  }
  return p;
}
}  // namespace detail
}  // namespace xsym
XSYM_COLD_END

#endif
