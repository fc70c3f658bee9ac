// xsym over MPI, run by tests/mpi/run.sh as `mpirun -np 2`: every rank runs every test case in
// the same order (their collectives pair up). Written for any number of ranks.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <xsym/mpi.hpp>

namespace {

// Rank r's value at flat index i: small integers, so every sum and product is exact.
double value_at(int r, std::int64_t i, xsym::reduce_op op) {
  if (op == xsym::reduce_op::prod) return 1 + (r + i) % 3;
  return static_cast<double>((3 * r + 5 * i) % 7) - 3;
}

double combine(xsym::reduce_op op, double a, double b) {
  switch (op) {
    case xsym::reduce_op::sum: return a + b;
    case xsym::reduce_op::prod: return a * b;
    case xsym::reduce_op::max: return std::max(a, b);
    default: return std::min(a, b);
  }
}

template <class T, std::size_t N>
void check_allreduce(std::array<std::size_t, N> shape, xsym::reduce_op op) {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto x = xsym::tensor<T, N>("x");
  auto f = xsym::function("allreduce", xsym::inputs(x), xsym::mpi::allreduce(x, op));
  xt::xtensor<T, N> in = xt::empty<T>(shape);
  for (std::size_t i = 0; i < in.size(); ++i) in.data()[i] = static_cast<T>(value_at(me, static_cast<std::int64_t>(i), op));
  const xt::xtensor<T, N> got = f(in);
  REQUIRE(got.shape() == in.shape());
  for (std::size_t i = 0; i < got.size(); ++i) {
    double want = value_at(0, static_cast<std::int64_t>(i), op);
    if constexpr (std::is_same_v<T, bool>) want = want != 0;
    for (int r = 1; r < p; ++r) {
      double v = value_at(r, static_cast<std::int64_t>(i), op);
      if constexpr (std::is_same_v<T, bool>) v = v != 0;
      want = combine(op, want, v);
    }
    INFO("dtype " << xsym::dtype_name(xsym::dtype_of<T>()) << ", rank " << N << ", element " << i);
    CHECK(static_cast<double>(got.data()[i]) == want);
  }
}

// A communicator of its own whose MPI errors come back as exceptions: the tests that put the
// ranks out of step leave world() usable, and without the checks they test fail instead of aborting.
std::shared_ptr<const xsym::mpi::communicator> own_comm(const char* name) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return std::make_shared<const xsym::mpi::communicator>(c, name);
}

// Max or min over the ranks where element j is NaN on rank j only (j < p), else value_at.
template <class T>
void check_nan(xsym::reduce_op op) {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto x = xsym::vector<T>("x");
  auto f = xsym::function("nan", xsym::inputs(x), xsym::mpi::allreduce(x, op));
  const auto n = static_cast<std::size_t>(p + 2);
  xt::xtensor<T, 1> in = xt::empty<T>({n});
  for (std::size_t j = 0; j < n; ++j)
    in(j) = j == static_cast<std::size_t>(me) ? std::numeric_limits<T>::quiet_NaN()
                                               : static_cast<T>(value_at(me, static_cast<std::int64_t>(j), op));
  const xt::xtensor<T, 1> got = f(in);
  for (std::size_t j = 0; j < n; ++j) {
    INFO(xsym::dtype_name(xsym::dtype_of<T>()) << (op == xsym::reduce_op::max ? " max" : " min") << ", element " << j);
    if (j < static_cast<std::size_t>(p)) {
      CHECK(std::isnan(got(j)));
      continue;
    }
    double want = value_at(0, static_cast<std::int64_t>(j), op);
    for (int r = 1; r < p; ++r) want = combine(op, want, value_at(r, static_cast<std::int64_t>(j), op));
    CHECK(static_cast<double>(got(j)) == want);
  }
}

template <class T>
void check_every_rank(xsym::reduce_op op) {
  check_allreduce<T, 0>({}, op);
  check_allreduce<T, 1>({7}, op);
  check_allreduce<T, 2>({3, 5}, op);
  check_allreduce<T, 3>({2, 3, 4}, op);
}

}  // namespace

TEST_CASE("AllReduce reduces every dtype and tensor rank over the ranks", "[mpi]") {
  using xsym::reduce_op;
  for (reduce_op op : {reduce_op::sum, reduce_op::prod, reduce_op::max, reduce_op::min}) {
    check_every_rank<std::int32_t>(op);
    check_every_rank<std::int64_t>(op);
    check_every_rank<float>(op);
    check_every_rank<double>(op);
  }
  check_every_rank<bool>(reduce_op::max);  // any
  check_every_rank<bool>(reduce_op::min);  // all
}

TEST_CASE("AllReduce max and min of floats are NaN where any rank's element is NaN, whichever rank holds it", "[mpi]") {
  for (xsym::reduce_op op : {xsym::reduce_op::max, xsym::reduce_op::min}) {
    check_nan<float>(op);
    check_nan<double>(op);
  }
}

TEST_CASE("AllReduce reads a strided argument and sums a computed value", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto a = xsym::matrix<double>("a");
  auto f = xsym::function("strided", xsym::inputs(a), xsym::mpi::allreduce(a * 2) + 1);
  xt::xtensor<double, 2> full = xt::empty<double>({4, 6});
  for (std::size_t i = 0; i < full.size(); ++i) full.data()[i] = static_cast<double>(i) + me;
  auto t = xt::transpose(full);  // a (6, 4) view with strides (1, 6)
  const xt::xtensor<double, 2> got = f(t);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      double want = 0;
      for (int r = 0; r < p; ++r) want += 2 * (full(j, i) - me + r);
      CHECK(got(i, j) == want + 1);
    }
}

TEST_CASE("ranks that disagree on the shape all get an error naming the node and both shapes, and go on", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  if (p < 2) return;
  auto v = xsym::vector<float>("v");
  auto w = xsym::shared(xt::xtensor<float, 1>{1, 2, 3}, "w");
  auto s = xsym::mpi::allreduce(v);
  auto f = xsym::function("mismatch", xsym::inputs(v), s, xsym::updates(xsym::update(w, w + sum(s))));
  const xt::xtensor<float, 1> bad = xt::ones<float>({static_cast<std::size_t>(4 + me)});
  try {
    (void)f(bad);
    FAIL("rank " << me << ": no error");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("AllReduce{sum}") != std::string::npos);
    CHECK(what.find("rank " + std::to_string(me) + " has float32 (" + std::to_string(4 + me) + ",)") != std::string::npos);
    CHECK(what.find("from (4,) to (" + std::to_string(3 + p) + ",)") != std::string::npos);
  }
  CHECK((w.get_value() == xt::xtensor<float, 1>{1, 2, 3}));  // the failed call changed nothing
  const xt::xtensor<float, 1> good = xt::ones<float>({4});
  const xt::xtensor<float, 1> sum = f(good);
  CHECK((sum == xt::xtensor<float, 1>(xt::ones<float>({4}) * static_cast<float>(p))));
}

TEST_CASE("a rank whose call fails before its AllReduce puts the ranks out of step: errors, not wrong sums", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  if (p < 2) return;
  const auto comm = own_comm("steps");
  auto x = xsym::matrix<double>("x");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2}, "w");
  auto f = xsym::function("step", xsym::inputs(x), xsym::mpi::allreduce(dot(x, w), xsym::reduce_op::sum, comm));
  // The last rank's first call fails in dot, before its AllReduce; every rank makes 4 calls.
  std::vector<std::string> errors(4);
  for (int i = 0; i < 4; ++i) {
    xt::xtensor<double, 2> in = xt::ones<double>({3, 2}) * double(i + 1);
    if (me == p - 1 && i == 0) in = xt::ones<double>({3, 3});
    try {
      const xt::xtensor<double, 1> got = f(in);
      for (std::size_t j = 0; j < 3; ++j) CHECK(got(j) == 3.0 * (i + 1) * p);  // a call that returns is right
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(i)] = e.what();
    }
  }
  const std::string last = "rank " + std::to_string(p - 1) + " is in AllReduce call 2";
  const std::string others = std::string(p > 2 ? " are" : " is") + " in AllReduce call 1";
  // The other ranks' first call and the last rank's second meet and both name every rank's count.
  const std::string& met = errors[me == p - 1 ? 1 : 0];
  INFO(met);
  CHECK(met.find("out of step") != std::string::npos);
  CHECK(met.find(last) != std::string::npos);
  CHECK(met.find(others) != std::string::npos);
  // Then every call fails at once.
  CHECK(errors[3].find("out of step") != std::string::npos);
}

TEST_CASE("DebugMode runs no collective of its own: one rank checked, or one rank's check failing, keeps the sums right",
          "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  const auto comm = own_comm("debug");
  const double ranks_sum = p * (p + 1) / 2.0;  // of me + 1
  auto v = xsym::vector<double>("v"), u = xsym::vector<double>("u");
  // Rank 0 in DebugMode, the others not: its reference and twin must not pair with their next calls.
  auto one = xsym::function("debug_one", xsym::inputs(v), xsym::mpi::allreduce(v, xsym::reduce_op::sum, comm),
                            xsym::mode(me == 0 ? "DebugMode" : "FAST_RUN"));
  for (int i = 0; i < 3; ++i) {
    const xt::xtensor<double, 1> got = one(xt::xtensor<double, 1>(xt::ones<double>({2}) * double((i + 1) * (me + 1))));
    CHECK(got(0) == (i + 1) * ranks_sum);
    CHECK(got(1) == (i + 1) * ranks_sum);
  }
  // Every rank in DebugMode; the last rank's first call fails its NaN check after the AllReduce.
  auto all = xsym::function("debug_all", xsym::inputs(v, u), log(xsym::mpi::allreduce(v, xsym::reduce_op::sum, comm) + u),
                            xsym::mode("DebugMode"));
  for (int i = 0; i < 3; ++i) {
    const xt::xtensor<double, 1> in = xt::ones<double>({2}) * double((i + 1) * (me + 1));
    const bool fails = me == p - 1 && i == 0;
    const xt::xtensor<double, 1> shift = xt::ones<double>({2}) * (fails ? -1e6 : 0.0);
    if (fails) {
      CHECK_THROWS_WITH(all(in, shift), Catch::Contains("NaN"));
      continue;
    }
    const xt::xtensor<double, 1> got = all(in, shift);
    CHECK(got(0) == Approx(std::log((i + 1) * ranks_sum)));
  }
}

TEST_CASE("ranks in different xsym collectives all get an error naming what each one does", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  if (p < 2) return;
  const auto comm = own_comm("kinds");
  auto stats = std::make_shared<xsym::profile_stats>("kinds", false);
  auto x = xsym::matrix<double>("x");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2}, "w");
  auto f = xsym::function("step", xsym::inputs(x), xsym::mpi::allreduce(dot(x, w), xsym::reduce_op::sum, comm),
                          xsym::profile(stats));
  // The last rank's call fails before its AllReduce; it goes on to merge profiles while the others reduce.
  std::string error;
  try {
    if (me == p - 1) {
      CHECK_THROWS_AS(f(xt::xtensor<double, 2>(xt::ones<double>({3, 3}))), xsym::shape_error);
      (void)xsym::mpi::merge_profiles({stats}, comm);
    } else {
      (void)f(xt::xtensor<double, 2>(xt::ones<double>({3, 2})));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  INFO(error);
  CHECK(error.find("rank " + std::to_string(p - 1) + " is merging profiles (AllReduce calls so far: 1)") != std::string::npos);
  CHECK(error.find(std::string(p > 2 ? " are" : " is") + " in AllReduce call 1") != std::string::npos);
}

TEST_CASE("200 steps of logistic regression over the ranks equal one process on the whole data", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  const std::size_t n = 96, feats = 24;
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  xt::xtensor<double, 2> X = xt::empty<double>({n, feats});
  xt::xtensor<double, 1> Y = xt::empty<double>({n});
  xt::xtensor<double, 1> w0 = xt::empty<double>({feats});
  for (auto& v : X) v = normal(rng);
  for (auto& v : Y) v = normal(rng) > 0 ? 1 : 0;
  for (auto& v : w0) v = normal(rng);
  const std::size_t lo = n * static_cast<std::size_t>(me) / static_cast<std::size_t>(p);
  const std::size_t hi = n * static_cast<std::size_t>(me + 1) / static_cast<std::size_t>(p);
  xt::xtensor<double, 2> Xs = xt::empty<double>({hi - lo, feats});
  xt::xtensor<double, 1> Ys = xt::empty<double>({hi - lo});
  for (std::size_t i = lo; i < hi; ++i) {
    for (std::size_t j = 0; j < feats; ++j) Xs(i - lo, j) = X(i, j);
    Ys(i - lo) = Y(i);
  }
  auto x = xsym::matrix<double>("x");
  auto y = xsym::vector<double>("y");
  // Sharded: every rank starts from a value of its own, then rank 0's is broadcast.
  auto w = xsym::shared(xt::xtensor<double, 1>(w0 + me), "w");
  auto b = xsym::shared(0.5 * me, "b");
  auto p1 = 1 / (1 + exp(-dot(x, w) - b));
  auto xent = -y * log(p1) - (1 - y) * log(1 - p1);
  auto [gws, gbs] = xsym::grad(sum(xent), w, b);
  auto gw = xsym::mpi::allreduce(gws) / double(n) + 0.02 * w;
  auto gb = xsym::mpi::allreduce(gbs) / double(n);
  auto train = xsym::function("train", xsym::inputs(x, y), sum(xent),
                              xsym::updates(xsym::update(w, w - 0.1 * gw), xsym::update(b, b - 0.1 * gb)));
  if (p > 1) CHECK_THROWS_AS(xsym::mpi::check_shared(train), xsym::mpi::replica_error);
  xsym::mpi::broadcast_shared(train);
  CHECK((w.get_value() == w0));
  CHECK(b.get_value()(0) == 0.0);
  for (int i = 0; i < 200; ++i) train(Xs, Ys);
  xsym::mpi::check_shared(train);
  // One process, the whole data.
  auto w1 = xsym::shared(w0, "w1");
  auto b1 = xsym::shared(0.0, "b1");
  auto q = 1 / (1 + exp(-dot(x, w1) - b1));
  auto cost1 = mean(-y * log(q) - (1 - y) * log(1 - q)) + 0.01 * sum(w1 * w1);
  auto [gw1, gb1] = xsym::grad(cost1, w1, b1);
  auto train1 = xsym::function("train1", xsym::inputs(x, y), cost1,
                               xsym::updates(xsym::update(w1, w1 - 0.1 * gw1), xsym::update(b1, b1 - 0.1 * gb1)));
  for (int i = 0; i < 200; ++i) train1(X, Y);
  const auto ws = w.get_value(), wf = w1.get_value();
  for (std::size_t j = 0; j < feats; ++j) CHECK(std::abs(ws(j) - wf(j)) <= 1e-10 * std::abs(wf(j)));
  CHECK(std::abs(b.get_value()(0) - b1.get_value()(0)) <= 1e-10 * std::abs(b1.get_value()(0)));
  // Far from the first step's values: 200 steps moved them.
  CHECK(std::abs(wf(0) - w0(0)) > 1e-3);
}

TEST_CASE("the check mode names the first shared variable whose copies differ", "[mpi]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto v = xsym::vector<double>("v");
  auto a = xsym::shared(xt::xtensor<double, 1>{1, 2}, "a");
  auto c = xsym::shared(xt::xtensor<double, 1>{3, 4}, "c");
  // a's update reads this rank's own input: the copies drift apart unless every rank passes the same.
  auto f = xsym::function("drift", xsym::inputs(v), sum(v),
                          xsym::updates(xsym::update(c, c * 2), xsym::update(a, a + v)));
  auto step = xsym::mpi::checked(f);
  step(xt::xtensor<double, 1>{1, 1});  // the same everywhere
  CHECK((a.get_value() == xt::xtensor<double, 1>{2, 3}));
  if (p < 2) return;
  try {
    step(xt::xtensor<double, 1>{1, static_cast<double>(me)});
    FAIL("no error");
  } catch (const xsym::mpi::replica_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("shared variable 'a' of 'drift'") != std::string::npos);
    CHECK(what.find("rank(s) 1") != std::string::npos);
  }
}

TEST_CASE("merged profiles sum the ranks' calls and keep each node's fastest and slowest rank", "[mpi][profile]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto stats = std::make_shared<xsym::profile_stats>("merged", false);
  auto v = xsym::vector<double>("v");
  // g reduces over the ranks: every rank calls it as often. local does not: rank r calls it 3 + 2r times.
  auto g = xsym::function("g", xsym::inputs(v), xsym::mpi::allreduce(exp(v) * 2), xsym::profile(stats));
  auto local = xsym::function("local", xsym::inputs(v), exp(v) * 3, xsym::profile(stats));
  const xt::xtensor<double, 1> ones = xt::ones<double>({1000});
  for (int i = 0; i < 4; ++i) (void)g(ones);
  for (int i = 0; i < 3 + 2 * me; ++i) (void)local(ones);
  const auto merged = xsym::mpi::merge_profiles({stats});
  REQUIRE(merged.same);
  if (me != 0) {
    CHECK(merged.stats.empty());
    return;
  }
  REQUIRE(merged.stats.size() == 1);
  const auto fns = merged.stats[0]->functions();
  REQUIRE(fns.size() == 2);
  std::int64_t want_local = 0;
  for (int r = 0; r < p; ++r) want_local += 3 + 2 * r;
  for (std::size_t k = 0; k < 2; ++k) {
    const auto& m = *fns[k];
    const auto& mine = *stats->functions()[k];
    const std::int64_t want = k == 0 ? 4 * p : want_local;
    CHECK(m.calls == want);
    CHECK(m.ranks == p);
    // Times go through seconds and back to ticks: within a tick of rank 0's own.
    const double tick = xsym::detail::seconds_per_tick();
    for (std::size_t i = 0; i < m.node_calls.size(); ++i) {
      CHECK(m.node_calls[i] == want);
      CHECK(m.node_rank_min_s[i] <= m.node_rank_max_s[i]);
      CHECK(m.node_rank_min_s[i] <= mine.node_time(i) + tick);
      CHECK(mine.node_time(i) <= m.node_rank_max_s[i] + tick);
      CHECK(m.node_time(i) >= mine.node_time(i) - tick);
    }
  }
  std::ostringstream text;
  merged.stats[0]->print_summary(text);
  INFO(text.str());
  CHECK(text.str().find("Time in " + std::to_string(4 * p + want_local) + " calls") != std::string::npos);
  // One rank: nothing to compare, no line.
  CHECK((text.str().find("over " + std::to_string(p) + " ranks: fastest") != std::string::npos) == (p > 1));
  CHECK(text.str().find("allreduce: " + std::to_string(p) + " ranks of MPI_COMM_WORLD, 8000 bytes per rank per call") !=
        std::string::npos);
  std::ostringstream json;
  xsym::write_json(*merged.stats[0], json);
  CHECK((json.str().find("\"rank_max_s\"") != std::string::npos) == (p > 1));
  CHECK(json.str().find("\"wait_s\"") != std::string::npos);
}

TEST_CASE("merged flops and bytes are the whole job's: every rank's calls at its own shapes", "[mpi][profile]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  auto stats = std::make_shared<xsym::profile_stats>("work", false);
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("local", xsym::inputs(v), exp(v) * 3, xsym::profile(stats));
  // Rank r: 2 + r calls on 1000 (r + 1) elements.
  const xt::xtensor<double, 1> in = xt::ones<double>({static_cast<std::size_t>(1000 * (me + 1))});
  for (int i = 0; i < 2 + me; ++i) (void)f(in);
  // Each rank's own rows (one process's report at its shapes): flops and bytes per call.
  const auto own = xsym::detail::apply_rows(*stats->functions()[0], false, nullptr);
  std::vector<double> mine;
  for (const auto& r : own) {
    mine.push_back(r.flops);
    mine.push_back(r.bytes);
  }
  std::vector<double> all(mine.size() * static_cast<std::size_t>(p));
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()), MPI_DOUBLE,
             0, MPI_COMM_WORLD);
  const auto merged = xsym::mpi::merge_profiles({stats});
  REQUIRE(merged.same);
  if (me != 0) return;
  const auto rows = xsym::detail::apply_rows(*merged.stats[0]->functions()[0], false, nullptr);
  REQUIRE(rows.size() == own.size());
  double calls = 0;
  for (int r = 0; r < p; ++r) calls += 2 + r;
  bool some = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double flops = 0, bytes = 0;  // over every call of every rank
    for (int r = 0; r < p; ++r) {
      flops += (2 + r) * all[static_cast<std::size_t>(r) * mine.size() + 2 * i];
      bytes += (2 + r) * all[static_cast<std::size_t>(r) * mine.size() + 2 * i + 1];
    }
    if (!(flops > 0)) continue;
    some = true;
    INFO("node " << i << ": " << rows[i].label);
    CHECK(rows[i].flops == Approx(flops / calls).epsilon(1e-12));
    CHECK(rows[i].bytes == Approx(bytes / calls).epsilon(1e-12));
    CHECK(rows[i].gflops_per_s() == Approx(flops / rows[i].time / 1e9).epsilon(1e-9));
  }
  CHECK(some);
}

TEST_CASE("an environment made while MPI runs leaves the exit profiles alone when destroyed", "[mpi][profile]") {
  auto stats = std::make_shared<xsym::profile_stats>("nested environment");
  xsym::register_for_exit_report(stats);
  auto v = xsym::vector<double>("v");
  auto f = xsym::function("nested", xsym::inputs(v), v * 2, xsym::profile(stats));
  (void)f(xt::xtensor<double, 1>{1, 2});
  {
    xsym::mpi::environment inner;
  }
  auto& reg = xsym::detail::exit_reports();
  std::lock_guard lock(reg.mutex);
  const auto at = std::find(reg.stats.begin(), reg.stats.end(), stats);
  CHECK(at != reg.stats.end());
  if (at != reg.stats.end()) reg.stats.erase(at);
}

TEST_CASE("at exit, rank 0 prints the merged report and every rank writes its JSON to {rank}", "[mpi][profile]") {
  const int me = xsym::mpi::rank(), p = xsym::mpi::size();
  char dir_template[] = "/tmp/xsym-mpi-XXXXXX";
  std::string dir;
  if (me == 0) dir = mkdtemp(dir_template);
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  const std::string pattern = dir + "/profile-{rank}.json";
  xsym::config.set("profiling.destination", pattern);
  auto stats = std::make_shared<xsym::profile_stats>("at exit");
  xsym::register_for_exit_report(stats);
  auto other = std::make_shared<xsym::profile_stats>("another");
  xsym::register_for_exit_report(other);
  auto v = xsym::vector<float>("v");
  auto f = xsym::function("h", xsym::inputs(v), v + 1, xsym::profile(stats));
  auto g = xsym::function("k", xsym::inputs(v), v * 2, xsym::profile(other));
  for (int i = 0; i < 2 + me; ++i) (void)f(xt::xtensor<float, 1>{1, 2, 3});
  (void)g(xt::xtensor<float, 1>{1});
  // A file already at the path is replaced.
  std::ofstream(dir + "/profile-" + std::to_string(me) + ".json") << "stale";
  std::ostringstream captured;
  auto* old = std::cerr.rdbuf(captured.rdbuf());
  xsym::mpi::print_merged_profiles();
  std::cerr.rdbuf(old);
  xsym::config.set("profiling.destination", "stderr");
  std::ifstream in(dir + "/profile-" + std::to_string(me) + ".json");
  REQUIRE(in);
  std::stringstream json;
  json << in.rdbuf();
  // One JSON document holding both profiles' functions.
  CHECK(json.str().rfind("{\n  \"message\": ", 0) == 0);
  CHECK(json.str().find("stale") == std::string::npos);
  CHECK(json.str().find("\"message\"", 10) == std::string::npos);
  CHECK(json.str().find("\"name\": \"h\",\n      \"calls\": " + std::to_string(2 + me)) != std::string::npos);
  CHECK(json.str().find("\"name\": \"k\",\n      \"calls\": 1") != std::string::npos);
  std::int64_t want = 0;
  for (int r = 0; r < p; ++r) want += 2 + r;
  if (me == 0) {
    INFO(captured.str());
    CHECK(captured.str().find("Message: at exit") != std::string::npos);
    CHECK(captured.str().find("Time in " + std::to_string(want) + " calls") != std::string::npos);
  } else {
    CHECK(captured.str().empty());
  }
  // Taken out of the exit report: nothing is printed twice.
  auto& reg = xsym::detail::exit_reports();
  std::lock_guard lock(reg.mutex);
  CHECK(reg.stats.empty());
}

TEST_CASE("allreduce refuses what MPI cannot reduce, at graph-building time", "[mpi]") {
  auto b = xsym::vector<bool>("b");
  CHECK_THROWS_WITH(xsym::mpi::allreduce(b), Catch::Contains("sum and prod are not defined on bool"));
  auto v = xsym::vector<double>("v");
  CHECK_THROWS_WITH(xsym::mpi::allreduce(v, xsym::reduce_op::mean), Catch::Contains("divide the sum"));
  CHECK_THROWS_WITH(xsym::grad(sum(xsym::mpi::allreduce(v)), v), Catch::Contains("no gradient through AllReduce{sum}"));
}

// Run alone (ctest mpi_after_finalize): it ends MPI.
TEST_CASE("after MPI_Finalize, AllReduce, check_shared, broadcast and merge_profiles throw", "[.after_finalize]") {
  auto v = xsym::vector<double>("v");
  auto w = xsym::shared(xt::xtensor<double, 1>{1, 2}, "w");
  auto stats = std::make_shared<xsym::profile_stats>("late", false);
  auto f = xsym::function("late", xsym::inputs(v), xsym::mpi::allreduce(v) + sum(w), xsym::profile(stats));
  const xt::xtensor<double, 1> one{1.0};
  (void)f(one);
  MPI_Finalize();
  CHECK_THROWS_WITH(f(one), Catch::Contains("MPI is not running"));
  CHECK_THROWS_AS(xsym::mpi::check_shared(f), std::logic_error);
  CHECK_THROWS_AS(xsym::mpi::broadcast(w), std::logic_error);
  CHECK_THROWS_AS(xsym::mpi::merge_profiles({stats}), std::logic_error);
}

int main(int argc, char** argv) {
  xsym::mpi::environment env(argc, argv);
  Catch::Session runner;
  // Rank 0 reports; the others stay quiet unless something fails.
  if (env.rank() != 0) runner.configData().reporterName = "compact";
  const int failed = runner.run(argc, argv);
  int off = 0;
  MPI_Finalized(&off);
  if (off) return failed != 0;  // a test ended MPI: each rank answers for itself
  int any = failed != 0;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && env.rank() == 0) std::fprintf(stderr, "test_mpi: a test failed on some rank\n");
  return any;
}
