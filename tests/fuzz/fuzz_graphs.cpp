// libFuzzer target for building and running graphs: the input's bytes are the choices of a random
// graph (tests/compile/random_graph.hpp, the generator of the compile area's differential test),
// which is built, run under the default options and one other option set (the first byte picks
// it), and compared with the reference interpreter by mask: so the two option sets are held to
// the same values. A mismatch, an exception other than an expected shape_error, a crash or a
// sanitizer report is a bug; the graph's dump is printed first, to replay with
// XSYM_GRAPH_DUMP='<dump>' build/tests/test_compile "[random_graphs]".
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "compile/random_graph.hpp"

namespace rg = xsym_test::rg;

// The built-in flag defaults whatever the environment says: the option sets are the input's.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::unsetenv("XSYM_FLAGS");
  ::setenv("XSYMRC", "", 1);  // an empty list: read no rc file
  xsym::config.reset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const std::vector<rg::option_set> all = rg::all_option_sets();
  const std::vector<rg::option_set> sets{all[0], all[1 + data[0] % (all.size() - 1)]};
  rg::byte_chooser ch(data + 1, size - 1);
  const rg::graph g = rg::make_graph(ch);
  // To see the graph of an input that crashes or trips a sanitizer before it can be compared.
  static const bool print = std::getenv("XSYM_GRAPH_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "XSYM_GRAPH_DUMP='%s'\n", rg::dump(g).c_str());
  const rg::run_report rep = rg::run_graph(g, sets, 1);
  if (!rep.failures.empty()) {
    std::fprintf(stderr, "fuzz_graphs: the library and the reference differ\nXSYM_GRAPH_DUMP='%s'\n", rg::dump(g).c_str());
    for (const std::string& f : rep.failures) std::fprintf(stderr, "  %s\n", f.c_str());
    std::abort();
  }
  return 0;
}
