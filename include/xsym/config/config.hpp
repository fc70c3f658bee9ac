#ifndef XSYM_CONFIG_CONFIG_HPP
#define XSYM_CONFIG_CONFIG_HPP

// Run-time flags with Theano's precedence:
//   assignment in code  >  XSYM_FLAGS  >  rc files  >  built-in default.
// XSYM_FLAGS and the rc files are read lazily, once, on the first read of any
// flag, so a program may assign flags in code before anything is loaded.
//
// Thread safety: the one-time load is synchronized, so concurrent first reads
// are fine. Assigning flags, set(), reload() and reset() are meant for program
// start-up and tests; they must not race with reads.


#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cold.hpp"
#include "flag.hpp"
#include "linkage.hpp"

XSYM_COLD_BEGIN  // flags are parsed and checked once, not per call

namespace xsym {

/// @brief All of xsym's run-time flags; use the global instance xsym::config.
struct config_t {
  /// @brief Flags under the [profiling] section.
  struct profiling_t {
    /// @brief Makes the flags, owned by `owner`.
    explicit profiling_t(const config_t& owner);
    flag<std::int64_t> n_apply;          ///< @brief Apply nodes shown in profile reports.
    flag<std::int64_t> n_ops;            ///< @brief Ops shown in profile reports.
    flag<std::int64_t> min_memory_size;  ///< @brief Smallest output size (bytes) in the memory profile.
    flag<std::string> destination;       ///< @brief stderr, stdout or a file path.
    flag<bool> ignore_first_call;        ///< @brief Leave each function's first call out of the profile.
    flag<bool> roofline;                 ///< @brief Add FLOP/s and bandwidth per node to reports.
  };
  /// @brief Flags under the [gcc] section (Theano's name for the C++ compiler's settings).
  struct gcc_t {
    /// @brief Makes the flags, owned by `owner`.
    explicit gcc_t(const config_t& owner);
    flag<std::string> cxxflags;  ///< @brief Flags cxx compiles kernels with, after -std=c++20 -fPIC -shared.
  };
  /// @brief Flags under the [DebugMode] section.
  struct debug_mode_t {
    /// @brief Makes the flags, owned by `owner`.
    explicit debug_mode_t(const config_t& owner);
    flag<bool> check_isfinite;  ///< @brief In DebugMode, raise on NaN or Inf outputs.
  };

  /// @brief Makes every flag with its default value; nothing is read until first use.
  config_t();
  config_t(const config_t&) = delete;
  config_t& operator=(const config_t&) = delete;

  flag<std::string> mode;                 ///< @brief FAST_RUN | FAST_COMPILE | DebugMode | MonitorMode | NanGuardMode.
  flag<std::string> linker;               ///< @brief cvm | cvm_nogc | py.
  flag<std::string> optimizer;            ///< @brief fast_run | fast_compile | merge | None.
  flag<std::string> optimizer_including;  ///< @brief Colon-separated rewrite names/tags to add.
  flag<std::string> optimizer_excluding;  ///< @brief Colon-separated rewrite names/tags to remove.
  flag<std::string> optimizer_requiring;  ///< @brief Colon-separated rewrite names/tags that must run.
  flag<bool> allow_gc;                    ///< @brief Free intermediates after their last use.
  flag<std::string> device;               ///< @brief cpu | cuda.
  flag<bool> profile;                     ///< @brief Profile every compiled function.
  flag<bool> profile_memory;              ///< @brief Also profile memory per Apply node.
  flag<bool> profile_optimizer;           ///< @brief Also profile graph rewrites.
  profiling_t profiling;                  ///< @brief [profiling] flags.
  debug_mode_t DebugMode;                 ///< @brief [DebugMode] flags.
  flag<bool> openmp;                      ///< @brief Parallel kernels (programs compiled with -fopenmp).
  flag<std::int64_t> openmp_elemwise_minsize;  ///< @brief Smallest elementwise output run in parallel.
  flag<std::string> cxx;                  ///< @brief C++ compiler for fused kernels; empty: none are compiled.
  gcc_t gcc;                              ///< @brief [gcc] flags.
  flag<std::string> compiledir;           ///< @brief Where compiled kernels are kept between runs.
  flag<std::string> floatX;               ///< @brief Read-only mirror of XSYM_FLOATX: "float32" or "float64".
  flag<std::string> compute_test_value;   ///< @brief off | ignore | warn | raise: test values computed as graphs are built.

  /// @brief Assigns a flag by dotted name from text, as code (highest precedence), validated like XSYM_FLAGS.
  void set(std::string_view name, std::string_view value);
  /// @brief Effective value of a flag by dotted name, as text.
  std::string get(std::string_view name) const;
  /// @brief Forgets XSYM_FLAGS and rc values and reads them again now; code assignments are kept.
  void reload();
  /// @brief Drops code assignments and loaded values; the next read loads XSYM_FLAGS and rc files again.
  void reset();
  /// @brief Reads XSYM_FLAGS and the rc files if not done yet; throws config_error on bad input.
  void ensure_loaded() const;
  /// @brief Whether XSYM_FLAGS and the rc files have been read successfully.
  bool is_loaded() const noexcept { return m_loaded.load(std::memory_order_acquire); }
  /// @brief Dotted names of every flag, in declaration order.
  std::vector<std::string_view> flag_names() const;

  friend std::ostream& operator<<(std::ostream& os, const config_t& c);

 private:
  detail::flag_base& find(std::string_view name, std::string_view where) const;
  void load_locked() const;

  std::vector<detail::flag_base*> m_flags;
  mutable std::mutex m_load_mutex;
  mutable std::atomic<bool> m_loaded{false};
};

namespace detail {

inline flag<std::string>::check_type one_of(std::vector<std::string_view> choices) {
  return [choices = std::move(choices)](const std::string& v) -> std::string {
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return {};
    std::string why = "expected one of ";
    for (std::size_t i = 0; i < choices.size(); ++i) why += (i ? ", " : "") + std::string(choices[i]);
    if (auto hint = did_you_mean(v, choices); !hint.empty()) why += "; " + hint;
    return why;
  };
}

inline std::string join(const std::vector<std::string_view>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::string(items[i]);
  return out;
}

inline flag<std::int64_t>::check_type at_least(std::int64_t min) {
  return [min](const std::int64_t& v) -> std::string {
    return v >= min ? std::string() : "expected an integer >= " + std::to_string(min);
  };
}

// "" means none; otherwise every colon-separated name must be non-empty and without spaces.
inline std::string check_tag_list(const std::string& v) {
  if (v.empty()) return {};
  std::string_view rest = v;
  while (true) {
    const auto colon = rest.find(':');
    const auto tag = rest.substr(0, colon);
    if (tag.empty()) return "expected colon-separated rewrite names or tags (e.g. fusion:inplace), found an empty name";
    if (std::any_of(tag.begin(), tag.end(), is_space))
      return "expected colon-separated rewrite names or tags (e.g. fusion:inplace), found '" + std::string(tag) +
             "' containing a space";
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

inline std::string check_destination(const std::string& v) {
  return v.empty() ? "expected stdout, stderr or a file path, not an empty string" : std::string();
}

inline std::string check_nonempty_path(const std::string& v) {
  return v.empty() ? "expected a directory path, not an empty string" : std::string();
}

// Flags that let the compiler assume NaN and Inf away or reorder arithmetic: kernels built
// with them would answer differently from the interpreted ones, with no error.
inline std::string check_cxxflags(const std::string& v) {
  static constexpr std::string_view refused[] = {
      "-ffast-math",       "-Ofast",           "-ffinite-math-only", "-funsafe-math-optimizations",
      "-fassociative-math", "-freciprocal-math", "-fno-signed-zeros", "-fno-honor-nans",
      "-fno-honor-infinities", "-fapprox-func", "-mfpmath=387"};
  std::string_view rest = v;
  while (!rest.empty()) {
    const auto start = rest.find_first_not_of(" \t\n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const auto word = rest.substr(0, rest.find_first_of(" \t\n"));
    rest.remove_prefix(word.size());
    for (auto r : refused)
      if (word == r)
        return std::string(word) +
               " would let fused kernels answer differently from interpreted ones (NaN, Inf, signed zeros or "
               "the order of sums); remove it";
  }
  return {};
}

// $XDG_CACHE_HOME/xsym, else ~/.cache/xsym, else /tmp/xsym.
inline std::string default_compiledir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/xsym";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/xsym";
  return "/tmp/xsym";
}

inline std::string check_floatx(const std::string& v) {
  if (v == floatx_name()) return {};
  return "floatX is chosen at compile time with -DXSYM_FLOATX=float or -DXSYM_FLOATX=double; this program was "
         "compiled with XSYM_FLOATX=" +
         std::string(std::is_same_v<floatX, float> ? "float" : "double") + ", so floatX can only be '" +
         std::string(floatx_name()) + "'";
}

inline const std::string bool_expected = "a boolean (True/False, true/false, 1/0 or yes/no)";

inline std::string choices_expected(const std::vector<std::string_view>& choices) { return "one of " + join(choices); }

inline const std::vector<std::string_view> mode_choices = {"FAST_RUN", "FAST_COMPILE", "DebugMode", "MonitorMode",
                                                           "NanGuardMode", "ProfileMode"};
// Theano's c|py, c|py_nogc and c are accepted: every op has a compiled kernel here, so they are
// cvm, cvm_nogc and cvm.
inline const std::vector<std::string_view> linker_choices = {"cvm", "cvm_nogc", "py", "c|py", "c|py_nogc", "c"};
// Theano's names of flags that xsym spells otherwise: (old, xsym's).
inline const std::pair<std::string_view, std::string_view> flag_aliases[] = {
    {"ProfileMode.n_apply_to_print", "profiling.n_apply"},
    {"ProfileMode.n_ops_to_print", "profiling.n_ops"},
};
inline const std::vector<std::string_view> optimizer_choices = {"fast_run", "fast_compile", "merge", "None"};
inline const std::vector<std::string_view> device_choices = {"cpu", "cuda"};
inline const std::vector<std::string_view> test_value_choices = {"off", "ignore", "warn", "raise"};

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

/// @brief An rc file to read, and whether its absence is an error.
struct rc_file {
  std::string path;
  bool required;
};

/// @brief The files XSYMRC names (':'-separated, in order), or ~/.xsymrc when XSYMRC is unset.
inline std::vector<rc_file> rc_files_to_read() {
  std::vector<rc_file> files;
  const std::string home = env_or_empty("HOME");
  if (const char* list = std::getenv("XSYMRC")) {
    // Like PATH, empty entries are skipped, so XSYMRC="" reads no rc file at all.
    std::string_view rest = list;
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      std::string path(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (path.empty()) continue;
      if (path.starts_with("~/") && !home.empty()) path = home + path.substr(1);
      files.push_back({std::move(path), true});
    }
  } else if (!home.empty()) {
    files.push_back({home + "/.xsymrc", false});
  }
  return files;
}

/// @brief Text of an rc file; nullopt if it does not exist and is not required.
inline std::optional<std::string> read_rc_file(const rc_file& f) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(f.path, ec);
  if (st.type() == fs::file_type::not_found) {
    if (!f.required) return std::nullopt;
    fail("rc file " + f.path + " named in XSYMRC does not exist");
  }
  if (ec) fail("cannot access rc file " + f.path + ": " + ec.message());
  if (fs::is_directory(st)) fail("rc file " + f.path + " is a directory, not a file");
  std::ifstream in(f.path, std::ios::binary);
  if (!in) fail("cannot open rc file " + f.path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("error while reading rc file " + f.path);
  return text;
}

}  // namespace detail

// Making the flags and reading XSYM_FLAGS and rc files: compiled once with XSYM_COMPILED_LIB.
#if XSYM_RUNTIME_DEFINITIONS
XSYM_RUNTIME_INLINE config_t::profiling_t::profiling_t(const config_t& owner)
    : n_apply(owner, "profiling.n_apply", "Number of Apply nodes listed in profile reports", 20,
              "an integer >= 0", detail::at_least(0)),
      n_ops(owner, "profiling.n_ops", "Number of ops listed in profile reports", 20, "an integer >= 0",
            detail::at_least(0)),
      min_memory_size(owner, "profiling.min_memory_size",
                      "Memory profile lists only Apply nodes whose outputs take at least this many bytes", 1024,
                      "an integer >= 0", detail::at_least(0)),
      destination(owner, "profiling.destination", "Where profile reports go: stderr, stdout or a file path",
                  "stderr", "stdout, stderr or a file path", detail::check_destination),
      ignore_first_call(owner, "profiling.ignore_first_call",
                        "Leave each function's first (warm-up) call out of the profile", false,
                        detail::bool_expected),
      roofline(owner, "profiling.roofline", "Add achieved FLOP/s and memory bandwidth per node to profile reports",
               false, detail::bool_expected) {}

XSYM_RUNTIME_INLINE config_t::gcc_t::gcc_t(const config_t& owner)
    : cxxflags(owner, "gcc.cxxflags",
               "Flags cxx compiles fused kernels with (after -std=c++20 -fPIC -shared; -ffp-contract=off follows them)",
               "-O3 -march=native", "compiler flags separated by spaces", detail::check_cxxflags) {}

XSYM_RUNTIME_INLINE config_t::debug_mode_t::debug_mode_t(const config_t& owner)
    : check_isfinite(owner, "DebugMode.check_isfinite", "In DebugMode, raise an error when an output holds NaN or Inf",
                     true, detail::bool_expected) {}

XSYM_RUNTIME_INLINE config_t::config_t()
    : mode(*this, "mode", "Default compilation mode of xsym::function", "FAST_RUN",
           detail::choices_expected(detail::mode_choices), detail::one_of(detail::mode_choices)),
      linker(*this, "linker", "cvm frees intermediates, cvm_nogc keeps buffers across calls, py is the reference",
             "cvm", detail::choices_expected(detail::linker_choices), detail::one_of(detail::linker_choices)),
      optimizer(*this, "optimizer", "Set of graph rewrites applied when a function is built", "fast_run",
                detail::choices_expected(detail::optimizer_choices), detail::one_of(detail::optimizer_choices)),
      optimizer_including(*this, "optimizer_including", "Colon-separated rewrite names or tags to add", "",
                          "colon-separated rewrite names or tags", detail::check_tag_list),
      optimizer_excluding(*this, "optimizer_excluding",
                          "Colon-separated rewrite names or tags to leave out (e.g. fusion:inplace)", "",
                          "colon-separated rewrite names or tags", detail::check_tag_list),
      optimizer_requiring(*this, "optimizer_requiring", "Colon-separated rewrite names or tags that must run", "",
                          "colon-separated rewrite names or tags", detail::check_tag_list),
      allow_gc(*this, "allow_gc", "Free intermediate results as soon as no later node needs them", true,
               detail::bool_expected),
      device(*this, "device", "Where compiled functions run", "cpu", detail::choices_expected(detail::device_choices),
             detail::one_of(detail::device_choices)),
      profile(*this, "profile", "Profile every compiled function (time per Apply node, op and class)", false,
              detail::bool_expected),
      profile_memory(*this, "profile_memory", "Also record the memory of each Apply node's outputs", false,
                     detail::bool_expected),
      profile_optimizer(*this, "profile_optimizer", "Also profile the graph rewrites run at function build", false,
                        detail::bool_expected),
      profiling(*this),
      DebugMode(*this),
      openmp(*this, "openmp",
             "Run large elementwise nodes and matrix-vector products on OpenMP's threads (OMP_NUM_THREADS); "
             "needs a program compiled with -fopenmp",
             false, detail::bool_expected),
      openmp_elemwise_minsize(*this, "openmp_elemwise_minsize",
                              "With openmp=True, the smallest elementwise output (in elements) split among threads",
                              200000, "an integer >= 1", detail::at_least(1)),
      cxx(*this, "cxx",
          "C++ compiler (g++ or a path) that compiles each function's fused elementwise programs into one loop "
          "each; empty: they run as a sequence of precompiled vector kernels",
          "", "a compiler command, or empty"),
      gcc(*this),
      compiledir(*this, "compiledir", "Directory where the kernels cxx compiled are kept and reused",
                 detail::default_compiledir(), "a directory path", detail::check_nonempty_path),
      floatX(*this, "floatX", "Default float type; fixed at compile time by -DXSYM_FLOATX=float|double",
             std::string(detail::floatx_name()), "'" + std::string(detail::floatx_name()) + "' (set at compile time)",
             detail::check_floatx),
      compute_test_value(*this, "compute_test_value",
                         "Compute each node's value on its inputs' test values as the graph is built (off: never; "
                         "ignore, warn, raise: what an input without a test value does)",
                         "off", detail::choices_expected(detail::test_value_choices),
                         detail::one_of(detail::test_value_choices)) {
  m_flags = {&mode,
             &linker,
             &optimizer,
             &optimizer_including,
             &optimizer_excluding,
             &optimizer_requiring,
             &allow_gc,
             &device,
             &profile,
             &profile_memory,
             &profile_optimizer,
             &profiling.n_apply,
             &profiling.n_ops,
             &profiling.min_memory_size,
             &profiling.destination,
             &profiling.ignore_first_call,
             &profiling.roofline,
             &DebugMode.check_isfinite,
             &openmp,
             &openmp_elemwise_minsize,
             &cxx,
             &gcc.cxxflags,
             &compiledir,
             &floatX,
             &compute_test_value};
}

XSYM_RUNTIME_INLINE std::vector<std::string_view> config_t::flag_names() const {
  std::vector<std::string_view> names;
  names.reserve(m_flags.size());
  for (const auto* f : m_flags) names.push_back(f->name());
  return names;
}

XSYM_RUNTIME_INLINE detail::flag_base& config_t::find(std::string_view name, std::string_view where) const {
  for (const auto& [old_name, new_name] : detail::flag_aliases)
    if (name == old_name) name = new_name;
  for (auto* f : m_flags)
    if (f->name() == name) return *f;
  std::string msg = "unknown flag '" + std::string(name) + "' (from " + std::string(where) + ")";
  const auto names = flag_names();
  if (auto hint = detail::did_you_mean(name, names); !hint.empty())
    msg += "; " + hint;
  else
    msg += "; valid flags are: " + detail::join(names);
  detail::fail(msg);
}

XSYM_RUNTIME_INLINE void config_t::set(std::string_view name, std::string_view value) {
  find(name, "code").set_text(detail::trim(value), "code");
}

XSYM_RUNTIME_INLINE std::string config_t::get(std::string_view name) const { return find(name, "code").text(); }

// No half-applied environment is ever visible: the layers are cleared first, and if
// anything throws the caller leaves m_loaded false, so the next read loads again.
XSYM_RUNTIME_INLINE void config_t::load_locked() const {
  for (const auto* f : m_flags) f->forget_loaded();
  for (const auto& file : detail::rc_files_to_read()) {
    const auto text = detail::read_rc_file(file);
    if (!text) continue;
    for (const auto& e : detail::parse_rc_entries(*text, file.path)) {
      const auto where = detail::rc_where(file.path, e.line);
      find(e.key, where).load_text(e.value, flag_source::rc_file, where, file.path);
    }
  }
  if (const char* env = std::getenv("XSYM_FLAGS"))
    for (const auto& [key, value] : detail::parse_flags_string(env))
      find(key, "XSYM_FLAGS").load_text(value, flag_source::env, "XSYM_FLAGS", {});
}
#endif  // XSYM_RUNTIME_DEFINITIONS

inline void config_t::ensure_loaded() const {
  if (m_loaded.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(m_load_mutex);
  if (m_loaded.load(std::memory_order_relaxed)) return;
  // On failure m_loaded stays false, so every later read reports the error again.
  load_locked();
  m_loaded.store(true, std::memory_order_release);
}

inline void config_t::reload() {
  std::lock_guard<std::mutex> lock(m_load_mutex);
  m_loaded.store(false, std::memory_order_relaxed);
  load_locked();
  m_loaded.store(true, std::memory_order_release);
}

inline void config_t::reset() {
  std::lock_guard<std::mutex> lock(m_load_mutex);
  for (auto* f : m_flags) {
    f->reset_code_value();
    f->forget_loaded();
  }
  m_loaded.store(false, std::memory_order_release);
}

template <class T>
const T& flag<T>::value() const {
  m_owner->ensure_loaded();
  if (m_code) return *m_code;
  if (m_env) return *m_env;
  if (m_rc) return *m_rc;
  return m_default;
}

template <class T>
flag_source flag<T>::source() const {
  m_owner->ensure_loaded();
  if (m_code) return flag_source::code;
  if (m_env) return flag_source::env;
  if (m_rc) return flag_source::rc_file;
  return flag_source::default_value;
}

template <class T>
std::string flag<T>::origin() const {
  const auto s = source();
  if (s == flag_source::rc_file) return "rc file " + m_rc_path;
  return std::string(to_string(s));
}

/// @brief Prints every flag, one per line: name, value, where the value came from, and a one-line doc.
inline std::ostream& operator<<(std::ostream& os, const config_t& c) {
  c.ensure_loaded();
  struct row {
    std::string name, value, origin, doc;
  };
  std::vector<row> rows;
  rows.push_back({"flag", "value", "source", "description"});
  for (const auto* f : c.m_flags) {
    std::string value = f->text();
    rows.push_back({std::string(f->name()), value.empty() ? "\"\"" : std::move(value), f->origin(),
                    std::string(f->doc())});
  }
  // A long path should not push every other line's doc off the screen.
  constexpr std::size_t max_width = 24;
  std::size_t w_name = 0, w_value = 0, w_origin = 0;
  for (const auto& r : rows) {
    w_name = std::max(w_name, r.name.size());
    if (r.value.size() <= max_width) w_value = std::max(w_value, r.value.size());
    if (r.origin.size() <= max_width) w_origin = std::max(w_origin, r.origin.size());
  }
  const auto cell = [&os](const std::string& s, std::size_t w) {
    os << s << std::string(s.size() < w ? w - s.size() : 0, ' ') << "  ";
  };
  os << "xsym config (precedence: code > XSYM_FLAGS > rc file > default)\n";
  for (const auto& r : rows) {
    cell(r.name, w_name);
    cell(r.value, w_value);
    cell(r.origin, w_origin);
    os << r.doc << '\n';
  }
  return os;
}

/// @brief The process-wide configuration: `xsym::config.profile = true;`.
XSYM_RUNTIME_VARIABLE config_t config;

}  // namespace xsym
XSYM_COLD_END

#endif  // XSYM_CONFIG_CONFIG_HPP
