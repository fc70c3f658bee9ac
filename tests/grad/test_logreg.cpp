// The seeds' logistic regression (/work/shared/seeds/003, examples/logistic_regression.cpp),
// built and trained with xsym exactly as the example does, in float64 and float32, against an
// independent hand-written float64 loop:
//
//   z = X w + b,  p = 1 / (1 + exp(-z)),
//   cost = mean(-y log p - (1 - y) log(1 - p)) + 0.01 sum(w^2)
//   d xent_i / d z_i = p_i - y_i, so
//   gw = X^T (p - y) / N + 0.02 w,  gb = mean(p - y),  w -= 0.01 gw,  b -= 0.01 gb.
//
// The reference evaluates the cross-entropy in its stable form, y softplus(-z) + (1 - y)
// softplus(z): with w ~ N(0, 1) over 784 features |z| reaches ~100 and the literal formula
// gives log(0) in double as well.
#include <catch2/catch.hpp>

#include <xsym/xsym.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

namespace {

constexpr std::size_t n_rows = 400, feats = 784;
constexpr long training_steps = 10000;

// Checkpoints: the cost is compared and checked finite before every one of the first 100
// steps, then before every 100th, and after the last.
bool checkpoint(long i) { return i < 100 || i % 100 == 0; }

template <class real>
struct dataset {
  xt::xtensor<real, 2> X;
  xt::xtensor<real, 1> Y, w0;
};

// As examples/logistic_regression.cpp: X ~ N(0, 1), Y in {0, 1}, w ~ N(0, 1), seed 42.
template <class real>
dataset<real> make_data() {
  std::mt19937 rng(42);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.5);
  dataset<real> d{xt::empty<real>({n_rows, feats}), xt::empty<real>({n_rows}), xt::empty<real>({feats})};
  for (auto& v : d.X) v = static_cast<real>(normal(rng));
  for (auto& v : d.Y) v = coin(rng) ? real(1) : real(0);
  for (auto& v : d.w0) v = static_cast<real>(normal(rng));
  return d;
}

double softplus(double t) { return t > 0 ? t + std::log1p(std::exp(-t)) : std::log1p(std::exp(t)); }
double sigmoid(double t) {
  if (t >= 0) return 1 / (1 + std::exp(-t));
  const double e = std::exp(t);
  return e / (1 + e);
}

// Plain float64 gradient descent on the same data (read from the element type's values).
class reference {
 public:
  template <class real>
  explicit reference(const dataset<real>& d)
      : m_X(d.X.begin(), d.X.end()), m_y(d.Y.begin(), d.Y.end()), m_w(d.w0.begin(), d.w0.end()), m_z(n_rows),
        m_gw(feats) {}

  double cost() {
    forward();
    double xent = 0;
    for (std::size_t i = 0; i < n_rows; ++i) xent += m_y[i] * softplus(-m_z[i]) + (1 - m_y[i]) * softplus(m_z[i]);
    double reg = 0;
    for (double v : m_w) reg += v * v;
    return xent / n_rows + 0.01 * reg;
  }

  void step() {
    forward();
    for (std::size_t j = 0; j < feats; ++j) m_gw[j] = 0.02 * m_w[j];
    double gb = 0;
    for (std::size_t i = 0; i < n_rows; ++i) {
      const double d = (sigmoid(m_z[i]) - m_y[i]) / n_rows;
      gb += d;
      const double* x = &m_X[i * feats];
      for (std::size_t j = 0; j < feats; ++j) m_gw[j] += d * x[j];
    }
    for (std::size_t j = 0; j < feats; ++j) m_w[j] -= 0.01 * m_gw[j];
    m_b -= 0.01 * gb;
  }

  double accuracy() {
    forward();
    std::size_t ok = 0;
    for (std::size_t i = 0; i < n_rows; ++i) ok += (sigmoid(m_z[i]) > 0.5) == (m_y[i] == 1);
    return static_cast<double>(ok) / n_rows;
  }

  const std::vector<double>& w() const { return m_w; }
  double b() const { return m_b; }

 private:
  void forward() {
    for (std::size_t i = 0; i < n_rows; ++i) {
      const double* x = &m_X[i * feats];
      double acc[8] = {};  // independent partial sums: the loop vectorizes without reassociation flags
      std::size_t j = 0;
      for (; j + 8 <= feats; j += 8)
        for (std::size_t k = 0; k < 8; ++k) acc[k] += x[j + k] * m_w[j + k];
      for (; j < feats; ++j) acc[0] += x[j] * m_w[j];
      m_z[i] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + m_b;
    }
  }

  std::vector<double> m_X, m_y, m_w, m_z, m_gw;
  double m_b = 0;
};

template <class real>
constexpr double cost_rtol = std::is_same_v<real, double> ? 1e-6 : 1e-3;

template <class real>
const char* real_name() {
  return std::is_same_v<real, double> ? "float64" : "float32";
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

}  // namespace

TEMPLATE_TEST_CASE("the seeds' logistic regression trains as a float64 reference loop does", "[grad][logreg]", double,
                   float) {
  using real = TestType;
  const auto data = make_data<real>();

  // The symbolic graph, as in the seed and the example.
  auto x = xsym::matrix<real>("x");
  auto y = xsym::vector<real>("y");
  auto w = xsym::shared(data.w0, "w");
  auto b = xsym::shared(real(0), "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));           // probability that the target is 1
  auto prediction = p_1 > 0.5;                         // the prediction: 0 or 1
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);  // cross-entropy
  auto cost = mean(xent) + 0.01 * sum(w * w);          // the cost to minimise
  auto [gw, gb] = xsym::grad(cost, w, b);
  static_assert(std::is_same_v<decltype(gw), xsym::var<real, 1>>);
  static_assert(std::is_same_v<decltype(gb), xsym::var<real, 0>>);

  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(prediction, xent),
                              xsym::updates(xsym::update(w, w - 0.01 * gw), xsym::update(b, b - 0.01 * gb)));
  // The weight decay rides on the product: w's new value is one Gemv, beta = 1 - 0.01 * 0.02.
  const auto& nodes = train.toposort();
  CHECK(std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n.op_name().find(",beta=0.9998}") != std::string::npos; }));
  auto predict = xsym::function("predict", xsym::inputs(x), prediction);
  auto cost_eval = xsym::function("cost_eval", xsym::inputs(x, y), cost);

  reference ref(data);
  INFO(real_name<real>() << ", " << training_steps << " steps");

  const auto t0 = std::chrono::steady_clock::now();
  double ref_seconds = 0;
  long first_not_finite = -1, worst_step = -1, checks = 0;
  double worst = 0;
  for (long i = 0; i <= training_steps; ++i) {
    if (checkpoint(i) || i == training_steps) {
      const double c = static_cast<double>(cost_eval(data.X, data.Y));
      const auto r0 = std::chrono::steady_clock::now();
      const double c_ref = ref.cost();
      ref_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      ++checks;
      if (!std::isfinite(c) && first_not_finite < 0) first_not_finite = i;
      if (rel(c, c_ref) > worst || !std::isfinite(c)) {
        worst = std::isfinite(c) ? rel(c, c_ref) : INFINITY;
        worst_step = i;
      }
      if (i == training_steps) {
        INFO("final cost " << c << ", reference " << c_ref);
        CHECK(c == Approx(c_ref).epsilon(cost_rtol<real>));
      }
    }
    if (i == training_steps) break;
    auto [pred, err] = train(data.X, data.Y);
    if (checkpoint(i) && !xt::all(xt::isfinite(err)) && first_not_finite < 0) first_not_finite = i;
    const auto r0 = std::chrono::steady_clock::now();
    ref.step();
    ref_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  }
  const double total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  INFO(checks << " checkpoints; the cost deviates most from the reference before step " << worst_step << ": "
              << worst << " relative");
  CHECK(first_not_finite == -1);
  CHECK(worst <= cost_rtol<real>);

  // Accuracy on the training set.
  const xt::xtensor<bool, 1> pred = predict(data.X);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < n_rows; ++i) correct += (pred(i) ? real(1) : real(0)) == data.Y(i);
  const double accuracy = static_cast<double>(correct) / n_rows;
  INFO("training accuracy " << accuracy << ", reference " << ref.accuracy());
  CHECK(accuracy > 0.85);

  // The trained parameters.
  const auto w_end = w.get_value();
  const double b_end = static_cast<double>(b.get_value()());
  double w_scale = 0, w_err = 0;
  for (std::size_t j = 0; j < feats; ++j) {
    w_scale = std::max(w_scale, std::abs(ref.w()[j]));
    w_err = std::max(w_err, std::abs(static_cast<double>(w_end(j)) - ref.w()[j]));
  }
  // float64: 1e-6 relative. float32 drifts over 10000 steps of float32 arithmetic, the more
  // since the update accumulates X^T (p - y) column by column into w in float32: 5e-3.
  const double param_rtol = std::is_same_v<real, double> ? 1e-6 : 5e-3;
  INFO("max |w - w_ref| = " << w_err << " (max |w_ref| = " << w_scale << "), b = " << b_end << ", b_ref = " << ref.b());
  CHECK(w_err <= param_rtol * w_scale);
  CHECK(std::abs(b_end - ref.b()) <= param_rtol * std::max(std::abs(ref.b()), 0.01 * w_scale));

  if (std::getenv("XSYM_GRAD_TIMING"))
    std::cout << real_name<real>() << ": " << training_steps << " steps in " << total_seconds << " s (reference "
              << ref_seconds << " s), cost deviation " << worst << ", |dw| " << w_err << " of " << w_scale
              << ", b " << b_end << " vs " << ref.b() << ", accuracy " << accuracy << "\n";
}
