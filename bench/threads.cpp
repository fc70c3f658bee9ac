// openmp=True against one thread on the seeds' float64 step, run after run: with every core
// idle, and with a process spinning on one core (a build, another job), where a thread that
// the scheduler has not run must not hold up the step.
//
//   bench_threads [runs] [steps per run]
//
// Prints one JSON line per (condition, impl) for bench/run.py, then the spread of the runs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {
using real = double;

struct step_runs {
  std::vector<double> per_step;  // seconds per step, one entry per run
};

// A child process that spins until killed: one core busy, as with a build beside the program.
pid_t start_spinner() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    volatile unsigned long spin = 0;
    for (;;) spin = spin + 1;
  }
  return pid;
}

void stop_spinner(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}
}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 12;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 400;
  if (!xsym::cpu::openmp_compiled_in) {
    std::fprintf(stderr, "bench_threads: built without OpenMP; openmp=True cannot be measured\n");
    return 77;
  }
  const std::size_t n = 400, feats = 784;
  std::mt19937 rng(42);
  std::normal_distribution<double> normal;
  xt::xtensor<real, 2> X = xt::empty<real>({n, feats});
  xt::xtensor<real, 1> Y = xt::empty<real>({n});
  xt::xtensor<real, 1> w0 = xt::empty<real>({feats});
  for (auto& v : X) v = normal(rng);
  for (std::size_t i = 0; i < n; ++i) Y(i) = static_cast<real>(i % 2);
  for (auto& v : w0) v = normal(rng);

  auto make = [&](bool threads) {
    xsym::config.openmp = threads;
    auto f = std::get<0>(bench::seeds_train(w0));
    xsym::config.openmp = false;
    return f;
  };
  auto serial = make(false);
  auto parallel = make(true);

  const char* condition_names[] = {"idle", "busy"};
  const int threads = xsym::cpu::max_threads();
  for (int busy = 0; busy < 2; ++busy) {
    const pid_t spinner = busy ? start_spinner() : 0;
    step_runs r[2];
    // Alternate the two, run by run, so that drift and the spinner's placement fall on both.
    for (int run = 0; run < runs; ++run) {
      for (int k = 0; k < 2; ++k) {
        auto& f = k == 0 ? serial : parallel;
        f(X, Y);
        const auto t0 = bench::clock_type::now();
        for (int s = 0; s < steps; ++s) f(X, Y);
        r[k].per_step.push_back(std::chrono::duration<double>(bench::clock_type::now() - t0).count() / steps);
      }
    }
    if (busy) stop_spinner(spinner);
    for (int k = 0; k < 2; ++k) {
      auto v = r[k].per_step;
      std::sort(v.begin(), v.end());
      std::printf("{\"benchmark\": \"logreg_runs_%s\", \"impl\": \"%s\", \"dtype\": \"float64\", \"size\": %zu, "
                  "\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"repeats\": %d, \"threads\": %d}\n",
                  condition_names[busy], k ? "xsym_openmp" : "xsym", n, v[v.size() / 2], v.front(), v.back(), runs,
                  k ? threads : 1);
    }
    std::fprintf(stderr, "%s: us per step over %d runs of %d steps (min / median / max)\n", condition_names[busy], runs,
                 steps);
    for (int k = 0; k < 2; ++k) {
      auto v = r[k].per_step;
      std::sort(v.begin(), v.end());
      std::fprintf(stderr, "  %-12s %7.1f %7.1f %7.1f\n", k ? "openmp" : "one thread", v.front() * 1e6,
                   v[v.size() / 2] * 1e6, v.back() * 1e6);
    }
  }
}
