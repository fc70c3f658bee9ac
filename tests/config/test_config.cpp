#include <catch2/catch.hpp>

#include <xsym/config/config.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// Saves XSYM_FLAGS, XSYMRC and HOME, points HOME at an empty temp dir and
// resets the global config; restores all of it afterwards.
struct env_fixture {
  env_fixture() {
    static std::atomic<int> counter{0};
    dir = fs::temp_directory_path() /
          ("xsym_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir / "home");
    for (const char* name : {"XSYM_FLAGS", "XSYMRC", "HOME"}) {
      const char* v = std::getenv(name);
      saved.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
    ::unsetenv("XSYM_FLAGS");
    ::unsetenv("XSYMRC");
    ::setenv("HOME", (dir / "home").c_str(), 1);
    xsym::config.reset();
  }
  ~env_fixture() {
    for (const auto& [name, value] : saved) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
    xsym::config.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  env_fixture(const env_fixture&) = delete;
  env_fixture& operator=(const env_fixture&) = delete;

  std::string write(const std::string& relative, const std::string& text) const {
    const auto path = dir / relative;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string home_rc(const std::string& text) const { return write("home/.xsymrc", text); }
  static void flags(const char* text) { ::setenv("XSYM_FLAGS", text, 1); }
  static void rc(const std::string& paths) { ::setenv("XSYMRC", paths.c_str(), 1); }

  fs::path dir;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

// Message of the config_error thrown by f, or "" (and a failed check) if none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const xsym::config_error& e) {
    return e.what();
  }
  FAIL_CHECK("expected xsym::config_error");
  return {};
}

using pairs = std::vector<std::pair<std::string, std::string>>;

const std::vector<std::string> all_flags = {"mode",
                                            "linker",
                                            "optimizer",
                                            "optimizer_including",
                                            "optimizer_excluding",
                                            "optimizer_requiring",
                                            "allow_gc",
                                            "device",
                                            "profile",
                                            "profile_memory",
                                            "profile_optimizer",
                                            "profiling.n_apply",
                                            "profiling.n_ops",
                                            "profiling.min_memory_size",
                                            "profiling.destination",
                                            "profiling.ignore_first_call",
                                            "profiling.roofline",
                                            "DebugMode.check_isfinite",
                                            "openmp",
                                            "openmp_elemwise_minsize",
                                            "cxx",
                                            "gcc.cxxflags",
                                            "compiledir",
                                            "floatX",
                                            "compute_test_value"};

}  // namespace

// ---------------------------------------------------------------- parsers

TEST_CASE("parse_flags_string splits items, trims, skips empty items", "[config][parse]") {
  using xsym::detail::parse_flags_string;
  CHECK(parse_flags_string("a=b,c.d=e") == pairs{{"a", "b"}, {"c.d", "e"}});
  CHECK(parse_flags_string("  mode = DebugMode ,, profile=True,") == pairs{{"mode", "DebugMode"}, {"profile", "True"}});
  CHECK(parse_flags_string("optimizer_excluding=fusion:inplace") == pairs{{"optimizer_excluding", "fusion:inplace"}});
  CHECK(parse_flags_string("a=b=c") == pairs{{"a", "b=c"}});
  CHECK(parse_flags_string("optimizer_including=") == pairs{{"optimizer_including", ""}});
  CHECK(parse_flags_string("").empty());
  CHECK(parse_flags_string(" , ,").empty());
}

TEST_CASE("parse_flags_string rejects items without '=' or without a name", "[config][parse]") {
  using xsym::detail::parse_flags_string;
  auto msg = error_of([] { parse_flags_string("mode=FAST_RUN,profile"); });
  CHECK_THAT(msg, StartsWith("xsym config: "));
  CHECK_THAT(msg, Contains("malformed item 'profile'"));
  CHECK_THAT(msg, Contains("XSYM_FLAGS"));
  msg = error_of([] { parse_flags_string(" = 5"); });
  CHECK_THAT(msg, Contains("'= 5'"));
  CHECK_THAT(msg, Contains("empty flag name"));
}

TEST_CASE("parse_rc_text maps sections to dotted names", "[config][parse]") {
  const char* text =
      "# leading comment\n"
      "floatX = float32\n"  // before any section: global
      "\n"
      "[global]\n"
      "mode = FAST_RUN\n"
      "; another comment\n"
      "   profile=True   \r\n"
      "[profiling]\n"
      "n_apply = 5\n"
      "destination = /tmp/a b=c.txt\n"
      "[ DebugMode ]\n"
      "check_isfinite = False\n"
      "[global]\n"
      "profiling.n_ops = 3\n"
      "optimizer_excluding =\n";
  CHECK(xsym::detail::parse_rc_text(text, "f.rc") == pairs{{"floatX", "float32"},
                                                           {"mode", "FAST_RUN"},
                                                           {"profile", "True"},
                                                           {"profiling.n_apply", "5"},
                                                           {"profiling.destination", "/tmp/a b=c.txt"},
                                                           {"DebugMode.check_isfinite", "False"},
                                                           {"profiling.n_ops", "3"},
                                                           {"optimizer_excluding", ""}});
  CHECK(xsym::detail::parse_rc_text("", "f.rc").empty());
  CHECK(xsym::detail::parse_rc_text("\xEF\xBB\xBFmode=py", "f.rc") == pairs{{"mode", "py"}});
  CHECK(xsym::detail::parse_rc_text("# only\n\n; comments\n", "f.rc").empty());
}

TEST_CASE("parse_rc_text reports malformed lines with file, line number and text", "[config][parse]") {
  using xsym::detail::parse_rc_text;
  auto msg = error_of([] { parse_rc_text("[global]\nmode = FAST_RUN\n\nprofile True\n", "/etc/my.rc"); });
  CHECK_THAT(msg, StartsWith("xsym config: "));
  CHECK_THAT(msg, Contains("/etc/my.rc:4"));
  CHECK_THAT(msg, Contains("profile True"));
  CHECK_THAT(msg, Contains("malformed line"));

  msg = error_of([] { parse_rc_text("# c\n[profiling\nn_apply = 3\n", "x.rc"); });
  CHECK_THAT(msg, Contains("x.rc:2"));
  CHECK_THAT(msg, Contains("unterminated section header"));
  CHECK_THAT(msg, Contains("[profiling"));

  msg = error_of([] { parse_rc_text("[]\n", "x.rc"); });
  CHECK_THAT(msg, Contains("x.rc:1"));
  CHECK_THAT(msg, Contains("empty section name"));

  msg = error_of([] { parse_rc_text("[profiling] extra\n", "x.rc"); });
  CHECK_THAT(msg, Contains("x.rc:1"));
  CHECK_THAT(msg, Contains("after section header"));

  msg = error_of([] { parse_rc_text("\n\n = 5\n", "x.rc"); });
  CHECK_THAT(msg, Contains("x.rc:3"));
  CHECK_THAT(msg, Contains("empty flag name"));
}

TEST_CASE("did_you_mean finds typos, case differences and missing sections", "[config][parse]") {
  using xsym::detail::did_you_mean;
  const std::vector<std::string_view> names = {"profile", "profile_memory", "profiling.n_apply", "mode"};
  CHECK(did_you_mean("profle", names) == "did you mean 'profile'?");
  CHECK(did_you_mean("PROFILE", names) == "did you mean 'profile'?");
  CHECK(did_you_mean("n_apply", names) == "did you mean 'profiling.n_apply'?");
  CHECK(did_you_mean("Profiling.n_apply", names) == "did you mean 'profiling.n_apply'?");
  CHECK(did_you_mean("completely_unrelated", names).empty());
  CHECK(did_you_mean("n_op", {"n_ops", "n_opt", "mode"}) == "did you mean 'n_ops' or 'n_opt'?");
  CHECK(did_you_mean("x", {"a", "b", "c", "d"}) == "did you mean 'a', 'b' or 'c'?");
  CHECK(xsym::detail::edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("parse_int and parse_bool accept exactly the documented spellings", "[config][parse]") {
  using xsym::detail::parse_bool;
  using xsym::detail::parse_int;
  bool oor = true;
  CHECK(parse_int("42", oor) == 42);
  CHECK_FALSE(oor);
  CHECK(parse_int("+42", oor) == 42);
  CHECK(parse_int("-42", oor) == -42);
  CHECK(parse_int("-9223372036854775808", oor) == INT64_MIN);
  for (const char* bad : {"", "+", "-", "+-3", "++3", "-+3", "3 ", "1e3", "0x1F", "4.0"}) {
    INFO(bad);
    CHECK_FALSE(parse_int(bad, oor).has_value());
    CHECK_FALSE(oor);
  }
  CHECK_FALSE(parse_int("9223372036854775808", oor).has_value());
  CHECK(oor);
  CHECK(parse_bool("TrUe") == true);
  CHECK(parse_bool("No") == false);
  CHECK_FALSE(parse_bool("on").has_value());
  CHECK_FALSE(parse_bool("").has_value());
}

// ---------------------------------------------------------------- defaults, set/get

TEST_CASE_METHOD(env_fixture, "defaults come from the code when nothing is set", "[config]") {
  auto& c = xsym::config;
  CHECK(c.mode.value() == "FAST_RUN");
  CHECK(c.linker.value() == "cvm");
  CHECK(c.optimizer.value() == "fast_run");
  CHECK(c.optimizer_including.value().empty());
  CHECK(c.optimizer_excluding.value().empty());
  CHECK(c.optimizer_requiring.value().empty());
  CHECK(c.allow_gc.value() == true);
  CHECK(c.device.value() == "cpu");
  CHECK(c.profile.value() == false);
  CHECK(c.profile_memory.value() == false);
  CHECK(c.profile_optimizer.value() == false);
  CHECK(c.profiling.n_apply.value() == 20);
  CHECK(c.profiling.n_ops.value() == 20);
  CHECK(c.profiling.min_memory_size.value() == 1024);
  CHECK(c.profiling.destination.value() == "stderr");
  CHECK(c.profiling.ignore_first_call.value() == false);
  CHECK(c.profiling.roofline.value() == false);
  CHECK(c.DebugMode.check_isfinite.value() == true);
  CHECK(c.openmp.value() == false);
  CHECK(c.floatX.value() == (std::is_same_v<xsym::floatX, float> ? "float32" : "float64"));
  for (auto name : c.flag_names()) {
    INFO(name);
    CHECK(c.get(name).empty() == (name.starts_with("optimizer_") || name == "cxx"));
  }
  CHECK(c.mode.source() == xsym::flag_source::default_value);
  CHECK(c.profiling.n_apply.source() == xsym::flag_source::default_value);
}

TEST_CASE("flag_names lists every flag once, with dotted names", "[config]") {
  const auto names = xsym::config.flag_names();
  CHECK(std::vector<std::string>(names.begin(), names.end()) == all_flags);
  CHECK(std::set<std::string_view>(names.begin(), names.end()).size() == names.size());
  CHECK(xsym::config.profiling.n_apply.name() == "profiling.n_apply");
  CHECK(xsym::config.DebugMode.check_isfinite.name() == "DebugMode.check_isfinite");
  for (auto name : names) CHECK_FALSE(xsym::config.get(name).find('\n') != std::string::npos);
}

TEST_CASE("to_string names every flag source", "[config]") {
  CHECK(xsym::to_string(xsym::flag_source::default_value) == "default");
  CHECK(xsym::to_string(xsym::flag_source::rc_file) == "rc file");
  CHECK(xsym::to_string(xsym::flag_source::env) == "XSYM_FLAGS");
  CHECK(xsym::to_string(xsym::flag_source::code) == "code");
}

TEST_CASE_METHOD(env_fixture, "set and get address flags by name and parse like XSYM_FLAGS", "[config]") {
  auto& c = xsym::config;
  c.set("profiling.n_apply", " 7 ");
  CHECK(c.profiling.n_apply.value() == 7);
  CHECK(c.profiling.n_apply.source() == xsym::flag_source::code);
  CHECK(c.get("profiling.n_apply") == "7");
  c.set("profile", "yes");
  CHECK(c.profile.value() == true);
  CHECK(c.get("profile") == "True");
  CHECK(c.get("allow_gc") == "True");
  c.set("allow_gc", "0");
  CHECK(c.get("allow_gc") == "False");
  c.set("DebugMode.check_isfinite", "FALSE");
  CHECK_FALSE(c.DebugMode.check_isfinite);
  c.set("mode", "DebugMode");
  CHECK(c.get("mode") == "DebugMode");

  auto msg = error_of([&] { c.get("profiling.napply"); });
  CHECK_THAT(msg, Contains("unknown flag 'profiling.napply'"));
  CHECK_THAT(msg, Contains("did you mean 'profiling.n_apply'?"));
}

TEST_CASE_METHOD(env_fixture, "boolean values accept every spelling in any case", "[config]") {
  auto& c = xsym::config;
  for (const char* t : {"True", "true", "TRUE", "1", "yes", "YES", "Yes"}) {
    c.set("openmp", "False");
    c.set("openmp", t);
    CHECK(c.openmp.value() == true);
  }
  for (const char* f : {"False", "false", "0", "no", "NO"}) {
    c.set("openmp", "True");
    c.set("openmp", f);
    CHECK(c.openmp.value() == false);
  }
  auto msg = error_of([&] { c.set("openmp", "maybe"); });
  CHECK_THAT(msg, StartsWith("xsym config: bad value 'maybe' for flag 'openmp' (from code)"));
  CHECK_THAT(msg, Contains("boolean"));
  CHECK_THAT(msg, Contains("True/False"));
  CHECK(c.openmp.value() == false);  // unchanged by the failed set
  CHECK_THROWS_AS(c.set("openmp", ""), xsym::config_error);
  CHECK_THROWS_AS(c.set("openmp", "2"), xsym::config_error);
}

TEST_CASE_METHOD(env_fixture, "integer values: sign, range and non-negativity", "[config]") {
  auto& c = xsym::config;
  c.set("profiling.n_ops", "+7");
  CHECK(c.profiling.n_ops.value() == 7);
  c.set("profiling.min_memory_size", "0");
  CHECK(c.profiling.min_memory_size.value() == 0);
  c.set("profiling.min_memory_size", "9223372036854775807");
  CHECK(c.profiling.min_memory_size.value() == INT64_MAX);

  auto msg = error_of([&] { c.set("profiling.n_apply", "-1"); });
  CHECK_THAT(msg, Contains("bad value '-1' for flag 'profiling.n_apply'"));
  CHECK_THAT(msg, Contains(">= 0"));
  msg = error_of([&] { c.set("profiling.n_ops", "12x"); });
  CHECK_THAT(msg, Contains("'12x'"));
  CHECK_THAT(msg, Contains("not a decimal integer"));
  msg = error_of([&] { c.set("profiling.n_ops", "99999999999999999999"); });
  CHECK_THAT(msg, Contains("64-bit"));
  for (const char* bad : {"", "+", "-", "+-3", "1.5", "0x10", " 1 2"})
    CHECK_THROWS_AS(c.set("profiling.n_ops", bad), xsym::config_error);
  CHECK(c.profiling.n_ops.value() == 7);

  msg = error_of([&] { c.profiling.n_apply = -5; });
  CHECK_THAT(msg, Contains("bad value '-5' for flag 'profiling.n_apply' (from code)"));
}

TEST_CASE_METHOD(env_fixture, "enumerated strings must be one of their choices", "[config]") {
  auto& c = xsym::config;
  for (const char* m : {"FAST_RUN", "FAST_COMPILE", "DebugMode", "MonitorMode", "NanGuardMode"}) {
    c.set("mode", m);
    CHECK(c.mode.value() == m);
  }
  auto msg = error_of([&] { c.set("mode", "FAST"); });
  CHECK_THAT(msg, Contains("bad value 'FAST' for flag 'mode'"));
  CHECK_THAT(msg, Contains("one of FAST_RUN, FAST_COMPILE, DebugMode, MonitorMode, NanGuardMode"));
  msg = error_of([&] { c.mode = "debugmode"; });
  CHECK_THAT(msg, Contains("did you mean 'DebugMode'?"));
  msg = error_of([&] { c.set("linker", "c|pyy"); });
  CHECK_THAT(msg, Contains("one of cvm, cvm_nogc, py"));
  msg = error_of([&] { c.set("optimizer", "fast"); });
  CHECK_THAT(msg, Contains("one of fast_run, fast_compile, merge, None"));
  msg = error_of([&] { c.set("device", "gpu"); });
  CHECK_THAT(msg, Contains("flag 'device'"));
  CHECK_THAT(msg, Contains("one of cpu, cuda"));
  c.set("optimizer", "None");
  c.set("linker", "cvm_nogc");
  c.set("device", "cuda");
  CHECK(c.get("optimizer") == "None");
  CHECK(c.get("linker") == "cvm_nogc");
  CHECK(c.get("device") == "cuda");
  CHECK(c.mode.value() == "NanGuardMode");  // failed assignments changed nothing
}

TEST_CASE_METHOD(env_fixture, "rewrite lists and profiling destination are validated", "[config]") {
  auto& c = xsym::config;
  c.optimizer_excluding = "fusion:inplace";
  CHECK(c.optimizer_excluding.value() == "fusion:inplace");
  c.set("optimizer_including", "");
  CHECK(c.optimizer_including.value().empty());
  auto msg = error_of([&] { c.set("optimizer_excluding", "fusion::inplace"); });
  CHECK_THAT(msg, Contains("flag 'optimizer_excluding'"));
  CHECK_THAT(msg, Contains("empty name"));
  CHECK_THROWS_AS(c.set("optimizer_requiring", "fusion:"), xsym::config_error);
  CHECK_THROWS_AS(c.set("optimizer_requiring", "a b"), xsym::config_error);

  for (const char* d : {"stdout", "stderr", "/tmp/profile.txt"}) {
    c.set("profiling.destination", d);
    CHECK(c.profiling.destination.value() == d);
  }
  msg = error_of([&] { c.profiling.destination = ""; });
  CHECK_THAT(msg, Contains("flag 'profiling.destination'"));
  CHECK_THAT(msg, Contains("stdout, stderr or a file path"));
}

TEST_CASE_METHOD(env_fixture, "gcc.cxxflags refuses flags that change the kernels' answers", "[config]") {
  auto& c = xsym::config;
  for (const char* ok : {"-O2", "-O3 -march=native", "  -O1\t-g  ", "-fno-fast-math", "-ffp-contract=off", ""}) {
    c.gcc.cxxflags = ok;
    CHECK(c.gcc.cxxflags.value() == ok);
  }
  c.gcc.cxxflags = "-O2";
  for (const char* bad : {"-ffast-math", "-O3 -Ofast", "-O2 -ffinite-math-only -g", "-fassociative-math",
                          "-freciprocal-math", "-fno-signed-zeros", "-funsafe-math-optimizations", "-mfpmath=387"}) {
    auto msg = error_of([&] { c.gcc.cxxflags = bad; });
    CHECK_THAT(msg, Contains("flag 'gcc.cxxflags'") && Contains(std::string("bad value '") + bad + "'") &&
                        Contains("answer differently"));
    CHECK(c.gcc.cxxflags.value() == "-O2");  // the refused value leaves the flag as it was
  }
  flags("gcc.cxxflags=-O3 -ffast-math");
  auto msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("(from XSYM_FLAGS)") && Contains("-ffast-math would let"));
}

TEST_CASE_METHOD(env_fixture, "assignment in code: literals, comparisons, printing", "[config]") {
  auto& c = xsym::config;
  static_assert(std::is_assignable_v<xsym::flag<std::string>&, const char*>);
  static_assert(std::is_assignable_v<xsym::flag<std::string>&, std::string_view>);
  static_assert(!std::is_assignable_v<xsym::flag<bool>&, const char*>, "a pointer must not become a bool");
  static_assert(!std::is_assignable_v<xsym::flag<std::int64_t>&, const char*>);
  static_assert(!std::is_copy_assignable_v<xsym::flag<bool>>);

  c.profile = true;
  c.profiling.n_apply = 0;
  c.mode = "DebugMode";
  c.linker = std::string("py");
  CHECK(c.profile == true);
  CHECK(c.profiling.n_apply == 0);
  CHECK(c.mode == "DebugMode");
  CHECK("DebugMode" == c.mode);
  CHECK(c.mode != "FAST_RUN");
  CHECK(c.linker == std::string("py"));
  bool profile = c.profile;
  std::int64_t n = c.profiling.n_apply;
  std::string mode = c.mode;
  CHECK(profile);
  CHECK(n == 0);
  CHECK(mode == "DebugMode");
  std::ostringstream os;
  os << c.mode << ' ' << c.profile << ' ' << c.profiling.n_ops;
  CHECK(os.str() == "DebugMode True 20");
  CHECK(c.profile.doc().size() > 10);
  CHECK(c.profile.doc().find('\n') == std::string_view::npos);

  c.profile.reset_code_value();
  CHECK(c.profile.value() == false);
  CHECK(c.profile.source() == xsym::flag_source::default_value);
}

// ---------------------------------------------------------------- precedence, loading

TEST_CASE_METHOD(env_fixture, "precedence: code > XSYM_FLAGS > rc file > default", "[config]") {
  auto& c = xsym::config;
  const auto path = write("a.rc",
                          "[global]\nmode = FAST_COMPILE\nlinker = py\n"
                          "[profiling]\nn_apply = 5\nn_ops = 6\n");
  rc(path);
  flags("mode=DebugMode,profiling.n_ops=7");
  c.reload();

  CHECK(c.mode.value() == "DebugMode");
  CHECK(c.mode.source() == xsym::flag_source::env);
  CHECK(c.linker.value() == "py");
  CHECK(c.linker.source() == xsym::flag_source::rc_file);
  CHECK(c.linker.origin() == "rc file " + path);
  CHECK(c.profiling.n_apply.value() == 5);
  CHECK(c.profiling.n_apply.source() == xsym::flag_source::rc_file);
  CHECK(c.profiling.n_ops.value() == 7);
  CHECK(c.profiling.n_ops.source() == xsym::flag_source::env);
  CHECK(c.optimizer.value() == "fast_run");
  CHECK(c.optimizer.source() == xsym::flag_source::default_value);

  c.mode = "MonitorMode";
  c.profiling.n_apply = 9;
  CHECK(c.mode.value() == "MonitorMode");
  CHECK(c.mode.source() == xsym::flag_source::code);
  CHECK(c.profiling.n_apply.value() == 9);

  // reload() re-reads the environment but keeps code assignments.
  flags("mode=FAST_RUN,linker=cvm_nogc");
  c.reload();
  CHECK(c.mode.value() == "MonitorMode");
  CHECK(c.linker.value() == "cvm_nogc");
  CHECK(c.profiling.n_ops.value() == 6);  // env no longer sets it: back to the rc file

  c.mode.reset_code_value();
  CHECK(c.mode.value() == "FAST_RUN");
  CHECK(c.mode.source() == xsym::flag_source::env);

  // reset() drops code assignments as well.
  c.reset();
  CHECK(c.profiling.n_apply.value() == 5);
  CHECK(c.profiling.n_apply.source() == xsym::flag_source::rc_file);
}

TEST_CASE_METHOD(env_fixture, "loading is lazy and code assigned before loading still wins", "[config]") {
  auto& c = xsym::config;
  CHECK_FALSE(c.is_loaded());
  c.profile = true;  // before anything is read
  c.set("profiling.n_apply", "3");
  CHECK_FALSE(c.is_loaded());
  // Set after reset() and before the first read: only a lazy load sees it.
  flags("profile=False,profiling.n_apply=4,openmp=True");
  CHECK(c.openmp.value() == true);
  CHECK(c.is_loaded());
  CHECK(c.profile.value() == true);
  CHECK(c.profile.source() == xsym::flag_source::code);
  CHECK(c.profiling.n_apply.value() == 3);
  // Once loaded, the environment is not re-read on each access.
  flags("openmp=False");
  CHECK(c.openmp.value() == true);
  c.reload();
  CHECK(c.openmp.value() == false);
}

TEST_CASE_METHOD(env_fixture, "~/.xsymrc is read when XSYMRC is unset; its absence is fine", "[config]") {
  auto& c = xsym::config;
  CHECK(c.profile.value() == false);  // no ~/.xsymrc at all: defaults, no error
  const auto path = home_rc("[global]\nprofile = True\n[DebugMode]\ncheck_isfinite = False\n");
  c.reload();
  CHECK(c.profile.value() == true);
  CHECK(c.profile.origin() == "rc file " + path);
  CHECK(c.DebugMode.check_isfinite.value() == false);

  // XSYMRC replaces ~/.xsymrc rather than adding to it.
  rc(write("other.rc", "openmp = True\n"));
  c.reload();
  CHECK(c.openmp.value() == true);
  CHECK(c.profile.value() == false);

  // XSYMRC="" reads no rc file at all.
  rc("");
  c.reload();
  CHECK(c.openmp.value() == false);
  CHECK(c.profile.value() == false);

  // "~/" in XSYMRC is $HOME.
  rc("~/.xsymrc");
  c.reload();
  CHECK(c.profile.value() == true);
}

TEST_CASE_METHOD(env_fixture, "XSYMRC lists several files; later files override earlier ones", "[config]") {
  auto& c = xsym::config;
  const auto a = write("a.rc", "[profiling]\nn_apply = 1\nn_ops = 1\n");
  const auto b = write("b.rc", "[profiling]\nn_apply = 2\n");
  rc(a + ":" + b);
  c.reload();
  CHECK(c.profiling.n_apply.value() == 2);
  CHECK(c.profiling.n_apply.origin() == "rc file " + b);
  CHECK(c.profiling.n_ops.value() == 1);
  CHECK(c.profiling.n_ops.origin() == "rc file " + a);

  rc(b + ":" + a);
  c.reload();
  CHECK(c.profiling.n_apply.value() == 1);
}

TEST_CASE_METHOD(env_fixture, "a file named in XSYMRC must exist and be a file", "[config]") {
  auto& c = xsym::config;
  const auto good = write("good.rc", "profile = True\n");
  const auto missing = (dir / "missing.rc").string();
  rc(good + ":" + missing);
  auto msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, StartsWith("xsym config: "));
  CHECK_THAT(msg, Contains(missing));
  CHECK_THAT(msg, Contains("does not exist"));

  rc(dir.string());
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains(dir.string()));
  CHECK_THAT(msg, Contains("directory"));
}

// ---------------------------------------------------------------- errors while loading

TEST_CASE_METHOD(env_fixture, "unknown flags are reported with their origin and a suggestion", "[config]") {
  auto& c = xsym::config;
  flags("mode=FAST_RUN,profle=True");
  auto msg = error_of([&] { c.ensure_loaded(); });
  CHECK_THAT(msg, StartsWith("xsym config: unknown flag 'profle' (from XSYM_FLAGS)"));
  CHECK_THAT(msg, Contains("did you mean 'profile'?"));

  flags("Profile=True");
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("unknown flag 'Profile'"));
  CHECK_THAT(msg, Contains("did you mean 'profile'?"));

  flags("n_apply=3");
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("did you mean 'profiling.n_apply'?"));

  flags("zzzzzzzzzz=1");
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("unknown flag 'zzzzzzzzzz'"));
  CHECK_THAT(msg, Contains("valid flags are:"));
  CHECK_THAT(msg, Contains("profiling.min_memory_size"));

  ::unsetenv("XSYM_FLAGS");
  const auto path = write("bad.rc", "[global]\nmode = FAST_RUN\n\n[Profiling]\nn_apply = 3\n");
  rc(path);
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("unknown flag 'Profiling.n_apply'"));
  CHECK_THAT(msg, Contains("rc file " + path + ":5"));
  CHECK_THAT(msg, Contains("did you mean 'profiling.n_apply'?"));

  msg = error_of([&] { c.set("optimizer_exclude", "fusion"); });
  CHECK_THAT(msg, StartsWith("xsym config: unknown flag 'optimizer_exclude' (from code)"));
  CHECK_THAT(msg, Contains("did you mean 'optimizer_excluding'?"));
}

TEST_CASE_METHOD(env_fixture, "bad values name the flag, the value, the origin and what was expected", "[config]") {
  auto& c = xsym::config;
  flags("profile=maybe");
  auto msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, StartsWith("xsym config: bad value 'maybe' for flag 'profile' (from XSYM_FLAGS)"));
  CHECK_THAT(msg, Contains("boolean"));

  ::unsetenv("XSYM_FLAGS");
  const auto path = write("v.rc", "[global]\nmode = FAST_RUN\n[profiling]\nn_ops = -3\n");
  rc(path);
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("bad value '-3' for flag 'profiling.n_ops'"));
  CHECK_THAT(msg, Contains("rc file " + path + ":4"));
  CHECK_THAT(msg, Contains(">= 0"));

  // A bad rc value is an error even when XSYM_FLAGS overrides it: nothing is silently ignored.
  flags("profiling.n_ops=3");
  CHECK_THROWS_AS(c.reload(), xsym::config_error);
}

TEST_CASE_METHOD(env_fixture, "malformed XSYM_FLAGS and rc lines are errors when loading", "[config]") {
  auto& c = xsym::config;
  flags("profile=True,openmp");
  auto msg = error_of([&] { (void)c.profile.value(); });
  CHECK_THAT(msg, Contains("malformed item 'openmp' in XSYM_FLAGS"));

  ::unsetenv("XSYM_FLAGS");
  const auto path = home_rc("[global]\nprofile = True\nopenmp\n");
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains(path + ":3"));
  CHECK_THAT(msg, Contains("openmp"));
}

TEST_CASE_METHOD(env_fixture, "a load error leaves the config usable and a fixed reload works", "[config]") {
  auto& c = xsym::config;
  const auto path = write("r.rc", "[profiling]\nn_apply = 5\n");
  rc(path);
  c.mode = "DebugMode";
  flags("openmp=True,profile=bogus");
  // Lazy: the error comes from the first read, and again from every read until fixed.
  CHECK_THROWS_AS(c.openmp.value(), xsym::config_error);
  CHECK_THROWS_AS(static_cast<bool>(c.profile), xsym::config_error);
  CHECK_THROWS_AS(c.get("mode"), xsym::config_error);
  CHECK_FALSE(c.is_loaded());
  // Assigning in code still works while the environment is broken.
  c.profiling.n_ops = 4;

  flags("openmp=True");
  c.reload();
  CHECK(c.is_loaded());
  CHECK(c.openmp.value() == true);
  CHECK(c.profile.value() == false);
  CHECK(c.profiling.n_apply.value() == 5);
  CHECK(c.profiling.n_ops.value() == 4);
  CHECK(c.mode.value() == "DebugMode");

  // After a failed reload no stale or half-applied value is served: reads report the error.
  flags("openmp=False,profiling.n_apply=x");
  CHECK_THROWS_AS(c.reload(), xsym::config_error);
  CHECK_FALSE(c.is_loaded());
  CHECK_THROWS_AS(c.openmp.value(), xsym::config_error);
  CHECK_THROWS_AS(c.profiling.n_apply.source(), xsym::config_error);
  CHECK(c.mode.default_value() == "FAST_RUN");  // reading the default never loads
  flags("");
  c.reload();
  CHECK(c.openmp.value() == false);
  CHECK(c.profiling.n_apply.value() == 5);
}

// ---------------------------------------------------------------- floatX

TEST_CASE_METHOD(env_fixture, "floatX mirrors the compile-time XSYM_FLOATX and cannot be changed", "[config]") {
  auto& c = xsym::config;
  static_assert(std::is_same_v<xsym::floatX, float> || std::is_same_v<xsym::floatX, double>);
  const std::string compiled = std::is_same_v<xsym::floatX, float> ? "float32" : "float64";
  const std::string other = std::is_same_v<xsym::floatX, float> ? "float64" : "float32";
  CHECK(c.floatX.value() == compiled);

  c.floatX = compiled;  // the compiled value is accepted
  CHECK(c.floatX.source() == xsym::flag_source::code);

  auto msg = error_of([&] { c.floatX = other; });
  CHECK_THAT(msg, StartsWith("xsym config: bad value '" + other + "' for flag 'floatX' (from code)"));
  CHECK_THAT(msg, Contains("compile time"));
  CHECK_THAT(msg, Contains("-DXSYM_FLOATX="));

  flags(("floatX=" + other).c_str());
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("flag 'floatX' (from XSYM_FLAGS)"));
  CHECK_THAT(msg, Contains("-DXSYM_FLOATX="));

  ::unsetenv("XSYM_FLAGS");
  const auto path = home_rc("floatX = " + other + "\n");
  msg = error_of([&] { c.reload(); });
  CHECK_THAT(msg, Contains("rc file " + path + ":1"));
  CHECK_THAT(msg, Contains("-DXSYM_FLOATX="));

  CHECK_THROWS_AS(c.set("floatX", "float16"), xsym::config_error);
}

// ---------------------------------------------------------------- printing

TEST_CASE_METHOD(env_fixture, "printing the config lists every flag with its value, source and doc", "[config]") {
  auto& c = xsym::config;
  const auto path = write("p.rc", "[profiling]\nn_apply = 5\n");
  rc(path);
  flags("mode=DebugMode");
  c.profile = true;

  std::ostringstream os;
  os << c;
  const std::string out = os.str();
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  const auto line_of = [&](const std::string& name) -> std::string {
    const auto it = std::find_if(lines.begin(), lines.end(),
                                 [&](const std::string& l) { return l.rfind(name + " ", 0) == 0; });
    return it == lines.end() ? std::string() : *it;
  };
  // A title, a header, then one line per flag.
  CHECK(lines.size() == all_flags.size() + 2);
  for (const auto& name : all_flags) {
    INFO(name);
    const auto line = line_of(name);
    REQUIRE_FALSE(line.empty());
    const auto starts_with_name = [&](const std::string& l) { return l.rfind(name + " ", 0) == 0; };
    CHECK(std::count_if(lines.begin(), lines.end(), starts_with_name) == 1);
  }
  CHECK_THAT(line_of("mode"), Contains("DebugMode") && Contains("XSYM_FLAGS") && Contains("compilation mode"));
  CHECK_THAT(line_of("profile"), Contains("True") && Contains("code"));
  CHECK_THAT(line_of("profiling.n_apply"), Contains(" 5 ") && Contains("rc file " + path));
  CHECK_THAT(line_of("linker"), Contains("cvm") && Contains("default"));
  for (auto name : c.flag_names()) {
    INFO(name);
    const auto value = c.get(name);
    CHECK(line_of(std::string(name)).find(value.empty() ? "\"\"" : value) != std::string::npos);
  }
  CHECK_THAT(line_of("profiling.roofline"), Contains(std::string(c.profiling.roofline.doc())));
  CHECK_THAT(line_of("DebugMode.check_isfinite"), Contains(std::string(c.DebugMode.check_isfinite.doc())));
}
