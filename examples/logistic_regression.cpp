// The seeds' exercise: logistic regression trained by gradient descent, profiled.
//
//   XSYM_FLAGS=profile=True ./logistic_regression [steps]
//
// Built with float32 (XSYM_FLOATX=float, the default) and as logistic_regression_float64.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#ifdef XSYM_EXAMPLE_GPU
#include <xsym/gpu.hpp>  // device=cuda runs train on the GPU (or on Thrust's OpenMP system)
#else
#include <xsym/xsym.hpp>
#endif

using real = xsym::floatX;

// The first values of a vector of labels, as numpy prints them: "[0 1 1 0]". A loop rather than
// xtensor's printer (xtensor/xio.hpp), which cost this file about a second of its compile.
template <class Vector>
std::string first_labels(const Vector& v, std::size_t count) {
  std::string text = "[";
  for (std::size_t i = 0; i < count && i < v.size(); ++i) text += (i ? " " : "") + std::to_string(static_cast<int>(v(i)));
  return text + "]";
}

int main(int argc, char** argv) try {
  const std::size_t n = 400, feats = 784;
  // Steps: the first argument, else $XSYM_LOGREG_STEPS, else the seed's 10000.
  const char* env_steps = std::getenv("XSYM_LOGREG_STEPS");
  const long steps = argc > 1 ? std::atol(argv[1]) : env_steps ? std::atol(env_steps) : 10000;
  if (steps < 0) throw std::invalid_argument("logistic_regression: steps must be >= 0");

  // Data with a fixed seed: X ~ N(0, 1), Y in {0, 1}, w ~ N(0, 1).
  std::mt19937 rng(42);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.5);
  xt::xtensor<real, 2> X = xt::empty<real>({n, feats});
  xt::xtensor<real, 1> Y = xt::empty<real>({n});
  xt::xtensor<real, 1> w0 = xt::empty<real>({feats});
  for (auto& v : X) v = static_cast<real>(normal(rng));
  for (auto& v : Y) v = coin(rng) ? real(1) : real(0);
  for (auto& v : w0) v = static_cast<real>(normal(rng));

  // Symbolic graph, as in the seed.
  auto x = xsym::matrix<real>("x");
  auto y = xsym::vector<real>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(real(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));          // probability that the target is 1
  auto prediction = p_1 > 0.5;                        // the prediction: 0 or 1
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);  // cross-entropy
  auto cost = mean(xent) + 0.01 * sum(w * w);         // the cost to minimise
  auto [gw, gb] = xsym::grad(cost, w, b);

  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(prediction, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)));
  auto predict = xsym::function("predict", xsym::inputs(x), prediction);
  auto cost_eval = xsym::function("cost_eval", xsym::inputs(x, y), cost);

  bool cpu = false, gpu = false;
  for (const auto& node : train.toposort()) {
    cpu |= node.class_name() == "xsym::Gemv" || node.class_name() == "xsym::Gemm" || node.class_name() == "xsym::Dot22" ||
           node.class_name() == "xsym::OnePassGemv";  // both products in one node (rewrite one_pass_gemv)
    gpu |= node.class_name() == "xsym::GpuGemv" || node.class_name() == "xsym::GpuGemm";
  }
  std::cout << (cpu ? "Used the cpu" : gpu ? "Used the gpu" : "ERROR, not able to tell if xsym used the cpu or the gpu")
            << "\n";
  std::cout << xsym::toposort_text(train) << "\n";

  const real cost_before = cost_eval(X, Y);
  const auto t0 = std::chrono::steady_clock::now();
  bool finite = true;
  for (long i = 0; i < steps; ++i) {
    auto [pred, err] = train(X, Y);
    if (i < 10) finite &= xt::all(xt::isfinite(err));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const real cost_after = cost_eval(X, Y);

  const auto pred = predict(X);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < n; ++i) correct += (pred(i) ? 1.0f : 0.0f) == Y(i);
  std::cout << "target values for D (first 20): " << first_labels(Y, 20) << "\n";
  std::cout << "prediction on D (first 20):     " << first_labels(pred, 20) << "\n";
  std::cout << "floatX: " << (sizeof(real) == 4 ? "float32" : "float64") << ", steps: " << steps << "\n";
  std::cout << "cost before training: " << cost_before << ", after: " << cost_after
            << (finite ? "" : " (cross-entropy was not finite in early steps)") << "\n";
  std::cout << "training accuracy: " << static_cast<double>(correct) / n << "\n";
  std::cout << "training loop: " << seconds << " s, " << (steps ? seconds / steps * 1e6 : 0.0) << " us per step\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
