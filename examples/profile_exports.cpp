// The seeds' logistic regression, profiled and written out in the machine-readable forms:
// profile.json (write_json), trace.json (write_chrome_trace: open it in https://ui.perfetto.dev
// or chrome://tracing) and graph.dot (write_dot: render it with `dot -Tpng graph.dot`).
//
//   ./profile_exports [DIR]          # writes DIR/profile.json, DIR/trace.json, DIR/graph.dot (DIR: .)
//   XSYM_FLAGS=optimizer_excluding=fusion:inplace ./profile_exports   # the unfused graph
//
// Steps: $XSYM_EXPORT_STEPS, else 100.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include <xsym/xsym.hpp>

using real = xsym::floatX;

namespace {

// Opens DIR/name for writing, or throws with the path in the message.
std::ofstream open_output(const std::filesystem::path& path) {
  std::ofstream os(path);
  if (!os) throw std::runtime_error("profile_exports: cannot open " + path.string() + " for writing");
  return os;
}

void check_written(std::ofstream& os, const std::filesystem::path& path) {
  os.close();
  if (!os) throw std::runtime_error("profile_exports: error while writing " + path.string());
}

}  // namespace

int main(int argc, char** argv) try {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  const char* env_steps = std::getenv("XSYM_EXPORT_STEPS");
  const long steps = env_steps ? std::atol(env_steps) : 100;
  if (steps < 1) throw std::invalid_argument("profile_exports: XSYM_EXPORT_STEPS must be >= 1");
  std::filesystem::create_directories(dir);

  // The seed's data: 400 samples of 784 features, fixed seed.
  const std::size_t n = 400, feats = 784;
  std::mt19937 rng(42);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.5);
  xt::xtensor<real, 2> X = xt::empty<real>({n, feats});
  xt::xtensor<real, 1> Y = xt::empty<real>({n});
  xt::xtensor<real, 1> w0 = xt::empty<real>({feats});
  for (auto& v : X) v = static_cast<real>(normal(rng));
  for (auto& v : Y) v = coin(rng) ? real(1) : real(0);
  for (auto& v : w0) v = static_cast<real>(normal(rng));

  auto x = xsym::matrix<real>("x");
  auto y = xsym::vector<real>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(real(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
  auto prediction = p_1 > 0.5;
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);

  // One profile for both functions, kept out of the report printed at exit, with tracing on.
  auto stats = std::make_shared<xsym::profile_stats>("profile_exports", /*print_at_exit=*/false);
  stats->enable_trace();
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(prediction, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)),
                              xsym::profile(stats));
  auto predict = xsym::function("predict", xsym::inputs(x), prediction, xsym::profile(stats));

  for (long i = 0; i < steps; ++i) train(X, Y);
  const auto pred = predict(X);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < n; ++i) correct += (pred(i) ? real(1) : real(0)) == Y(i);

  // train's own record in the shared profile, for the shading of graph.dot.
  const xsym::function_profile* train_profile = nullptr;
  std::size_t events = 0;
  for (const auto& f : stats->functions()) {
    if (f->name() == "train") train_profile = f.get();
    events += f->events.size();
  }

  // Full paths, so the messages say where the files are whatever the working directory.
  const auto out = std::filesystem::weakly_canonical(dir);
  const auto json_path = out / "profile.json", trace_path = out / "trace.json", dot_path = out / "graph.dot";
  auto json = open_output(json_path);
  xsym::write_json(*stats, json);
  check_written(json, json_path);
  auto trace = open_output(trace_path);
  xsym::write_chrome_trace(*stats, trace);
  check_written(trace, trace_path);
  auto dot = open_output(dot_path);
  xsym::write_dot(train.graph(), dot, train_profile);
  check_written(dot, dot_path);

  std::cout << "trained " << steps << " steps, training accuracy: " << static_cast<double>(correct) / n << "\n";
  std::cout << "wrote " << json_path.string() << " (" << stats->functions().size() << " functions)\n";
  std::cout << "wrote " << trace_path.string() << " (" << events << " events)\n";
  std::cout << "wrote " << dot_path.string() << " (" << train.toposort().size() << " Apply nodes of train)\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
