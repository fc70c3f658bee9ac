// A two-layer classifier trained by minibatches: 784 features, a tanh hidden layer and a relu
// one, softmax over 10 classes, cross-entropy against one-hot rows. The data set (60000
// training rows, 10000 test rows) is made here with a fixed seed: each class is a random
// prototype plus noise. Each step gathers its minibatch inside the function (take).
//
//   XSYM_FLAGS=profile=True ./mlp [epochs]
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>

#include <xsym/xsym.hpp>

using real = xsym::floatX;

namespace {
struct data_set {
  xt::xtensor<real, 2> x, onehot;
  xt::xtensor<std::int32_t, 1> label;
};

data_set make_data(std::size_t rows, const xt::xtensor<real, 2>& prototypes, std::mt19937& rng) {
  const std::size_t feats = prototypes.shape(1), classes = prototypes.shape(0);
  std::normal_distribution<float> noise(0.0f, 1.5f);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(classes) - 1);
  data_set d{xt::empty<real>({rows, feats}), xt::zeros<real>({rows, classes}), xt::empty<std::int32_t>({rows})};
  for (std::size_t i = 0; i < rows; ++i) {
    const int c = pick(rng);
    d.label(i) = c;
    d.onehot(i, static_cast<std::size_t>(c)) = 1;
    for (std::size_t j = 0; j < feats; ++j) d.x(i, j) = prototypes(static_cast<std::size_t>(c), j) + noise(rng);
  }
  return d;
}

template <class T, std::size_t N>
xt::xtensor<T, N> normal_array(const std::array<std::size_t, N>& shape, double scale, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, scale);
  xt::xtensor<T, N> a = xt::empty<T>(shape);
  for (auto& v : a) v = static_cast<T>(normal(rng));
  return a;
}
}  // namespace

int main(int argc, char** argv) try {
  const std::size_t feats = 784, classes = 10, hidden1 = 128, hidden2 = 64, batch_size = 128;
  const long epochs = argc > 1 ? std::atol(argv[1]) : 1;
  if (epochs < 0) throw std::invalid_argument("mlp: epochs must be >= 0");
  std::mt19937 rng(2026);
  const auto prototypes = normal_array<real, 2>({classes, feats}, 0.15, rng);
  const data_set train_set = make_data(60000, prototypes, rng), test_set = make_data(10000, prototypes, rng);

  // The data live in shared variables; a step reads the rows its batch names.
  auto X = xsym::shared(train_set.x, "X");
  auto Y = xsym::shared(train_set.onehot, "Y");
  auto W1 = xsym::shared(normal_array<real, 2>({feats, hidden1}, 1.0 / std::sqrt(double(feats)), rng), "W1");
  auto b1 = xsym::shared(xt::xtensor<real, 1>(xt::zeros<real>({hidden1})), "b1");
  auto W2 = xsym::shared(normal_array<real, 2>({hidden1, hidden2}, 1.0 / std::sqrt(double(hidden1)), rng), "W2");
  auto b2 = xsym::shared(xt::xtensor<real, 1>(xt::zeros<real>({hidden2})), "b2");
  auto W3 = xsym::shared(normal_array<real, 2>({hidden2, classes}, 1.0 / std::sqrt(double(hidden2)), rng), "W3");
  auto b3 = xsym::shared(xt::xtensor<real, 1>(xt::zeros<real>({classes})), "b3");

  auto logits = [&](const xsym::var<real, 2>& x) {
    auto h1 = tanh(dot(x, W1) + b1);
    auto h2 = xsym::relu(dot(h1, W2) + b2);
    return dot(h2, W3) + b3;
  };
  auto batch = xsym::vector<std::int32_t>("batch");
  auto xb = xsym::take(X, batch);
  auto yb = xsym::take(Y, batch);
  auto cost = mean(-sum(yb * xsym::log_softmax(logits(xb)), 1));
  auto [g1, gb1, g2, gb2, g3, gb3] = xsym::grad(cost, W1, b1, W2, b2, W3, b3);
  const real lr = real(0.1);
  auto train = xsym::function(
      "train", xsym::inputs(batch), cost,
      xsym::updates(xsym::update(W1, W1 - lr * g1), xsym::update(b1, b1 - lr * gb1), xsym::update(W2, W2 - lr * g2),
                    xsym::update(b2, b2 - lr * gb2), xsym::update(W3, W3 - lr * g3), xsym::update(b3, b3 - lr * gb3)));
  auto x = xsym::matrix<real>("x");
  auto predict = xsym::function("predict", xsym::inputs(x), xsym::softmax(logits(x)));

  std::vector<std::int32_t> order(train_set.label.size());
  std::iota(order.begin(), order.end(), 0);
  xt::xtensor<std::int32_t, 1> idx = xt::empty<std::int32_t>({batch_size});
  const auto t0 = std::chrono::steady_clock::now();
  long steps = 0;
  double last = 0;
  for (long e = 0; e < epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t start = 0; start + batch_size <= order.size(); start += batch_size, ++steps) {
      std::copy(order.begin() + static_cast<std::ptrdiff_t>(start),
                order.begin() + static_cast<std::ptrdiff_t>(start + batch_size), idx.begin());
      last = train(idx);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const xt::xtensor<real, 2> p = predict(test_set.x);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < p.shape(0); ++i) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < classes; ++c)
      if (p(i, c) > p(i, best)) best = c;
    correct += best == static_cast<std::size_t>(test_set.label(i));
  }
  std::cout << "floatX: " << (sizeof(real) == 4 ? "float32" : "float64") << ", epochs: " << epochs << ", steps: " << steps
            << " of " << batch_size << " rows\n";
  std::cout << "last minibatch cost: " << last << "\n";
  std::cout << "test accuracy: " << static_cast<double>(correct) / static_cast<double>(p.shape(0)) << "\n";
  std::cout << "training: " << seconds << " s, " << (steps ? seconds / static_cast<double>(steps) * 1e6 : 0.0)
            << " us per step\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
