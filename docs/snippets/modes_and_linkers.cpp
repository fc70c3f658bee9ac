#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::vector<double>("x");
  auto e = (x + x) * 2;

  // FAST_RUN, the default: every rewrite, vectorized kernels, linker cvm.
  auto fast = xsym::function("fast", xsym::inputs(x), e);
  // FAST_COMPILE: the fast_compile rewrites only, reference kernels (linker py).
  auto quick = xsym::function("quick", xsym::inputs(x), e, xsym::mode("FAST_COMPILE"));
  // Keep intermediate buffers from call to call.
  auto nogc = xsym::function("nogc", xsym::inputs(x), e, xsym::linker("cvm_nogc"));
  // Leave rewrites out, by name or tag, for this function only.
  auto unfused = xsym::function("unfused", xsym::inputs(x), e, xsym::optimizer_excluding("fusion:inplace"));

  const xt::xtensor<double, 1> a{1, 2, 3};
  std::cout << fast(a) << quick(a) << nogc(a) << unfused(a) << "\n";  // the same values four times
  std::cout << xsym::toposort_text(fast) << "\n" << xsym::toposort_text(unfused) << "\n";

  try {
    auto typo = xsym::function("typo", xsym::inputs(x), e, xsym::mode("FAST_RUNN"));
  } catch (const xsym::compile_error& err) {
    std::cout << err.what() << "\n";  // lists the modes, and suggests FAST_RUN
  }
}
