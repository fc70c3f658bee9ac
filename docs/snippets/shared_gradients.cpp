#include <iostream>

#include <xtensor/xio.hpp>
#include <xsym/xsym.hpp>

int main() {
  // Four samples of two features, and their labels.
  const xt::xtensor<float, 2> X = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  const xt::xtensor<float, 1> Y = {0, 0, 1, 1};
  const xt::xtensor<float, 1> w0 = {0, 0};

  auto x = xsym::matrix<float>("x");
  auto y = xsym::vector<float>("y");
  auto w = xsym::shared(w0, "w");
  auto b = xsym::shared(0.0f, "b");
  auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
  auto cost = mean(xent) + 0.01 * sum(w * w);
  auto [gw, gb] = xsym::grad(cost, w, b);
  auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5, xent),
                              xsym::updates(xsym::update(w, w - 0.1 * gw),
                                            xsym::update(b, b - 0.1 * gb)));

  for (int i = 0; i < 1000; ++i) train(X, Y);
  auto [prediction, err] = train(X, Y);
  std::cout << "prediction: " << prediction << "\n";  // {false, false,  true,  true}
  std::cout << "w: " << w.get_value() << ", b: " << b.get_value() << "\n";
}
