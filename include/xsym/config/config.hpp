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

#include <algorithm>
#include <atomic>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "cold.hpp"
#include "linkage.hpp"

XSYM_COLD_BEGIN  // flags are parsed and checked once, not per call

// floatX is a type, so it is chosen when compiling, not at run time.
#ifndef XSYM_FLOATX
#define XSYM_FLOATX float
#endif

namespace xsym {

/// @brief Scalar type of floating-point data; set at compile time with -DXSYM_FLOATX=float|double.
using floatX = XSYM_FLOATX;
static_assert(std::is_same_v<floatX, float> || std::is_same_v<floatX, double>,
              "XSYM_FLOATX must be float or double");

/// @brief Error in a flag's name or value, an rc file or XSYM_FLAGS; what() starts with "xsym config: ".
class config_error : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

/// @brief Layer a flag's effective value comes from, lowest precedence first.
enum class flag_source { default_value, rc_file, env, code };

/// @brief Short name of a flag source: "default", "rc file", "XSYM_FLAGS" or "code".
constexpr std::string_view to_string(flag_source s) noexcept {
  switch (s) {
    case flag_source::default_value: return "default";
    case flag_source::rc_file: return "rc file";
    case flag_source::env: return "XSYM_FLAGS";
    case flag_source::code: return "code";
  }
  return "unknown";
}

struct config_t;

namespace detail {

inline constexpr std::string_view error_prefix = "xsym config: ";

/// @brief Name of the compile-time floatX as the floatX flag spells it.
constexpr std::string_view floatx_name() noexcept {
  return std::is_same_v<floatX, float> ? "float32" : "float64";
}

[[noreturn]] inline void fail(const std::string& message) {
  throw config_error(std::string(error_prefix) + message);
}

inline bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

inline char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

/// @brief Levenshtein distance (insert, delete, substitute all cost 1).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

inline std::string_view last_component(std::string_view name) noexcept {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

inline std::string quoted_list(const std::vector<std::string_view>& names, std::string_view last_sep) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? last_sep : std::string_view(", ");
    out += '\'';
    out += names[i];
    out += '\'';
  }
  return out;
}

/// @brief "did you mean 'x'?" for the candidates nearest to `wrong`, or "" when none is close.
inline std::string did_you_mean(std::string_view wrong, const std::vector<std::string_view>& candidates) {
  std::vector<std::string_view> picks;
  // A flag given without its section ("n_apply") or under the wrong one.
  const auto tail = last_component(wrong);
  for (auto c : candidates)
    if (iequals(last_component(c), tail)) picks.push_back(c);
  // Typos: the closest names if within about a third of the length. Case is ignored,
  // so a name that differs only in case is at distance 0 and is the sole typo match.
  const std::string lw = to_lower(wrong);
  std::size_t best = static_cast<std::size_t>(-1);
  std::vector<std::size_t> dist;
  for (auto c : candidates) {
    dist.push_back(edit_distance(lw, to_lower(c)));
    best = std::min(best, dist.back());
  }
  if (best <= std::max<std::size_t>(2, wrong.size() / 3))
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (dist[i] == best && std::find(picks.begin(), picks.end(), candidates[i]) == picks.end())
        picks.push_back(candidates[i]);
  if (picks.empty()) return {};
  if (picks.size() > 3) picks.resize(3);
  return "did you mean " + quoted_list(picks, " or ") + "?";
}

/// @brief Parses True/False/true/false/1/0/yes/no, any case.
inline std::optional<bool> parse_bool(std::string_view s) noexcept {
  for (auto t : {"true", "1", "yes"})
    if (iequals(s, t)) return true;
  for (auto f : {"false", "0", "no"})
    if (iequals(s, f)) return false;
  return std::nullopt;
}

/// @brief Parses a decimal integer with an optional sign; `out_of_range` tells overflow from garbage.
inline std::optional<std::int64_t> parse_int(std::string_view s, bool& out_of_range) noexcept {
  out_of_range = false;
  // from_chars takes '-' but not '+'.
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (end != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    out_of_range = true;
    return std::nullopt;
  }
  if (ec != std::errc()) return std::nullopt;
  return v;
}

inline std::string format_value(bool v) { return v ? "True" : "False"; }
inline std::string format_value(std::int64_t v) { return std::to_string(v); }
inline std::string format_value(const std::string& v) { return v; }

/// @brief One key = value line of an rc file, with its section already applied to the key.
struct rc_entry {
  std::string key;
  std::string value;
  std::size_t line = 0;
};

inline std::string rc_where(std::string_view filename, std::size_t line) {
  return "rc file " + std::string(filename) + ":" + std::to_string(line);
}

/// @brief Parses INI text like parse_rc_text but keeps line numbers for later error messages.
inline std::vector<rc_entry> parse_rc_entries(std::string_view text, std::string_view filename) {
  // An editor may have saved a UTF-8 byte order mark.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<rc_entry> out;
  std::string prefix;  // "" for [global] and before any section
  std::size_t line_no = 0;
  while (!text.empty() || line_no == 0) {
    ++line_no;
    const auto nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const std::string_view line = trim(raw);
    const auto bad = [&](std::string_view why) {
      fail(rc_where(filename, line_no) + ": " + std::string(why) + ": " + std::string(line));
    };
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      const auto close = line.find(']');
      if (close == std::string_view::npos) bad("unterminated section header (missing ']')");
      if (close + 1 != line.size()) bad("unexpected text after section header");
      const auto section = trim(line.substr(1, close - 1));
      if (section.empty()) bad("empty section name");
      prefix = section == "global" ? std::string() : std::string(section) + ".";
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) bad("malformed line, expected 'key = value', '[section]' or a comment");
    const auto key = trim(line.substr(0, eq));
    if (key.empty()) bad("empty flag name");
    out.push_back({prefix + std::string(key), std::string(trim(line.substr(eq + 1))), line_no});
  }
  return out;
}

/// @brief Parses the text of an rc file (INI) into (dotted flag name, value) pairs; `filename` is for errors.
inline std::vector<std::pair<std::string, std::string>> parse_rc_text(std::string_view text,
                                                                      std::string_view filename) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& e : parse_rc_entries(text, filename)) out.emplace_back(std::move(e.key), std::move(e.value));
  return out;
}

/// @brief Parses XSYM_FLAGS text "a=b,c.d=e" into (name, value) pairs; empty items are skipped.
inline std::vector<std::pair<std::string, std::string>> parse_flags_string(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      fail("malformed item '" + std::string(item) + "' in XSYM_FLAGS: expected name=value");
    const auto key = trim(item.substr(0, eq));
    if (key.empty()) fail("malformed item '" + std::string(item) + "' in XSYM_FLAGS: empty flag name");
    out.emplace_back(std::string(key), std::string(trim(item.substr(eq + 1))));
  }
  return out;
}

/// @brief The type-erased part of a flag, so config_t can address flags by name.
class flag_base {
 public:
  flag_base(std::string_view name, std::string_view doc) : m_name(name), m_doc(doc) {}
  flag_base(const flag_base&) = delete;
  flag_base& operator=(const flag_base&) = delete;
  virtual ~flag_base() = default;

  /// @brief Full dotted name, e.g. "profiling.n_apply".
  std::string_view name() const noexcept { return m_name; }
  /// @brief One-line description.
  std::string_view doc() const noexcept { return m_doc; }
  /// @brief Layer the effective value comes from (loads XSYM_FLAGS and rc files first).
  virtual flag_source source() const = 0;
  /// @brief Source for display: "default", "XSYM_FLAGS", "rc file <path>" or "code".
  virtual std::string origin() const = 0;
  /// @brief Effective value as text, as get() and printing show it.
  virtual std::string text() const = 0;
  /// @brief Drops the value assigned in code.
  virtual void reset_code_value() noexcept = 0;

 private:
  friend struct ::xsym::config_t;
  // `where` names the origin in error messages ("XSYM_FLAGS", "rc file p:3", "code").
  virtual void set_text(std::string_view text, std::string_view where) = 0;
  virtual void load_text(std::string_view text, flag_source layer, std::string_view where,
                         std::string_view rc_path) const = 0;
  virtual void forget_loaded() const noexcept = 0;

 protected:
  std::string m_name;
  std::string m_doc;
};

template <class T>
inline constexpr bool is_flag_value = std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t> ||
                                      std::is_same_v<T, std::string>;

}  // namespace detail

/// @brief One configuration flag holding a bool, std::int64_t or std::string, with its value per source.
template <class T>
class flag final : public detail::flag_base {
  static_assert(detail::is_flag_value<T>, "flag<T>: T must be bool, std::int64_t or std::string");

 public:
  /// @brief Type of the value.
  using value_type = T;
  /// @brief Validator: returns "" for a valid value, otherwise why it is not ("expected ...").
  using check_type = std::function<std::string(const T&)>;

  /// @brief Made by config_t; `expected` describes valid values for error messages.
  // Out of line: config_t's constructor is two dozen calls, not two dozen flags built in place.
  [[gnu::noinline]] flag(const config_t& owner, std::string_view name, std::string_view doc, T default_value,
                         std::string expected, check_type check = {})
      : flag_base(name, doc),
        m_owner(&owner),
        m_default(std::move(default_value)),
        m_expected(std::move(expected)),
        m_check(std::move(check)) {}
  [[gnu::noinline]] ~flag() override = default;

  /// @brief Assigns in code: highest precedence. Throws config_error on an invalid value.
  flag& operator=(const T& v) {
    validate(v, "code");
    m_code = v;
    return *this;
  }
  /// @brief Assigns a string literal to a string flag.
  flag& operator=(const char* v)
    requires std::same_as<T, std::string>
  {
    return *this = std::string(v);
  }
  /// @brief Assigns a string view to a string flag.
  flag& operator=(std::string_view v)
    requires std::same_as<T, std::string>
  {
    return *this = std::string(v);
  }
  // A pointer would silently convert to bool: `config.profile = "False"` must not compile.
  template <class P>
    requires(!std::same_as<T, std::string> && std::is_pointer_v<P>)
  flag& operator=(P) = delete;

  /// @brief Effective value (loads XSYM_FLAGS and rc files on first use).
  operator T() const { return value(); }
  /// @brief Effective value (loads XSYM_FLAGS and rc files on first use).
  const T& value() const;
  /// @brief Built-in default value.
  const T& default_value() const noexcept { return m_default; }
  /// @brief What a valid value looks like, e.g. "one of cpu, cuda".
  std::string_view expected() const noexcept { return m_expected; }

  flag_source source() const override;
  std::string origin() const override;
  std::string text() const override { return detail::format_value(value()); }
  void reset_code_value() noexcept override { m_code.reset(); }

  /// @brief Compares a string flag's effective value, e.g. `config.mode == "DebugMode"`.
  friend bool operator==(const flag& f, std::string_view v)
    requires std::same_as<T, std::string>
  {
    return f.value() == v;
  }
  /// @brief Compares a bool or integer flag's effective value, e.g. `config.profiling.n_apply == 20`.
  // A template, so that `flag == 0` is an exact match and not ambiguous with the built-in
  // comparison reached through operator T().
  template <class U>
    requires(!std::same_as<T, std::string> && std::is_arithmetic_v<U>)
  friend bool operator==(const flag& f, const U& u) {
    return f.value() == u;
  }

  /// @brief Prints the effective value as text.
  friend std::ostream& operator<<(std::ostream& os, const flag& f) { return os << f.text(); }

 private:
  void validate(const T& v, std::string_view where) const {
    if (!m_check) return;
    if (auto why = m_check(v); !why.empty()) bad_value(detail::format_value(v), where, why);
  }

  [[noreturn]] void bad_value(std::string_view text, std::string_view where, std::string_view why) const {
    detail::fail("bad value '" + std::string(text) + "' for flag '" + m_name + "' (from " + std::string(where) +
                 "): " + std::string(why));
  }

  T parse(std::string_view text, std::string_view where) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (auto v = detail::parse_bool(text)) return *v;
      bad_value(text, where, "expected " + m_expected);
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      bool out_of_range = false;
      if (auto v = detail::parse_int(text, out_of_range)) {
        validate(*v, where);
        return *v;
      }
      bad_value(text, where,
                std::string(out_of_range ? "out of the 64-bit integer range; " : "not a decimal integer; ") +
                    "expected " + m_expected);
    } else {
      T v(text);
      validate(v, where);
      return v;
    }
  }

  void set_text(std::string_view text, std::string_view where) override { m_code = parse(text, where); }

  void load_text(std::string_view text, flag_source layer, std::string_view where,
                 std::string_view rc_path) const override {
    T v = parse(text, where);
    if (layer == flag_source::env) {
      m_env = std::move(v);
    } else {
      m_rc = std::move(v);
      m_rc_path = rc_path;
    }
  }

  void forget_loaded() const noexcept override {
    m_env.reset();
    m_rc.reset();
    m_rc_path.clear();
  }

  const config_t* m_owner;
  T m_default;
  std::string m_expected;
  check_type m_check;
  std::optional<T> m_code;
  // The env and rc layers are a cache of the environment, filled lazily by const reads.
  mutable std::optional<T> m_env;
  mutable std::optional<T> m_rc;
  mutable std::string m_rc_path;
};

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
                                                           "NanGuardMode"};
inline const std::vector<std::string_view> linker_choices = {"cvm", "cvm_nogc", "py"};
inline const std::vector<std::string_view> optimizer_choices = {"fast_run", "fast_compile", "merge", "None"};
inline const std::vector<std::string_view> device_choices = {"cpu", "cuda"};

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
    : cxxflags(owner, "gcc.cxxflags", "Flags cxx compiles fused kernels with (after -std=c++20 -fPIC -shared)",
               "-O3 -march=native", "compiler flags separated by spaces") {}

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
             detail::check_floatx) {
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
             &floatX};
}

XSYM_RUNTIME_INLINE std::vector<std::string_view> config_t::flag_names() const {
  std::vector<std::string_view> names;
  names.reserve(m_flags.size());
  for (const auto* f : m_flags) names.push_back(f->name());
  return names;
}

XSYM_RUNTIME_INLINE detail::flag_base& config_t::find(std::string_view name, std::string_view where) const {
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
