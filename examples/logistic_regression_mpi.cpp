// The seeds' exercise with the rows of X split over MPI ranks: each rank computes the gradient
// on its shard, AllReduce sums the gradients, and every rank applies the same update.
//
//   mpirun -np 2 --oversubscribe build/examples/logistic_regression_mpi [steps]
//   (as root, add --allow-run-as-root; XSYM_FLAGS=profile=True prints the profile summed over
//   the ranks, with each Apply node's time on its fastest and slowest rank)
//
// Rank 0 then trains the same model on the whole data in one process, with profiling off, and
// prints both final costs: they agree to rounding (the sums run in another order): within 1e-10
// of each other in float64 (this build), 1e-3 in float32 (logistic_regression_mpi_float32),
// where each run is itself about 3e-4 away from the float64 cost after 10000 steps.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include <xsym/mpi.hpp>

using real = xsym::floatX;

int main(int argc, char** argv) {
  xsym::mpi::environment env(argc, argv);
  try {
    const std::size_t n = 400, feats = 784;
    const char* env_steps = std::getenv("XSYM_LOGREG_STEPS");
    const long steps = argc > 1 ? std::atol(argv[1]) : env_steps ? std::atol(env_steps) : 10000;
    if (steps < 0) throw std::invalid_argument("logistic_regression_mpi: steps must be >= 0");
    const int rank = env.rank(), ranks = env.size();

    // The seeds' data on every rank (fixed seed), then this rank's rows.
    std::mt19937 rng(42);
    std::normal_distribution<double> normal;
    std::bernoulli_distribution coin(0.5);
    xt::xtensor<real, 2> X = xt::empty<real>({n, feats});
    xt::xtensor<real, 1> Y = xt::empty<real>({n});
    xt::xtensor<real, 1> w0 = xt::empty<real>({feats});
    for (auto& v : X) v = static_cast<real>(normal(rng));
    for (auto& v : Y) v = coin(rng) ? real(1) : real(0);
    for (auto& v : w0) v = static_cast<real>(normal(rng));
    const std::size_t lo = n * static_cast<std::size_t>(rank) / static_cast<std::size_t>(ranks);
    const std::size_t hi = n * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(ranks);
    xt::xtensor<real, 2> X_shard = xt::empty<real>({hi - lo, feats});
    xt::xtensor<real, 1> Y_shard = xt::empty<real>({hi - lo});
    for (std::size_t i = lo; i < hi; ++i) {
      for (std::size_t j = 0; j < feats; ++j) X_shard(i - lo, j) = X(i, j);
      Y_shard(i - lo) = Y(i);
    }

    // The cost is mean(xent) over all n rows + 0.01 |w|²: each rank's share is sum(xent) on its
    // rows / n, and the regulariser is added once, after the sum over ranks.
    auto x = xsym::matrix<real>("x");
    auto y = xsym::vector<real>("y");
    auto w = xsym::shared(w0, "w");
    auto b = xsym::shared(real(0), "b");
    auto p_1 = 1 / (1 + exp(-dot(x, w) - b));
    auto xent = -y * log(p_1) - (1 - y) * log(1 - p_1);
    auto [gw_shard, gb_shard] = xsym::grad(sum(xent), w, b);
    auto gw = xsym::mpi::allreduce(gw_shard) / real(n) + real(0.02) * w;
    auto gb = xsym::mpi::allreduce(gb_shard) / real(n);
    auto cost = xsym::mpi::allreduce(sum(xent)) / real(n) + real(0.01) * sum(w * w);
    auto train = xsym::function("train", xsym::inputs(x, y), xsym::outputs(p_1 > 0.5),
                                xsym::updates(xsym::update(w, w - real(0.01) * gw), xsym::update(b, b - real(0.01) * gb)));
    auto cost_eval = xsym::function("cost_eval", xsym::inputs(x, y), cost);
    xsym::mpi::broadcast_shared(train);  // rank 0's w and b everywhere

    const real cost_before = cost_eval(X_shard, Y_shard);
    for (long i = 0; i < steps; ++i) train(X_shard, Y_shard);
    const real cost_after = cost_eval(X_shard, Y_shard);
    xsym::mpi::check_shared(train);  // w and b are still the same on every rank

    if (rank == 0) {
      // One process on the whole data: the seeds' step, unprofiled.
      auto w1 = xsym::shared(w0, "w");
      auto b1 = xsym::shared(real(0), "b");
      auto q = 1 / (1 + exp(-dot(x, w1) - b1));
      auto xent1 = -y * log(q) - (1 - y) * log(1 - q);
      auto cost1 = mean(xent1) + real(0.01) * sum(w1 * w1);
      auto [gw1, gb1] = xsym::grad(cost1, w1, b1);
      auto train1 = xsym::function("train_one_process", xsym::inputs(x, y), xsym::outputs(q > 0.5),
                                   xsym::updates(xsym::update(w1, w1 - real(0.01) * gw1), xsym::update(b1, b1 - real(0.01) * gb1)),
                                   xsym::profile(false));
      auto cost1_eval = xsym::function("cost_one_process", xsym::inputs(x, y), cost1, xsym::profile(false));
      for (long i = 0; i < steps; ++i) train1(X, Y);
      const real single = cost1_eval(X, Y);
      const double diff = std::abs(static_cast<double>(cost_after) - single) / std::abs(static_cast<double>(single));
      std::cout << "ranks: " << ranks << " (rows per rank: " << n / static_cast<std::size_t>(ranks)
                << "), floatX: " << (sizeof(real) == 4 ? "float32" : "float64") << ", steps: " << steps << "\n";
      std::cout << "cost before training: " << cost_before << ", after: " << cost_after << "\n";
      std::cout << "one process on the whole data, after: " << single << " (relative difference " << diff << ")\n";
      if (!(diff <= (sizeof(real) == 4 ? 1e-3 : 1e-10))) {
        std::cerr << "logistic_regression_mpi: the ranks' cost differs from one process's\n";
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank " << env.rank() << ": " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a collective
    return 1;
  }
}
