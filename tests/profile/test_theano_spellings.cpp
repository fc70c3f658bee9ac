// Theano's spellings that old programs, rc files and flag strings use: mode=ProfileMode, its
// ProfileMode.* flags and print_summary(n_apply, n_ops), the c|py linkers; and the memory
// profile's and the Apply section's lines as PyTensor prints them.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <xsym/xsym.hpp>

namespace {
namespace fs = std::filesystem;

// XSYM_FLAGS and XSYMRC saved and cleared, the config reset; all restored afterwards.
struct flags_fixture {
  flags_fixture() {
    static std::atomic<int> counter{0};
    dir = fs::temp_directory_path() / ("xsym_spellings_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
    for (const char* name : {"XSYM_FLAGS", "XSYMRC"}) {
      const char* v = std::getenv(name);
      saved.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
    ::unsetenv("XSYM_FLAGS");
    ::setenv("XSYMRC", "", 1);
    xsym::config.reset();
  }
  ~flags_fixture() {
    for (const auto& [name, value] : saved) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
    xsym::config.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  void rc(const std::string& text) {
    const auto path = dir / "xsymrc";
    std::ofstream(path) << text;
    ::setenv("XSYMRC", path.c_str(), 1);
    xsym::config.reset();
  }
  static void flags(const char* text) {
    ::setenv("XSYM_FLAGS", text, 1);
    xsym::config.reset();
  }
  fs::path dir;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

auto seeds_function(const std::string& name) {
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  return xsym::function(name, xsym::inputs(x, y, z), (x + y + z) * 2);
}

template <class F>
void call(F& f) {
  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  const auto r = f(a, b, c);
  REQUIRE(r(0) == 12.0);
}

// The text print_summary(n_apply, n_ops) writes to stdout.
std::string captured_summary(const xsym::profile_stats& s, std::int64_t n_apply, std::int64_t n_ops) {
  std::ostringstream out;
  auto* old = std::cout.rdbuf(out.rdbuf());
  s.print_summary(n_apply, n_ops);
  std::cout.rdbuf(old);
  return out.str();
}
}  // namespace

TEST_CASE("mode=ProfileMode is FAST_RUN with profiling on, from code, XSYM_FLAGS and an rc file", "[profile][theano]") {
  flags_fixture fx;
  SECTION("code") { xsym::config.mode = "ProfileMode"; }
  SECTION("XSYM_FLAGS") { fx.flags("mode=ProfileMode"); }
  SECTION("rc file") { fx.rc("[global]\nmode = ProfileMode\n"); }
  auto f = seeds_function("profile_mode");
  call(f);
  CHECK(f.runtime()->plan().mode == "ProfileMode");
  CHECK(f.toposort().size() == 1);  // fused, as FAST_RUN
  REQUIRE_NOTHROW(f.profile());
  CHECK(f.profile().functions().front()->calls == 1);
}

TEST_CASE("the function option mode(\"ProfileMode\") profiles one function", "[profile][theano]") {
  flags_fixture fx;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("one", xsym::inputs(x), x * 2, xsym::mode("ProfileMode"));
  auto g = xsym::function("other", xsym::inputs(x), x * 2);
  CHECK_NOTHROW(f.profile());
  CHECK_THROWS(g.profile());
}

TEST_CASE("ProfileMode.n_apply_to_print and n_ops_to_print are profiling.n_apply and n_ops", "[profile][theano]") {
  flags_fixture fx;
  SECTION("code") {
    xsym::config.set("ProfileMode.n_apply_to_print", "3");
    xsym::config.set("ProfileMode.n_ops_to_print", "4");
  }
  SECTION("XSYM_FLAGS") { fx.flags("ProfileMode.n_apply_to_print=3,ProfileMode.n_ops_to_print=4"); }
  SECTION("rc file") { fx.rc("[ProfileMode]\nn_apply_to_print = 3\nn_ops_to_print = 4\n"); }
  CHECK(xsym::config.profiling.n_apply.value() == 3);
  CHECK(xsym::config.profiling.n_ops.value() == 4);
  CHECK(xsym::config.get("ProfileMode.n_apply_to_print") == "3");
}

TEST_CASE("print_summary(n_apply_to_print, n_ops_to_print) cuts the report there", "[profile][theano]") {
  flags_fixture fx;
  auto stats = std::make_shared<xsym::profile_stats>("counts", false);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto f = xsym::function("unfused", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  call(f);
  const std::string one = captured_summary(*stats, 1, 1);
  CHECK_THAT(one, Catch::Contains("remaining 2 Apply instances") && Catch::Contains("remaining 1 Ops"));
  const std::string all = captured_summary(*stats, 10, 10);
  CHECK_THAT(all, Catch::Contains("remaining 0 Apply instances") && Catch::Contains("remaining 0 Ops"));
  std::ostringstream out;
  auto* old = std::cout.rdbuf(out.rdbuf());
  stats->summary();
  std::cout.rdbuf(old);
  CHECK_THAT(out.str(), Catch::StartsWith("Function profiling"));
}

TEST_CASE("linker=c|py, c|py_nogc and c are accepted with Theano's meanings", "[theano]") {
  flags_fixture fx;
  struct spelling {
    const char* linker;
    bool gc;
  };
  for (const spelling s : {spelling{"c|py", true}, spelling{"c|py_nogc", false}, spelling{"c", true}}) {
    INFO("linker " << s.linker);
    for (int source = 0; source < 4; ++source) {
      xsym::config.reset();
      ::unsetenv("XSYM_FLAGS");
      ::setenv("XSYMRC", "", 1);
      if (source == 0) xsym::config.linker = s.linker;
      if (source == 1) fx.flags((std::string("linker=") + s.linker).c_str());
      if (source == 2) fx.rc(std::string("[global]\nlinker = ") + s.linker + "\n");
      auto x = xsym::vector<double>("x");
      auto f = source == 3 ? xsym::function("f", xsym::inputs(x), xsym::exp(x) * 2, xsym::linker(s.linker))
                           : xsym::function("f", xsym::inputs(x), xsym::exp(x) * 2);
      CHECK(f.runtime()->plan().linker == (s.gc ? "cvm" : "cvm_nogc"));
      CHECK(f.runtime()->plan().gc == s.gc);
      CHECK_FALSE(f.runtime()->plan().reference_kernels);
      const xt::xtensor<double, 1> a{0.5, -1};
      const auto r = f(a);
      CHECK(r(0) == Approx(2 * std::exp(0.5)));
    }
  }
  xsym::config.reset();
  CHECK_THROWS_WITH((xsym::config.linker = "c|pyy"), Catch::Contains("c|pyy") && Catch::Contains("c|py_nogc"));
}

TEST_CASE("the memory profile rounds to the nearest KB and says when every output is small", "[profile][theano]") {
  flags_fixture fx;
  xsym::config.profile_memory = true;
  auto stats = std::make_shared<xsym::profile_stats>("memory", false);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto f = xsym::function("small", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(stats),
                          xsym::optimizer_excluding("fusion:inplace"));
  call(f);  // three outputs of 8 bytes: 24 bytes at most alive, 0KB as PyTensor prints it
  std::ostringstream os;
  stats->print_summary(os);
  const std::string r = os.str();
  CHECK_THAT(r, Catch::Contains("CPU: 0KB") && !Catch::Contains("CPU: 1KB"));
  CHECK_THAT(r, Catch::Contains("    All Apply nodes have output sizes that take less than 1024B.\n"
                                "    <created/inplace/view> is taken from the Op's declaration."));
  // With outputs above the threshold, the line is not there.
  auto big = std::make_shared<xsym::profile_stats>("big", false);
  auto g = xsym::function("big", xsym::inputs(x), x * 2, xsym::profile(big));
  g(xt::xtensor<double, 1>(xt::ones<double>({1000})));
  std::ostringstream os2;
  big->print_summary(os2);
  CHECK_THAT(os2.str(), !Catch::Contains("All Apply nodes have output sizes") && Catch::Contains("CPU: 8KB"));
}

TEST_CASE("a scope's user regions are Apply rows, so the Apply percentages sum to 100%", "[profile][theano]") {
  flags_fixture fx;
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), xsym::exp(x) * 2);
  const xt::xtensor<double, 1> a = xt::ones<double>({64});
  xsym::profile_scope scope("regions", false);
  for (int i = 0; i < 3; ++i) {
    XSYM_PROFILE_SCOPE("user work");
    f(a);
    volatile double sink = 0;
    for (int k = 0; k < 20000; ++k) sink = sink + k;
  }
  std::ostringstream os;
  scope.stats().print_summary(os);
  const std::string r = os.str();
  const auto apply = r.find("\nApply\n------\n");
  REQUIRE(apply != std::string::npos);
  const auto rest = r.find("   ... (remaining", apply);
  const std::string section = r.substr(apply, rest - apply);
  CHECK_THAT(section, Catch::Contains("     -") && Catch::Contains("user work"));
  // The last row's <sum %> is the whole.
  std::istringstream lines(section);
  std::string line;
  double last_sum = -1;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string share, sum;
    if (cells >> share >> sum && share.back() == '%' && sum.back() == '%') {
      last_sum = std::stod(sum.substr(0, sum.size() - 1));
      ++rows;
    }
  }
  CHECK(rows == 2);  // the Composite and the region
  CHECK(last_sum == Approx(100.0).margin(0.051));
}

TEST_CASE("print_diff_summary matches a fused function's Composite with an unfused one's nodes", "[profile][theano]") {
  flags_fixture fx;
  auto fused_stats = std::make_shared<xsym::profile_stats>("fused", false);
  auto unfused_stats = std::make_shared<xsym::profile_stats>("unfused", false);
  auto x = xsym::vector<double>("x"), y = xsym::vector<double>("y"), z = xsym::vector<double>("z");
  auto fused = xsym::function("fast", xsym::inputs(x, y, z), (x + y + z) * 2, xsym::profile(fused_stats));
  auto unfused = xsym::function("slow", xsym::inputs(x, y, z), (x + y + z) * 2 + x, xsym::profile(unfused_stats),
                                xsym::optimizer_excluding("fusion:inplace"));
  const xt::xtensor<double, 1> a{1}, b{2}, c{3};
  for (int i = 0; i < 3; ++i) {
    fused(a, b, c);
    unfused(a, b, c);
  }
  std::ostringstream os;
  fused_stats->print_diff_summary(os, *unfused_stats);
  const std::string d = os.str();
  // The Composite absorbed two adds and a mul: B's three nodes of those ops are its counterpart.
  CHECK_THAT(d, Catch::Contains("Elemwise{Composite{((i0 + i1 + i2) * i3)}}(x, y, z, TensorConstant{(1,) of 2.0})  ~  "
                                "B: Elemwise{add} x2, Elemwise{mul}"));
  // B's last add has none.
  CHECK(std::count(d.begin(), d.end(), '\n') > 0);
  CHECK_THAT(d, Catch::Contains("(no counterpart in A)") && !Catch::Contains("(no counterpart in B)"));
  CHECK_THAT(d, Catch::Contains("Elemwise{add,no_inplace}(Elemwise{mul,no_inplace}.0, x)  (no counterpart in A)"));
  // Counts cut the tables.
  std::ostringstream cut;
  fused_stats->print_diff_summary(cut, *unfused_stats, 1, 1);
  CHECK_THAT(cut.str(), Catch::Contains("   ... (remaining 1 rows)") && Catch::Contains("   ... (remaining 2 rows)"));
}
