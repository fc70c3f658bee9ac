#include <fstream>
#include <memory>

#include <xtensor/xbuilder.hpp>
#include <xsym/xsym.hpp>

int main() {
  auto x = xsym::matrix<float>("x");
  auto w = xsym::vector<float>("w");
  auto stats = std::make_shared<xsym::profile_stats>("exports", /*print_at_exit=*/false);
  stats->enable_trace();  // keep each node run (up to 2^20 per function) for the trace
  auto f = xsym::function("scores", xsym::inputs(x, w), sigmoid(dot(x, w)) * 2 - 1, xsym::profile(stats));

  const xt::xtensor<float, 2> X = xt::ones<float>({1000, 100});
  const xt::xtensor<float, 1> W = xt::ones<float>({100});
  for (int i = 0; i < 10; ++i) f(X, W);

  std::ofstream json("profile.json");
  xsym::write_json(*stats, json);  // every number of the text report
  std::ofstream trace("trace.json");
  xsym::write_chrome_trace(*stats, trace);  // open in https://ui.perfetto.dev or chrome://tracing
  std::ofstream graph("graph.dot");
  const xsym::function_profile* record = f.profile().functions().front().get();  // f's own numbers
  xsym::write_dot(f.graph(), graph, record);  // then: dot -Tpng graph.dot -o graph.png
}
