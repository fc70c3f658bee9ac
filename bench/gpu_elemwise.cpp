// A fused elementwise node's device time, its typed kernel against the interpreted program of
// the same text, measured by the profile's CUDA events in one run (`make cuda`, then
// build/bench/gpu_elemwise on a machine with an sm_90 GPU). Prints one JSON line per case.
#include <xsym/gpu.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>

namespace {

template <class T>
xt::xtensor<T, 1> random_vector(std::size_t n, double lo, double hi) {
  static std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(lo, hi);
  xt::xtensor<T, 1> a = xt::xtensor<T, 1>::from_shape({n});
  for (auto& v : a) v = static_cast<T>(u(rng));
  return a;
}

// The fused elementwise node of the function named `name`: its index, and its profile.
struct composite_node {
  std::shared_ptr<const xsym::function_profile> prof;
  std::size_t index = 0;
};
composite_node find_composite(const xsym::profile_stats& stats, const char* name) {
  for (const auto& p : stats.functions()) {
    if (p->facts->name != name) continue;
    for (std::size_t i = 0; i < p->graph().nodes.size(); ++i)
      if (p->graph().node_text(p->graph().nodes[i]).find("Composite") != std::string::npos) return {p, i};
  }
  std::fprintf(stderr, "gpu_elemwise: no fused node in %s\n", name);
  std::exit(1);
}

// Builds the interpreted functions before the typed ones: a var holds the expression without
// its type, so it brings no kernel of its own, and the typed tree's kernel (which would bind to
// any program with its text) is registered only when the typed function is built.
template <class E>
void measure(const char* case_name, const xsym::var<float, 1>& x, const xsym::var<float, 1>& y,
             const xsym::var<float, 1>& z, const E& expr) {
  const xsym::var<float, 1> erased = expr;
  auto quiet = std::make_shared<xsym::profile_stats>("warm-up", false);
  auto stats = std::make_shared<xsym::profile_stats>("gpu elemwise", false);
  auto build = [&](const char* name, const auto& e, const std::shared_ptr<xsym::profile_stats>& s) {
    return xsym::function(name, xsym::inputs(x, y, z), e, xsym::device("cuda"), xsym::profile(s),
                          xsym::ignore_unused_inputs{});
  };
  auto warm_interp = build("interpreted", erased, quiet);
  auto interp = build("interpreted", erased, stats);
  auto warm_typed = build("typed", expr, quiet);
  auto typed = build("typed", expr, stats);
  const composite_node ni = find_composite(*stats, "interpreted"), nt = find_composite(*stats, "typed");
  for (std::size_t n : {std::size_t{1000}, std::size_t{100000}, std::size_t{10000000}}) {
    const auto a = random_vector<float>(n, -3, 3), b = random_vector<float>(n, 0.01, 0.99),
               c = random_vector<float>(n, -3, 3);
    const int calls = n >= 10000000 ? 20 : 200;
    for (int k = 0; k < 3; ++k) {  // module loading, buffers: not timed
      warm_interp(a, b, c);
      warm_typed(a, b, c);
    }
    const double ti0 = ni.prof->node_time(ni.index), tt0 = nt.prof->node_time(nt.index);
    xt::xtensor<float, 1> u, v;
    for (int k = 0; k < calls; ++k) {
      u = interp(a, b, c);
      v = typed(a, b, c);
    }
    const double ti = (ni.prof->node_time(ni.index) - ti0) / calls, tt = (nt.prof->node_time(nt.index) - tt0) / calls;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&u(i), &v(i), sizeof(float)) != 0;
    std::printf(
        "{\"case\": \"%s\", \"n\": %zu, \"interpreted_us\": %.2f, \"typed_us\": %.2f, \"typed_over_interpreted\": "
        "%.3f, \"types\": \"%s/%s\", \"elements_differing\": %zu}\n",
        case_name, n, ti * 1e6, tt * 1e6, tt / ti, ni.prof->facts->node_implementation(ni.index).c_str(),
        nt.prof->facts->node_implementation(nt.index).c_str(), differ);
    std::fflush(stdout);
  }
}

}  // namespace

int main() {
  const auto x = xsym::vector<float>("x"), y = xsym::vector<float>("y"), z = xsym::vector<float>("z");
  measure("add3mul", x, y, z, (x + y + z) * 2);
  measure("xent", x, y, z, -y * xsym::log(xsym::sigmoid(x)) - (1 - y) * xsym::log(1 - xsym::sigmoid(x)));
  measure("mixed", x, y, z, xsym::tanh(x) * y + xsym::exp(-z * z) / (1 + xsym::abs(x)));
  return 0;
}
