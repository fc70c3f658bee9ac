#ifndef XSYM_CONFIG_FLAG_HPP
#define XSYM_CONFIG_FLAG_HPP

// One run-time flag: its value from each source (code, XSYM_FLAGS, rc files, default), the
// parsing of values, rc files and XSYM_FLAGS text, and the error messages that name the flag
// and where its bad value came from. config.hpp lists xsym's flags.

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
  // Nor a number that would change on the way: `config.profiling.n_apply = 2.7` or `config.profile = 2`.
  template <class U>
    requires(std::is_arithmetic_v<U> && !std::same_as<U, T> &&
             ((std::same_as<T, bool> && !std::same_as<U, bool>) || (std::is_integral_v<T> && std::is_floating_point_v<U>)))
  flag& operator=(U) {
    static_assert(!sizeof(U),
                  "xsym::config: this flag takes a whole number (an integer flag) or true/false (a bool flag); "
                  "the value would be converted silently");
    return *this;
  }

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

}  // namespace xsym
XSYM_COLD_END

#endif  // XSYM_CONFIG_FLAG_HPP
