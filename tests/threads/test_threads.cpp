// Concurrency: threads calling one compiled function and different functions at once get the
// same results as one thread; a shared variable read by calls while set_value and another
// function's updates replace it is never seen torn. `make test-tsan` runs this area under
// ThreadSanitizer, so an unlocked access fails there even when no wrong value shows.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <xsym/xsym.hpp>

#include "compile/compile_util.hpp"

namespace {
// Runs each body on a thread of its own. Threads that deadlock cannot be joined: after a minute
// the process ends with a message naming the case.
template <class... Body>
void run_or_report_deadlock(const char* what, Body... bodies) {
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  (threads.emplace_back([&finished, bodies] {
     bodies();
     ++finished;
   }),
   ...);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished.load() < static_cast<int>(sizeof...(Body))) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "test_threads: deadlock (threads still waiting after 60 s): %s\n", what);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : threads) t.join();
}
}  // namespace

TEST_CASE("threads calling the same function and different functions get correct results", "[compile][threads]") {
  xsym_test::clean_config guard;
  auto x = xsym::matrix<double>("x");
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("f", xsym::inputs(x, v), xsym::outputs(xsym::dot(x, v) + xsym::sum(x, 1), exp(-x) * 2));
  auto g = xsym::function("g", xsym::inputs(v), xsym::sum(v * v));
  constexpr int n_threads = 4, calls = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(n_threads, 0);
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_real_distribution<double> u(-1, 1);
      for (int c = 0; c < calls; ++c) {
        const std::size_t rows = 1 + (c + t) % 9, cols = 1 + (c * 7 + t) % 13;
        xt::xtensor<double, 2> X = xt::empty<double>({rows, cols});
        xt::xtensor<double, 1> V = xt::empty<double>({cols});
        for (auto& e : X) e = u(rng);
        for (auto& e : V) e = u(rng);
        auto [a, b] = f(X, V);
        for (std::size_t i = 0; i < rows; ++i) {
          double want = 0;
          for (std::size_t j = 0; j < cols; ++j) {
            want += X(i, j) * V(j) + X(i, j);
            if (std::abs(b(i, j) - 2 * std::exp(-X(i, j))) > 1e-12) ++failures[static_cast<std::size_t>(t)];
          }
          if (std::abs(a(i) - want) > 1e-12) ++failures[static_cast<std::size_t>(t)];
        }
        double want_g = 0;
        for (double e : V) want_g += e * e;
        if (std::abs(g(V) - want_g) > 1e-12) ++failures[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < n_threads; ++t) CHECK(failures[static_cast<std::size_t>(t)] == 0);
}

// w always holds n copies of one value (set_value and the update both keep it so): a call that
// read half an old and half a new value would see a sum that is not n times one element.
TEST_CASE("calls read shared variables whole while set_value and updates replace them", "[threads][shared]") {
  xsym_test::clean_config guard;
  constexpr std::size_t n = 64;
  auto w = xsym::shared(xt::xtensor<double, 1>(xt::ones<double>({n})), "w");
  auto b = xsym::shared(0.0, "b");
  auto x = xsym::vector<double>("x");
  // Readers: the sum of w and its first element, in one call.
  auto read = xsym::function("read", xsym::inputs(x), xsym::outputs(xsym::sum(w * 1.0), xsym::max(w) + x * 0.0));
  // Writers through a function: w <- w + 1 (every element alike), b <- b + 1.
  auto bump = xsym::function("bump", xsym::inputs(), xsym::outputs(xsym::sum(w)),
                             xsym::updates(xsym::update(w, w + 1.0), xsym::update(b, b + 1.0)));
  constexpr int rounds = 2000;
  std::atomic<int> torn{0}, done{0}, ready{0};
  // Every thread starts once all four exist, so the writes overlap the reads.
  auto start_together = [&] {
    ++ready;
    while (ready.load() < 4) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    start_together();
    for (int i = 0; i < rounds; ++i) bump();
    ++done;
  });
  threads.emplace_back([&] {
    start_together();
    for (int i = 0; i < rounds; ++i) w.set_value(xt::xtensor<double, 1>(xt::ones<double>({n}) * double(-i)));
    ++done;
  });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      const xt::xtensor<double, 1> one = xt::zeros<double>({1});
      start_together();
      while (done.load() < 2) {
        auto [s, m] = read(one);
        if (s != static_cast<double>(n) * m(0)) ++torn;
        const auto v = w.get_value();
        for (double e : v)
          if (e != v(0)) ++torn;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(torn.load() == 0);
  CHECK(b.get_value()() == rounds);  // every update of b applied once: no lost update
}

// DebugMode's twin computes from the shared values its call read: a value another thread puts
// in between (set_value, or a function that updates it) is no mismatch.
TEST_CASE("DebugMode checks a call against its twin on the shared values the call read", "[threads][shared][modes]") {
  xsym_test::clean_config guard;
  constexpr std::size_t n = 1024;
  const xt::xtensor<double, 1> ones = xt::ones<double>({n}), twos = ones * 2.0;
  auto w = xsym::shared(ones, "w");
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("dbg", xsym::inputs(x), xsym::outputs(w * x + w), xsym::mode("DebugMode"));
  auto flip = xsym::function("flip", xsym::inputs(), xsym::outputs(xsym::sum(w)), xsym::updates(xsym::update(w, 3.0 - w)));
  const xt::xtensor<double, 1> X = ones * 0.5;
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, wrong{0};
  std::thread setter([&] {
    for (int i = 0; !stop.load(); ++i) {
      if (i % 2) w.set_value(i % 4 == 1 ? ones : twos);
      else flip();  // 1 <-> 2
    }
  });
  for (int i = 0; i < 1500; ++i) {
    try {
      const auto [r] = f(X);
      // w was all ones or all twos for the whole call: 1.5 or 3 everywhere.
      for (double e : r)
        if (e != r(0) || (e != 1.5 && e != 3.0)) ++wrong;
    } catch (const std::exception& e) {
      if (++errors == 1) UNSCOPED_INFO(e.what());
    }
  }
  stop = true;
  setter.join();
  CHECK(errors.load() == 0);
  CHECK(wrong.load() == 0);
}

// Two functions that update one shared variable, called from two threads: each call reads and
// writes it under its lock, so no increment is lost; a third function reads two variables that
// one call updates together and sees both updates or neither.
TEST_CASE("calls that update one shared variable from several threads lose no update; readers see a call's updates "
          "together",
          "[threads][shared]") {
  xsym_test::clean_config guard;
  auto w = xsym::shared(0.0, "w");
  auto a = xsym::shared(xt::xtensor<double, 1>(xt::zeros<double>({65536})), "a");
  auto c = xsym::shared(0.0, "c");
  auto f = xsym::function("f", xsym::inputs(), xsym::outputs(w * 1.0), xsym::updates(xsym::update(w, w + 1.0)));
  auto g = xsym::function("g", xsym::inputs(), xsym::outputs(w * 2.0), xsym::updates(xsym::update(w, w + 1.0)));
  // a's elements and c move together: c <- c + 1, a <- a + 1 (a large enough to take a while).
  auto bump = xsym::function("bump", xsym::inputs(), xsym::outputs(c * 1.0),
                             xsym::updates(xsym::update(c, c + 1.0), xsym::update(a, a + 1.0)));
  auto x = xsym::scalar<double>("x");
  auto read = xsym::function("read", xsym::inputs(x), xsym::max(a) - c + x);
  const int calls = xsym_test::iterations(100000);
  // Two threads at a time, so that on two cores they run at once.
  auto run_together = [](auto first, auto second) {
    std::atomic<int> ready{0};
    auto start_together = [&] {
      ++ready;
      while (ready.load() < 2) std::this_thread::yield();
    };
    std::thread t1([&] { start_together(); first(); });
    std::thread t2([&] { start_together(); second(); });
    t1.join();
    t2.join();
  };
  run_together([&] { for (int i = 0; i < calls; ++i) f(); }, [&] { for (int i = 0; i < calls; ++i) g(); });
  std::atomic<int> mixed{0}, done{0};
  run_together(
      [&] {
        for (int i = 0; i < calls / 100; ++i) bump();
        done = 1;
      },
      [&] {
        while (!done.load())
          if (read(0.0) != 0.0) ++mixed;
      });
  CHECK(w.get_value()() == 2 * calls);
  CHECK(c.get_value()() == calls / 100);
  CHECK(mixed.load() == 0);
}

// A MonitorMode callback runs while its call holds the locks of the variables it updates: on
// the calling thread get_value still answers (the value before the call's updates).
TEST_CASE("a MonitorMode callback reads a shared variable its call updates", "[threads][shared]") {
  xsym_test::clean_config guard;
  auto w = xsym::shared(xt::xtensor<double, 1>{1.0, 2.0}, "w");
  std::vector<double> seen;
  auto pre = [&](const xsym::node_event&) { seen.push_back(w.get_value()(0)); };
  auto f = xsym::function("f", xsym::inputs(), xsym::outputs(xsym::sum(w)), xsym::updates(xsym::update(w, w * 3.0)),
                          xsym::monitor_mode{pre, nullptr});
  f();
  REQUIRE(!seen.empty());
  for (double v : seen) CHECK(v == 1.0);
  CHECK(w.get_value()(0) == 3.0);
}

// With either of two variables first in the lock order (by address), so that one of the two
// orders is the one that waited for ever before: body(read, updated) gives a loop of calls
// (returning how many went wrong) that runs beside `calls` calls of g, which updates `read`
// and reads `updated`.
template <class Body>
void in_both_lock_orders(int calls, const char* what, Body body) {
  auto a = xsym::shared(0.0, "a"), b = xsym::shared(0.0, "b");
  for (const bool swap : {false, true}) {
    auto& read = swap ? b : a;
    auto& updated = swap ? a : b;
    read.set_value(0.0);
    updated.set_value(0.0);
    auto g = xsym::function("g", xsym::inputs(), xsym::outputs(read - updated), xsym::updates(xsym::update(read, read + 1.0)));
    auto f_calls = body(read, updated);
    int wrong = -1;
    run_or_report_deadlock(
        what, [&] { wrong = f_calls(); },
        [&] {
          for (int i = 0; i < calls; ++i) g();
        });
    CHECK(wrong == 0);
    CHECK(read.get_value()() == calls);
    CHECK(updated.get_value()() == calls);
  }
}

// DebugMode's twin computes from the values its call read and takes no lock: it used to lock
// every variable again while the call held the one it updates, waiting for a call that held
// the other and waited for that one.
TEST_CASE("a DebugMode call and a call that updates what it reads, in the other order, do not deadlock",
          "[threads][shared][modes]") {
  xsym_test::clean_config guard;
  const int calls = xsym_test::iterations(5000);
  in_both_lock_orders(calls, "DebugMode's twin", [&](auto& read, auto& updated) {
    // f updates `updated` and reads `read`.
    auto f = xsym::function("f", xsym::inputs(), xsym::outputs(read + updated),
                            xsym::updates(xsym::update(updated, updated + 1.0)), xsym::mode("DebugMode"));
    return [f = std::move(f), calls] {
      int errors = 0;
      for (int i = 0; i < calls; ++i) try {
          f();
        } catch (const std::exception&) {
          ++errors;
        }
      return errors;
    };
  });
}

// A MonitorMode callback's get_value of a variable its call only reads gives the value the call
// read, without the variable's lock, which another call may hold while it waits for the one
// this call holds.
TEST_CASE("a MonitorMode callback reads a variable its call only reads while another call updates it",
          "[threads][shared][modes]") {
  xsym_test::clean_config guard;
  const int calls = xsym_test::iterations(20000);
  in_both_lock_orders(calls, "MonitorMode callback's get_value", [&](auto& read, auto& updated) {
    auto seen = std::make_shared<std::vector<double>>();
    auto look = [seen, &read](const xsym::node_event&) { seen->push_back(read.get_value()()); };
    auto f = xsym::function("f", xsym::inputs(), xsym::outputs(read + updated),
                            xsym::updates(xsym::update(updated, updated + 1.0)), xsym::monitor_mode{look, nullptr});
    return [f = std::move(f), seen, calls] {
      int inconsistent = 0;
      for (int i = 0; i < calls; ++i) {
        seen->clear();
        const double out = std::get<0>(f());  // read + i: only f updates `updated`
        for (double v : *seen) inconsistent += v != out - i;
        inconsistent += seen->empty();
      }
      return inconsistent;
    };
  });
}

// A report printed while another thread's calls record into the profile reads each record whole
// (a copy taken under its lock): the call count and every node's agree, and under
// ThreadSanitizer no read races a call's writes.
TEST_CASE("a profile printed while calls record reads whole records", "[threads][profile]") {
  xsym_test::clean_config guard;
  auto stats = std::make_shared<xsym::profile_stats>("live", false);
  auto x = xsym::vector<double>("x");
  auto f = xsym::function("f", xsym::inputs(x), exp(x) * 2.0 + sin(x), xsym::profile(stats),
                          xsym::optimizer_excluding("fusion"));
  const xt::xtensor<double, 1> X = xt::ones<double>({64});
  const int calls = xsym_test::iterations(20000);
  std::atomic<bool> stop{false};
  int torn = 0, reports = 0;
  run_or_report_deadlock(
      "profile printed during calls",
      [&] {
        for (int i = 0; i < calls; ++i) f(X);
        stop = true;
      },
      [&] {
        while (!stop.load() || reports == 0) {
          for (const auto& p : stats->snapshot())
            for (auto c : p->node_calls) torn += c != p->calls;
          std::ostringstream os;
          stats->print_summary(os);
          reports += os.str().find("Function profiling") != std::string::npos;
        }
      });
  CHECK(torn == 0);
  CHECK(reports > 0);
  CHECK(stats->functions()[0]->calls == calls);
}
