#ifndef XSYM_TESTS_COMPILE_RANDOM_GRAPH_HPP
#define XSYM_TESTS_COMPILE_RANDOM_GRAPH_HPP

// Random expression graphs for differential tests: tests/compile/test_equivalence.cpp runs them
// under every option set, tests/fuzz/fuzz_graphs.cpp decodes a fuzzer's bytes into them. No
// Catch2 here, so that the fuzz target can include it.
//
// A graph is data: an element type, three call shapes, a data seed and a list of steps over a
// pool (five leaves, then one entry per step, each a matrix whose rows and columns are either
// full or statically 1). It prints as one line (dump) and parses back (parse), so that a failure
// is replayed from what the test printed.
//
// The expected values come from an interpreter written here in long double, apart from the
// library's kernels. Next to each element it keeps a bound on the error the library may make
// (each operation's rounding in the graph's type, propagated through the later ones), so that
// float32 graphs, cancellations, NaN and infinities are compared by what a correct library can
// return rather than by one fixed tolerance: NaN where the reference is NaN, the same infinity,
// elsewhere within twice the bound. Where the bound straddles a discontinuity (a comparison, a
// truncation, overflow to infinity) the element is "unknown" and not compared.
//
// Left out on purpose (tests/edges checks each op at these edges, in a batch and in the tail):
//  - pow's special values and its accuracy in SIMD batches (up to ~100 ulp): pow only in graphs
//    without special inputs, of a base >= 1, allowed 128 ulp, unknown for a non-finite operand;
//  - exp/expm1 near overflow, float32 exp/sigmoid results in the subnormal range, sigmoid(-x)
//    and softplus(x) sharing one exp: exp and expm1 only of tanh, and every operation may be
//    off by the type's smallest normal number in absolute terms;
//  - the sign of zero from negation (0 - x) and log1p/expm1(-0): zeros compare equal;
//  - xsimd's float64 exp (tanh, sigmoid, softplus, expm1 take it) converts a NaN or an infinity
//    to int64 with a plain C++ cast, undefined behaviour that make test-sanitize reports: no
//    op that takes it (takes_exp, and casts through int32 of a tanh) in float64 graphs with
//    special inputs.
// (#37's beta fold, inf - inf turned into inf, needs w - c (c w + dot(m, v)); these graphs have
// not made one in 100000 graphs.)
#include <xsym/xsym.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace xsym_test::rg {

// ---- choices ----------------------------------------------------------------------------------

/// Where a graph's choices come from: a seeded generator, or a fuzzer's bytes.
class chooser {
 public:
  virtual ~chooser() = default;
  /// A number in [0, n), n >= 1.
  virtual std::uint32_t below(std::uint32_t n) = 0;
  virtual std::uint64_t bits64() = 0;
  bool chance(std::uint32_t percent) { return below(100) < percent; }
};

// SplitMix64: fixed by its definition, so a seed means the same graph with any standard library.
inline std::uint64_t next_mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class seeded_chooser final : public chooser {
 public:
  explicit seeded_chooser(std::uint64_t seed) : m_state(seed) {}
  std::uint32_t below(std::uint32_t n) override { return static_cast<std::uint32_t>(bits64() % n); }
  std::uint64_t bits64() override { return next_mix(m_state); }

 private:
  std::uint64_t m_state;
};

/// A fuzzer's input as choices: one byte for a choice among at most 256, more for larger ones,
/// zeros once the bytes run out (so every input is a graph, and short inputs are small ones).
class byte_chooser final : public chooser {
 public:
  byte_chooser(const std::uint8_t* data, std::size_t size) : m_data(data), m_size(size) {}
  std::uint32_t below(std::uint32_t n) override {
    std::uint32_t v = byte();
    if (n > 256) v = v << 8 | byte();
    if (n > 65536) v = v << 16 | byte() << 8 | byte();
    return v % n;
  }
  std::uint64_t bits64() override {
    std::uint64_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }

 private:
  std::uint32_t byte() { return m_pos < m_size ? m_data[m_pos++] : 0u; }
  const std::uint8_t* m_data;
  std::size_t m_size, m_pos = 0;
};

/// The seed of graph `index` of a run seeded with `seed`: each graph is made on its own, so one
/// can be rebuilt without the ones before it.
inline std::uint64_t graph_seed(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t s = seed ^ (index * 0xd1342543de82ef95ull);
  return next_mix(s);
}

// ---- graphs -----------------------------------------------------------------------------------

enum class elem : std::uint8_t { float32, float64, int32, int64 };
inline constexpr const char* elem_names[] = {"float32", "float64", "int32", "int64"};
inline bool is_float(elem t) { return t == elem::float32 || t == elem::float64; }

// name, operands, allowed in integer graphs, allowed with NaN/infinite inputs.
// In the build and the reference below: a, b, c are pool entries, k a constant, p a variant.
#define XSYM_RG_OPS(X)                                                                                \
  X(add, 2, 1, 1) X(sub, 2, 1, 1) X(mul, 2, 1, 1) X(mul_tanh, 2, 0, 1) X(div, 2, 0, 1)                \
  X(exp_tanh, 1, 0, 1) X(log_sq, 1, 0, 1) X(sqrt_abs, 1, 0, 1) X(tanh, 1, 0, 1) X(sigmoid, 1, 0, 1)   \
  X(softplus, 1, 0, 1) X(abs, 1, 1, 1) X(neg, 1, 1, 1) X(sqr, 1, 1, 1) X(maximum, 2, 1, 1)            \
  X(minimum, 2, 1, 1) X(switch_gt, 3, 1, 1) X(cast_cmp, 3, 1, 1) X(pow, 2, 0, 0) X(weak_mul, 1, 1, 1) \
  X(weak_rsub, 1, 1, 1) X(weak_add, 1, 1, 1) X(log1m_sigmoid, 1, 0, 1) X(log_sigmoid, 1, 0, 1)       \
  X(expm1_tanh, 1, 0, 1) X(log1p_sq, 1, 0, 1) X(times_one, 1, 1, 1) X(select, 3, 1, 1)                \
  X(cast_round, 1, 1, 1) X(t_add, 2, 1, 1) X(t_sqr_sub, 2, 1, 1) X(reduce, 1, 1, 1)                   \
  X(reduce_t, 1, 1, 1) X(dot_mv, 2, 1, 1) X(dot_vm, 2, 1, 1) X(dot_mm, 3, 1, 1) X(dot_vv, 2, 1, 1)         \
  X(sigmoid_softplus, 1, 0, 1) X(sin, 1, 0, 1) X(arctan, 1, 0, 1) X(set_inner, 2, 1, 1)

enum class gop : std::uint8_t {
#define XSYM_RG_ENUM(name, ...) name,
  XSYM_RG_OPS(XSYM_RG_ENUM)
#undef XSYM_RG_ENUM
      count
};

struct op_info {
  const char* name;
  int arity;
  bool ints, specials;
};
inline const op_info& info(gop o) {
  static constexpr op_info table[] = {
#define XSYM_RG_INFO(name, arity, ints, specials) {#name, arity, ints != 0, specials != 0},
      XSYM_RG_OPS(XSYM_RG_INFO)
#undef XSYM_RG_INFO
  };
  return table[static_cast<int>(o)];
}
inline bool is_reduction(gop o) { return o == gop::reduce || o == gop::reduce_t; }
inline bool is_product(gop o) { return o == gop::dot_mv || o == gop::dot_vm || o == gop::dot_mm || o == gop::dot_vv; }
// set_inner(a, b): a with its interior a[1:-1, 1:-1] set to itself plus b[2:, :-2] (element
// (i, j) adds b's one row below and one column left): set_subtensor of an elementwise value, one
// node that writes the region, its inputs row-strided views.
inline bool is_elementwise(gop o) { return !is_reduction(o) && !is_product(o) && o != gop::set_inner; }
// The ops whose kernels take a float64 exp or tanh (xsimd's; see make_graph).
inline bool takes_exp(gop o) {
  switch (o) {
    case gop::mul_tanh: case gop::exp_tanh: case gop::tanh: case gop::sigmoid: case gop::softplus: case gop::pow:
    case gop::log1m_sigmoid: case gop::log_sigmoid: case gop::expm1_tanh: case gop::sigmoid_softplus:
      return true;
    default: return false;
  }
}
inline bool uses_k(gop o) { return o == gop::weak_mul || o == gop::weak_rsub || o == gop::weak_add; }
inline bool uses_axis(gop o) { return is_reduction(o); }

// The names of p, per op that has variants.
inline constexpr const char* comparison_names[] = {"gt", "lt", "ge", "le", "eq", "ne"};
inline constexpr const char* reduction_names[] = {"sum", "prod", "max", "min", "mean"};
inline constexpr const char* association_names[] = {"left", "right"};  // (x y')z or x(y'z)
enum : int { r_sum, r_prod, r_max, r_min, r_mean };
inline int variants(gop o) {
  switch (o) {
    case gop::select: return 6;
    case gop::cast_round: return 4;  // the element type it goes through (elem)
    case gop::reduce:
    case gop::reduce_t: return 5;
    case gop::dot_mm: return 2;
    default: return 0;
  }
}
inline const char* variant_name(gop o, int p) {
  switch (o) {
    case gop::select: return comparison_names[p];
    case gop::cast_round: return elem_names[p];
    case gop::reduce:
    case gop::reduce_t: return reduction_names[p];
    case gop::dot_mm: return association_names[p];
    default: return "";
  }
}

struct step {
  gop op = gop::add;
  int a = 0, b = 0, c = 0;  // pool indices; those past the op's arity are unused
  double k = 0;             // weak_* constant
  int p = 0;                // variant (variant_name)
  int axis = 0;             // reductions: 0, 1 or -1 for all
};

struct shape2 {
  std::size_t rows = 1, cols = 1;
};

/// The leaves: a (rows x cols), b (a vector of cols, as a row), c (a column), d (a scalar, as
/// 1 x 1) and e (cols x rows, transposed).
inline constexpr int n_leaves = 5;

struct graph {
  elem type = elem::float64;
  bool specials = false;  // inputs hold NaN, infinities and signed zeros (floats), extremes (ints)
  std::uint64_t data_seed = 0;
  std::array<shape2, 3> shapes{};  // the function is called on one data set of each shape
  std::vector<step> steps;
  int inter = n_leaves;  // a pool entry returned besides the last one
};

// Which dimensions of a pool entry are statically 1.
struct dims_class {
  bool r1 = false, c1 = false;
};

inline dims_class leaf_class(int i) {
  static constexpr dims_class leaves[n_leaves] = {{false, false}, {true, false}, {false, true}, {true, true}, {false, false}};
  return leaves[i];
}

/// The class of a step's result, or nothing when its operands do not fit (products).
inline std::optional<dims_class> result_class(const step& s, const std::vector<dims_class>& pool) {
  const dims_class x = pool[static_cast<std::size_t>(s.a)];
  const dims_class y = pool[static_cast<std::size_t>(info(s.op).arity > 1 ? s.b : s.a)];
  const dims_class z = pool[static_cast<std::size_t>(info(s.op).arity > 2 ? s.c : s.a)];
  switch (s.op) {
    case gop::reduce:
    case gop::reduce_t: {
      if (s.axis < 0) return dims_class{true, true};
      const bool over_rows = (s.axis == 0) == (s.op == gop::reduce);
      return over_rows ? dims_class{true, x.c1} : dims_class{x.r1, true};
    }
    case gop::dot_mv:
      if (x.c1 != y.c1) return std::nullopt;
      return dims_class{x.r1, true};
    case gop::dot_vm:
      if (x.r1 != y.r1) return std::nullopt;
      return dims_class{true, x.c1};
    case gop::dot_mm:
      if (x.c1 != y.c1 || y.r1 != z.r1) return std::nullopt;
      return dims_class{x.r1, z.c1};
    case gop::dot_vv:
      if (x.c1 != y.c1) return std::nullopt;
      return dims_class{true, true};
    case gop::set_inner:  // both of the call's full shape
      if (x.r1 || x.c1 || y.r1 || y.c1) return std::nullopt;
      return dims_class{false, false};
    default:
      return dims_class{x.r1 && y.r1 && z.r1, x.c1 && y.c1 && z.c1};
  }
}

/// "" when every step reads earlier entries with fitting shapes and its variant exists.
inline std::string check_graph(const graph& g) {
  std::vector<dims_class> pool;
  for (int i = 0; i < n_leaves; ++i) pool.push_back(leaf_class(i));
  for (std::size_t i = 0; i < g.steps.size(); ++i) {
    const step& s = g.steps[i];
    const int n = static_cast<int>(pool.size());
    const std::string where = "step " + std::to_string(i) + ": ";
    if (static_cast<int>(s.op) >= static_cast<int>(gop::count)) return where + "unknown op";
    for (int j = 0; j < info(s.op).arity; ++j) {
      const int v = j == 0 ? s.a : j == 1 ? s.b : s.c;
      if (v < 0 || v >= n) return where + "operand " + std::to_string(v) + " is not an earlier entry";
    }
    if (variants(s.op) && (s.p < 0 || s.p >= variants(s.op))) return where + "no variant " + std::to_string(s.p);
    if (!variants(s.op) && s.p != 0) return where + "no variants";
    if (uses_axis(s.op) && (s.axis < -1 || s.axis > 1)) return where + "axis " + std::to_string(s.axis);
    if (!is_float(g.type) && !info(s.op).ints) return where + std::string(info(s.op).name) + " is not an integer op";
    if (s.op == gop::cast_round) {
      const elem via = static_cast<elem>(s.p);
      const bool ok = is_float(g.type) ? (via != g.type && via != elem::int64) :
                      g.type == elem::int32 ? (via == elem::int64 || via == elem::float64) : via == elem::int32;
      if (!ok) return where + "cast_round through " + elem_names[s.p] + " is not generated";
    }
    const auto cls = result_class(s, pool);
    if (!cls) return where + "operand shapes do not fit " + info(s.op).name;
    pool.push_back(*cls);
  }
  if (g.steps.empty()) return "no steps";
  if (g.inter < n_leaves || g.inter >= static_cast<int>(pool.size())) return "inter is not a step";
  for (const shape2& sh : g.shapes)
    if (sh.rows * sh.cols > 4096) return "a shape over 4096 elements";
  return "";
}

inline std::vector<dims_class> pool_classes(const graph& g) {
  std::vector<dims_class> pool;
  for (int i = 0; i < n_leaves; ++i) pool.push_back(leaf_class(i));
  for (const step& s : g.steps) pool.push_back(result_class(s, pool).value_or(dims_class{}));
  return pool;
}

// ---- dump and parse ---------------------------------------------------------------------------

/// One line: "float32 specials=1 data=123 shapes=1x1,3x7,2x300 inter=7 | add 0 1 | reduce max 5 axis=1 | ...".
inline std::string dump(const graph& g) {
  std::ostringstream os;
  os.precision(17);
  os << elem_names[static_cast<int>(g.type)] << " specials=" << g.specials << " data=" << g.data_seed << " shapes=";
  for (std::size_t i = 0; i < g.shapes.size(); ++i) os << (i ? "," : "") << g.shapes[i].rows << "x" << g.shapes[i].cols;
  os << " inter=" << g.inter;
  for (const step& s : g.steps) {
    os << " | " << info(s.op).name;
    if (variants(s.op)) os << " " << variant_name(s.op, s.p);
    for (int j = 0; j < info(s.op).arity; ++j) os << " " << (j == 0 ? s.a : j == 1 ? s.b : s.c);
    if (uses_k(s.op)) os << " k=" << s.k;
    if (uses_axis(s.op)) os << " axis=" << s.axis;
  }
  return os.str();
}

/// The graph a dump describes; throws std::invalid_argument with the reason when it is not one.
inline graph parse(std::string_view text) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("random graph dump: " + why); };
  auto number = [&](const std::string& s, const std::string& what) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) fail("bad " + what + " '" + s + "'");
    return v;
  };
  std::vector<std::string> parts(1);
  for (char ch : text) {
    if (ch == '|') parts.emplace_back();
    else parts.back() += ch;
  }
  graph g;
  std::istringstream head(parts[0]);
  std::string tok;
  head >> tok;
  const auto* t = std::find_if(std::begin(elem_names), std::end(elem_names), [&](const char* n) { return tok == n; });
  if (t == std::end(elem_names)) fail("unknown element type '" + tok + "'");
  g.type = static_cast<elem>(t - std::begin(elem_names));
  while (head >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) fail("expected key=value, got '" + tok + "'");
    const std::string key = tok.substr(0, eq), val = tok.substr(eq + 1);
    if (key == "specials") {
      g.specials = number(val, key) != 0;
    } else if (key == "data") {
      std::size_t used = 0;
      try {
        g.data_seed = std::stoull(val, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != val.size()) fail("bad data seed '" + val + "'");
    } else if (key == "inter") {
      g.inter = static_cast<int>(number(val, key));
    } else if (key == "shapes") {
      std::istringstream ss(val);
      std::string one;
      std::size_t i = 0;
      while (std::getline(ss, one, ',')) {
        const auto x = one.find('x');
        if (i >= g.shapes.size() || x == std::string::npos) fail("bad shapes '" + val + "'");
        const long long r = number(one.substr(0, x), "rows"), c = number(one.substr(x + 1), "columns");
        if (r < 0 || c < 0) fail("bad shapes '" + val + "'");
        g.shapes[i++] = {static_cast<std::size_t>(r), static_cast<std::size_t>(c)};
      }
      if (i != g.shapes.size()) fail("expected three shapes, got '" + val + "'");
    } else {
      fail("unknown key '" + key + "'");
    }
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::istringstream ss(parts[i]);
    std::string name;
    ss >> name;
    step s;
    int op = 0;
    while (op < static_cast<int>(gop::count) && name != info(static_cast<gop>(op)).name) ++op;
    if (op == static_cast<int>(gop::count)) fail("unknown op '" + name + "'");
    s.op = static_cast<gop>(op);
    if (variants(s.op)) {
      ss >> tok;
      int p = 0;
      while (p < variants(s.op) && tok != variant_name(s.op, p)) ++p;
      if (p == variants(s.op)) fail("unknown variant '" + tok + "' of " + name);
      s.p = p;
    }
    int* operands[] = {&s.a, &s.b, &s.c};
    for (int j = 0; j < info(s.op).arity; ++j) {
      if (!(ss >> tok)) fail("missing operand of " + name);
      *operands[j] = static_cast<int>(number(tok, "operand"));
    }
    while (ss >> tok) {
      if (tok.rfind("k=", 0) == 0 && uses_k(s.op)) {
        std::size_t used = 0;
        try {
          s.k = std::stod(tok.substr(2), &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != tok.size() - 2) fail("bad constant '" + tok + "'");
      } else if (tok.rfind("axis=", 0) == 0 && uses_axis(s.op)) {
        s.axis = static_cast<int>(number(tok.substr(5), "axis"));
      } else {
        fail("unexpected '" + tok + "' after " + name);
      }
    }
    g.steps.push_back(s);
  }
  if (const std::string why = check_graph(g); !why.empty()) fail(why);
  return g;
}

// ---- making graphs ----------------------------------------------------------------------------

struct gen_options {
  std::array<bool, 4> types{true, true, true, true};  // by elem
  bool reductions = true, products = true, specials = true;
  int min_steps = 3, max_steps = 12;
};

inline constexpr double float_constants[] = {0.5, 2.0, -1.5, 3.0, 1.0};
inline constexpr double int_constants[] = {2, -1, 3, 1, 0, 7};

/// The extent a reduction runs over in data set `k`: the product of its reduced dimensions.
inline std::size_t reduced_extent(const step& s, const dims_class& x, const shape2& sh) {
  const std::size_t rows = x.r1 ? 1 : sh.rows, cols = x.c1 ? 1 : sh.cols;
  if (s.axis < 0) return rows * cols;
  const bool over_rows = (s.axis == 0) == (s.op == gop::reduce);
  return over_rows ? rows : cols;
}

// Fields the op does not read are zero, so that a graph equals its parsed dump.
inline void normalize(step& s) {
  if (info(s.op).arity < 2) s.b = 0;
  if (info(s.op).arity < 3) s.c = 0;
  if (!uses_k(s.op)) s.k = 0;
  if (!variants(s.op)) s.p = 0;
  if (!uses_axis(s.op)) s.axis = 0;
}

inline graph make_graph(chooser& ch, const gen_options& o = {}) {
  graph g;
  {
    std::vector<elem> types;
    for (int t = 0; t < 4; ++t)
      if (o.types[static_cast<std::size_t>(t)]) types.push_back(static_cast<elem>(t));
    // Floats twice as often as integers: they have most of the ops.
    std::vector<elem> weighted;
    for (elem t : types) weighted.insert(weighted.end(), is_float(t) ? 2 : 1, t);
    g.type = weighted[ch.below(static_cast<std::uint32_t>(weighted.size()))];
  }
  g.specials = o.specials && ch.chance(30);
  // A small shape (a lone element, empty arrays), a middling one, and a long one whose rows or
  // columns run past several SIMD batches into a tail.
  {
    static constexpr std::size_t small[] = {1, 2, 3, 1, 4, 0, 2};
    static constexpr std::size_t mid_rows[] = {3, 1, 4, 7, 17};
    static constexpr std::size_t mid_cols[] = {7, 3, 1, 8, 17, 40};
    static constexpr std::size_t longs[] = {37, 61, 64, 100, 127, 256, 300, 333};
    static constexpr std::size_t thin[] = {1, 2, 3};
    g.shapes[0] = {small[ch.below(7)], small[ch.below(7)]};
    g.shapes[1] = {mid_rows[ch.below(5)], mid_cols[ch.below(6)]};
    const std::size_t l = longs[ch.below(8)], t = thin[ch.below(3)];
    g.shapes[2] = ch.chance(50) ? shape2{t, l} : shape2{l, t};
  }
  g.data_seed = ch.bits64();

  const bool fl = is_float(g.type);
  std::vector<gop> ops;
  for (int i = 0; i < static_cast<int>(gop::count); ++i) {
    const gop op = static_cast<gop>(i);
    if (!fl && !info(op).ints) continue;
    if (fl && g.specials && !info(op).specials) continue;
    if (g.type == elem::float64 && g.specials && takes_exp(op)) continue;
    if (is_reduction(op) && !o.reductions) continue;
    if (is_product(op) && !o.products) continue;
    ops.push_back(op);
  }
  // Three or four of the five leaves are in play in each graph.
  std::vector<int> leaves{0, 1, 2, 3, 4};
  for (int i = n_leaves - 1; i > 0; --i) std::swap(leaves[static_cast<std::size_t>(i)], leaves[ch.below(static_cast<std::uint32_t>(i) + 1)]);
  leaves.resize(3 + ch.below(2));

  std::vector<dims_class> pool;
  for (int i = 0; i < n_leaves; ++i) pool.push_back(leaf_class(i));

  const int span = o.max_steps - o.min_steps + 1;
  const int n_steps = o.min_steps + static_cast<int>(ch.below(static_cast<std::uint32_t>(span)));
  for (int i = 0; i < n_steps; ++i) {
    const int size = n_leaves + i;
    // Prefer recent results so graphs get deep, and leaves so they get wide.
    auto pick = [&]() {
      if (i == 0 || ch.chance(30)) return leaves[ch.below(static_cast<std::uint32_t>(leaves.size()))];
      const int lo = std::max(n_leaves, size - 4);
      return lo + static_cast<int>(ch.below(static_cast<std::uint32_t>(size - lo)));
    };
    if (i > 1 && ch.chance(10)) {
      // The same op on the same inputs again: merge must make them one without changing values.
      const step again = g.steps[ch.below(static_cast<std::uint32_t>(g.steps.size()))];
      g.steps.push_back(again);
      pool.push_back(*result_class(again, pool));
      continue;
    }
    step s;
    s.op = ops[ch.below(static_cast<std::uint32_t>(ops.size()))];
    s.a = pick();
    s.b = pick();
    s.c = pick();
    if (uses_k(s.op)) {
      s.k = fl ? float_constants[ch.below(5)] : int_constants[ch.below(6)];
    }
    if (variants(s.op)) s.p = static_cast<int>(ch.below(static_cast<std::uint32_t>(variants(s.op))));
    if (s.op == gop::cast_round) {
      if (g.type == elem::float32) s.p = ch.chance(50) ? static_cast<int>(elem::float64) : static_cast<int>(elem::int32);
      else if (g.type == elem::float64)  // through int32 takes a tanh (takes_exp)
        s.p = g.specials || ch.chance(50) ? static_cast<int>(elem::float32) : static_cast<int>(elem::int32);
      else if (g.type == elem::int32) s.p = ch.chance(50) ? static_cast<int>(elem::int64) : static_cast<int>(elem::float64);
      else s.p = static_cast<int>(elem::int32);
    }
    if (uses_axis(s.op)) s.axis = static_cast<int>(ch.below(3)) - 1;
    // A max or min over nothing raises shape_error (as numpy does): kept, though the rest of
    // that call is then not compared.
    // Products need fitting shapes: try other operands, else fall back to an add.
    for (int attempt = 0; attempt < 6 && !result_class(s, pool); ++attempt) {
      s.a = pick();
      s.b = pick();
      s.c = pick();
    }
    if (!result_class(s, pool)) s.op = gop::add;
    normalize(s);
    pool.push_back(*result_class(s, pool));
    g.steps.push_back(s);
  }
  g.inter = n_leaves + static_cast<int>(ch.below(static_cast<std::uint32_t>(n_steps)));
  return g;
}

// ---- data -------------------------------------------------------------------------------------

template <class T>
struct dataset {
  xt::xtensor<T, 2> a, c, e;
  xt::xtensor<T, 1> b;
  T d{};
};

/// Inputs for one call: floats uniform in [-2, 2], integers in [-20, 20]; with specials, one
/// element in 12 is NaN, an infinity or a signed zero (floats) or an extreme (integers).
template <class T>
dataset<T> make_data(const shape2& sh, std::uint64_t seed, bool specials) {
  seeded_chooser ch(seed);
  auto value = [&]() -> T {
    if (specials && ch.below(12) == 0) {
      if constexpr (std::is_floating_point_v<T>) {
        constexpr T inf = std::numeric_limits<T>::infinity();
        const T pick[] = {std::numeric_limits<T>::quiet_NaN(), inf, -inf, T(-0.0), T(0)};
        return pick[ch.below(5)];
      } else {
        const T pick[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(-1),
                          static_cast<T>(std::numeric_limits<T>::min() + 1)};
        return pick[ch.below(5)];
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      const double u = static_cast<double>(ch.bits64() >> 11) * 0x1p-53;
      return static_cast<T>(-2.0 + 4.0 * u);
    } else {
      return static_cast<T>(static_cast<int>(ch.below(41)) - 20);
    }
  };
  auto fill = [&](auto& t) {
    for (auto& v : t) v = value();
  };
  dataset<T> x;
  x.a = xt::xtensor<T, 2>::from_shape({sh.rows, sh.cols});
  x.b = xt::xtensor<T, 1>::from_shape({sh.cols});
  x.c = xt::xtensor<T, 2>::from_shape({sh.rows, 1});
  x.e = xt::xtensor<T, 2>::from_shape({sh.cols, sh.rows});
  fill(x.a);
  fill(x.b);
  fill(x.c);
  x.d = value();
  fill(x.e);
  return x;
}

inline std::uint64_t dataset_seed(const graph& g, std::size_t k) {
  std::uint64_t s = g.data_seed + 0x632be59bd9b4e019ull * (k + 1);
  return next_mix(s);
}

// ---- the reference interpreter ----------------------------------------------------------------

/// An element: its value and a bound on the library's error; e = inf marks it unknown.
struct num {
  long double v = 0, e = 0;
};
inline constexpr long double unknown_e = std::numeric_limits<long double>::infinity();
inline bool unknown(const num& x) { return std::isinf(x.e); }

/// A pool entry's value: rows x cols, either possibly 1 and broadcast.
struct value {
  std::size_t rows = 1, cols = 1;
  std::vector<num> x;
  const num& at(std::size_t i, std::size_t j) const { return x[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)]; }
};

/// The arithmetic the graph's type does: a unit roundoff, the largest finite value and an
/// absolute allowance (the smallest normal number: underflow, and the subnormals #37 names).
struct format {
  bool integer = false;
  int bits = 64;
  long double u = 0, max = 0, tiny = 0;
};
inline format format_of(elem t) {
  switch (t) {
    case elem::float32: return {false, 32, 0x1p-24L, std::numeric_limits<float>::max(), std::numeric_limits<float>::min()};
    case elem::float64: return {false, 64, 0x1p-53L, std::numeric_limits<double>::max(), std::numeric_limits<double>::min()};
    case elem::int32: return {true, 32, 0, 0, 0};
    case elem::int64: return {true, 64, 0, 0, 0};
  }
  return {};
}

/// The reference's values of one call: every pool entry (empty where no output needs it), and
/// whether the call must raise shape_error (a max or min over nothing).
struct outcome {
  bool throws = false;
  std::vector<value> pool;
};

class interpreter {
 public:
  explicit interpreter(elem t) : m_f(format_of(t)), m_type(t) {}
  const format& fmt() const { return m_f; }

  // Errors allowed per operation, in units of u: correctly rounded ops 1, the transcendental
  // kernels (measured at most 1.42 ulp, sigmoid 2.09) 4 and 6, pow 256 (#37).
  static constexpr long double c_exact = 1, c_transcendental = 4, c_sigmoid = 6, c_pow = 256;

  static num unk() { return {std::numeric_limits<long double>::quiet_NaN(), unknown_e}; }

  // A result of the graph's type from its exact value v, the error propagated from its operands
  // e, and this operation's rounding: NaN and infinities are exact, overflow goes to infinity
  // (unknown when the bound straddles the largest finite value).
  num finish(long double v, long double e, long double c) const {
    if (!std::isfinite(v)) return {v, 0};
    e += c * m_f.u * std::fabs(v) + m_f.tiny;
    const long double mag = std::fabs(v);
    if (mag + e < m_f.max) return {v, e};
    if (mag - e > m_f.max * (1 + m_f.u)) return {std::copysign(std::numeric_limits<long double>::infinity(), v), 0};
    return unk();
  }

  static int cls(long double v) { return std::isnan(v) ? 0 : std::isinf(v) ? (v > 0 ? 1 : 2) : 3; }

  // f over the interval of a: its ends bound the deviation of the monotonic or convex functions used here.
  template <class F>
  num un(F f, const num& a, long double c) const {
    if (unknown(a)) return unk();
    const long double v = f(a.v);
    if (a.e == 0 || !std::isfinite(a.v)) return finish(v, 0, c);
    const long double lo = f(a.v - a.e), hi = f(a.v + a.e);
    if (cls(lo) != cls(v) || cls(hi) != cls(v)) return unk();
    return finish(v, std::isfinite(v) ? std::max(std::fabs(lo - v), std::fabs(hi - v)) : 0, c);
  }
  // f over the box of a and b: its corners bound the deviation of the ops used here
  // (bilinear or monotonic in each operand).
  template <class F>
  num bin(F f, const num& a, const num& b, long double c, bool overflow = true) const {
    if (unknown(a) || unknown(b)) return unk();
    const long double v = f(a.v, b.v);
    long double e = 0;
    if (a.e != 0 || b.e != 0) {
      for (int sa = -1; sa <= 1; sa += 2)
        for (int sb = -1; sb <= 1; sb += 2) {
          const long double w = f(a.v + sa * a.e, b.v + sb * b.e);
          if (cls(w) != cls(v)) return unk();
          if (std::isfinite(v)) e = std::max(e, std::fabs(w - v));
        }
    }
    if (!overflow) {
      if (!std::isfinite(v)) return {v, 0};
      return {v, e + c * m_f.u * std::fabs(v) + m_f.tiny};
    }
    return finish(v, e, c);
  }

  // ---- floats ----
  num add(const num& a, const num& b) const { return bin([](long double x, long double y) { return x + y; }, a, b, c_exact); }
  num sub(const num& a, const num& b) const { return bin([](long double x, long double y) { return x - y; }, a, b, c_exact); }
  num mul(const num& a, const num& b) const { return bin([](long double x, long double y) { return x * y; }, a, b, c_exact); }
  num div(const num& a, const num& b) const {
    // Only ever by 1 + b^2 here: the denominator's interval stays away from zero.
    return bin([](long double x, long double y) { return x / y; }, a, b, c_exact);
  }
  num neg(const num& a) const { return {-a.v, a.e}; }
  num abs(const num& a) const { return {std::fabs(a.v), a.e}; }
  num sqr(const num& a) const { return un([](long double x) { return x * x; }, a, c_exact); }
  // Only ever of an abs: an interval reaching below zero is folded back.
  num sqrt(const num& a) const { return un([](long double x) { return std::sqrt(std::fabs(x)); }, a, c_exact); }
  num exp(const num& a) const { return un([](long double x) { return std::exp(x); }, a, c_transcendental); }
  num log(const num& a) const { return un([](long double x) { return std::log(x); }, a, c_transcendental); }
  num log1p(const num& a) const { return un([](long double x) { return std::log1p(x); }, a, c_transcendental); }
  num expm1(const num& a) const { return un([](long double x) { return std::expm1(x); }, a, c_transcendental); }
  num tanh(const num& a) const { return un([](long double x) { return std::tanh(x); }, a, c_transcendental); }
  // sin is not monotonic: past a quarter period of doubt, any value in [-1, 1].
  num sin(const num& a) const {
    if (!unknown(a) && std::isfinite(a.v) && a.e > 0.25L) return finish(std::sin(a.v), 2, c_transcendental);
    return un([](long double x) { return std::sin(x); }, a, c_transcendental);
  }
  num arctan(const num& a) const { return un([](long double x) { return std::atan(x); }, a, c_transcendental); }
  static long double sigmoid_of(long double x) { return 1 / (1 + std::exp(-x)); }
  static long double softplus_of(long double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
  num sigmoid(const num& a) const { return un(sigmoid_of, a, c_sigmoid); }
  num softplus(const num& a) const { return un(softplus_of, a, c_sigmoid); }
  static num constant(long double k) { return {k, 0}; }
  // Where the library may compute either of two formulas (a rewrite may apply or not): the
  // first one's value, and the larger bound.
  static num either(const num& a, const num& b) {
    if (unknown(a) || unknown(b)) return unk();
    return {a.v, std::max(a.e, b.e)};
  }

  // 1, 0, or -1 when the comparison may go either way within the bounds. `same`: a and b are
  // one pool entry, so whatever its error, x > x is false and x >= x true.
  int compare(int p, const num& a, const num& b, bool same = false) const {
    if (unknown(a) || unknown(b)) return -1;
    if (std::isnan(a.v) || std::isnan(b.v)) return p == 5 ? 1 : 0;  // only != holds for a NaN
    if (same) return p == 2 || p == 3 || p == 4;
    if (p >= 4) {
      int eq;
      if (a.e == 0 && b.e == 0) eq = a.v == b.v;
      else if (std::isinf(a.v) || std::isinf(b.v)) eq = a.v == b.v ? 1 : (std::fabs(a.v - b.v) > a.e + b.e ? 0 : -1);
      else eq = std::fabs(a.v - b.v) > a.e + b.e ? 0 : -1;
      if (eq < 0) return -1;
      return p == 4 ? eq : 1 - eq;
    }
    auto cmp = [p](long double x, long double y) {
      switch (p) {
        case 0: return x > y;
        case 1: return x < y;
        case 2: return x >= y;
        default: return x <= y;
      }
    };
    const bool r = cmp(a.v, b.v);
    if (a.e != 0 || b.e != 0)
      for (int sa = -1; sa <= 1; sa += 2)
        for (int sb = -1; sb <= 1; sb += 2)
          if (cmp(a.v + sa * a.e, b.v + sb * b.e) != r) return -1;
    return r;
  }

  // ---- integers: exact, wrapping at the type's width ----
  long double wrap(std::uint64_t x) const {
    if (m_f.bits == 32) return static_cast<long double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(x)));
    return static_cast<long double>(static_cast<std::int64_t>(x));
  }
  static std::uint64_t bits_of(const num& a) { return static_cast<std::uint64_t>(static_cast<std::int64_t>(a.v)); }

  num float_step(const step& s, const num& a, const num& b, const num& c) const {
    static const num one = constant(1), two = constant(2), three = constant(3), hundred = constant(100);
    switch (s.op) {
      case gop::add: case gop::t_add: return add(a, b);
      case gop::sub: return sub(a, b);
      case gop::mul: return mul(a, b);
      case gop::mul_tanh: return mul(a, tanh(b));
      case gop::div: return div(a, add(one, sqr(b)));
      case gop::exp_tanh: return exp(mul(tanh(a), two));
      case gop::log_sq: return log(add(one, sqr(a)));
      case gop::sqrt_abs: return sqrt(abs(a));
      case gop::tanh: return tanh(a);
      case gop::sin: return sin(a);
      case gop::arctan: return arctan(a);
      case gop::sigmoid: return sigmoid(a);
      case gop::softplus: return softplus(a);
      case gop::abs: return abs(a);
      case gop::neg: return neg(a);
      case gop::sqr: return sqr(a);
      case gop::maximum:
      case gop::minimum:  // numpy's: a NaN operand is the result
        if (std::isnan(a.v) || std::isnan(b.v)) return unknown(a) || unknown(b) ? unk() : constant(NAN);
        if (s.op == gop::maximum) return bin([](long double x, long double y) { return std::max(x, y); }, a, b, 0);
        return bin([](long double x, long double y) { return std::min(x, y); }, a, b, 0);
      case gop::switch_gt: {
        const int r = compare(0, a, b, s.a == s.b);
        return r < 0 ? unk() : r ? b : c;
      }
      case gop::cast_cmp: {
        const int r = compare(1, a, b, s.a == s.b);
        return r < 0 ? unk() : mul(constant(r), c);
      }
      case gop::pow: {
        const num base = add(one, sqr(a)), ex = tanh(b);
        if (!std::isfinite(base.v) || !std::isfinite(ex.v)) return unk();  // #37
        return bin([](long double x, long double y) { return std::pow(x, y); }, base, ex, c_pow);
      }
      case gop::weak_mul: return mul(a, constant(s.k));
      case gop::weak_rsub: return sub(constant(s.k), a);
      case gop::weak_add: return add(a, constant(s.k));
      case gop::log1m_sigmoid: {  // stabilize rewrites it to -softplus(z), or not
        const num z = mul(tanh(a), three);
        return either(neg(softplus(z)), log(sub(one, sigmoid(z))));
      }
      case gop::log_sigmoid: {
        const num z = mul(tanh(a), three);
        return either(neg(softplus(neg(z))), log(sigmoid(z)));
      }
      case gop::expm1_tanh: return expm1(tanh(a));
      case gop::log1p_sq: return log1p(sqr(a));
      case gop::sigmoid_softplus: return add(sigmoid(a), softplus(neg(a)));
      case gop::times_one: return a;
      case gop::select: {
        const int r = compare(s.p, a, b, s.a == s.b);
        return r < 0 ? unk() : r ? a : c;
      }
      case gop::cast_round: {
        const elem via = static_cast<elem>(s.p);
        if (via == elem::float64) return a;  // float32 to float64 and back: exact
        if (via == elem::float32) {           // rounds to float32, whose range is narrower
          if (unknown(a)) return a;
          const interpreter f32(elem::float32);
          return f32.finish(a.v, a.e, c_exact);
        }
        const num x = mul(tanh(a), hundred);  // through int32: truncation, NaN to the type's minimum
        if (unknown(x)) return unk();
        if (std::isnan(x.v)) return {-2147483648.0L, 0};
        const long double t = std::trunc(x.v);
        if (std::trunc(x.v - x.e) != t || std::trunc(x.v + x.e) != t) return unk();
        return {t, 0};
      }
      case gop::t_sqr_sub: return sub(sqr(a), b);
      default: break;
    }
    throw std::logic_error("random graph: not an elementwise op");
  }

  num int_step(const step& s, const num& a, const num& b, const num& c) const {
    if (unknown(a) || unknown(b) || unknown(c)) return unk();  // after an inexact mean
    const std::uint64_t x = bits_of(a), y = bits_of(b);
    switch (s.op) {
      case gop::add: case gop::t_add: return {wrap(x + y), 0};
      case gop::sub: return {wrap(x - y), 0};
      case gop::mul: return {wrap(x * y), 0};
      case gop::abs: return {a.v < 0 ? wrap(0 - x) : a.v, 0};
      case gop::neg: return {wrap(0 - x), 0};
      case gop::sqr: return {wrap(x * x), 0};
      case gop::maximum: return {std::max(a.v, b.v), 0};
      case gop::minimum: return {std::min(a.v, b.v), 0};
      case gop::switch_gt: return a.v > b.v ? b : c;
      case gop::cast_cmp: return a.v < b.v ? c : num{0, 0};
      case gop::weak_mul: return {wrap(x * static_cast<std::uint64_t>(static_cast<std::int64_t>(s.k))), 0};
      case gop::weak_rsub: return {wrap(static_cast<std::uint64_t>(static_cast<std::int64_t>(s.k)) - x), 0};
      case gop::weak_add: return {wrap(x + static_cast<std::uint64_t>(static_cast<std::int64_t>(s.k))), 0};
      case gop::times_one: return a;
      case gop::select: return compare(s.p, a, b) ? a : c;
      case gop::cast_round:  // int64 through int32 keeps the low 32 bits; int32 through int64 or float64 is exact
        if (static_cast<elem>(s.p) == elem::int32) return {static_cast<long double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(x))), 0};
        return a;
      case gop::t_sqr_sub: return {wrap(x * x - y), 0};
      default: break;
    }
    throw std::logic_error("random graph: not an elementwise op");
  }

  value elementwise(const step& s, const std::vector<value>& p) const {
    const int n = info(s.op).arity;
    const value& a = p[static_cast<std::size_t>(s.a)];
    const value& b = p[static_cast<std::size_t>(n > 1 ? s.b : s.a)];
    const value& c = p[static_cast<std::size_t>(n > 2 ? s.c : s.a)];
    // numpy's broadcasting: a dimension of 1 takes the other's, including 0.
    auto dim = [](std::size_t u, std::size_t w) { return u == 1 ? w : u; };
    value r;
    r.rows = dim(dim(a.rows, b.rows), c.rows);
    r.cols = dim(dim(a.cols, b.cols), c.cols);
    r.x.reserve(r.rows * r.cols);
    for (std::size_t i = 0; i < r.rows; ++i)
      for (std::size_t j = 0; j < r.cols; ++j)
        r.x.push_back(m_f.integer ? int_step(s, a.at(i, j), b.at(i, j), c.at(i, j))
                                  : float_step(s, a.at(i, j), b.at(i, j), c.at(i, j)));
    return r;
  }

  // A sum of terms as the library may order it: within n u sum |t| of the exact sum; unknown
  // when a partial sum could overflow.
  num sum_terms(const std::vector<num>& t, const format& acc) const {
    long double v = 0, mag = 0, e = 0;
    bool special = false;
    for (const num& x : t) {
      if (unknown(x)) return unk();
      v += x.v;
      if (std::isfinite(x.v)) {
        mag += std::fabs(x.v);
        e += x.e;
      } else {
        special = true;
      }
    }
    if (!acc.integer && mag >= acc.max) return unk();
    if (special) return {v, 0};
    return finish(v, e + static_cast<long double>(t.size()) * m_f.u * mag, 0);
  }

  // Reduces `in` over rows (axis 0), columns (1) or all (-1); the result keeps two dimensions.
  // Integer sums and products are int64 (wrapped), narrowed to `out_bits`.
  value reduce(const value& in, int rop, int axis, int out_bits) const {
    value r;
    r.rows = axis == 0 || axis < 0 ? 1 : in.rows;
    r.cols = axis == 1 || axis < 0 ? 1 : in.cols;
    std::vector<num> t;
    for (std::size_t i = 0; i < r.rows; ++i)
      for (std::size_t j = 0; j < r.cols; ++j) {
        t.clear();
        const std::size_t i0 = axis == 0 || axis < 0 ? 0 : i, i1 = axis == 0 || axis < 0 ? in.rows : i + 1;
        const std::size_t j0 = axis == 1 || axis < 0 ? 0 : j, j1 = axis == 1 || axis < 0 ? in.cols : j + 1;
        for (std::size_t ii = i0; ii < i1; ++ii)
          for (std::size_t jj = j0; jj < j1; ++jj) t.push_back(in.x[ii * in.cols + jj]);
        r.x.push_back(m_f.integer ? int_reduce(t, rop, out_bits) : float_reduce(t, rop));
      }
    return r;
  }

  num int_reduce(const std::vector<num>& t, int rop, int out_bits) const {
    auto narrow = [&](std::uint64_t x) -> long double {
      if (out_bits == 32) return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
      return static_cast<long double>(static_cast<std::int64_t>(x));
    };
    for (const num& x : t)
      if (unknown(x)) return unk();
    std::uint64_t acc = rop == r_prod ? 1 : 0;
    long double best = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (rop == r_prod) acc *= bits_of(t[i]);
      else acc += bits_of(t[i]);
      if (i == 0 || (rop == r_max ? t[i].v > best : t[i].v < best)) best = t[i].v;
    }
    switch (rop) {
      case r_max:
      case r_min: return {best, 0};
      case r_mean: {
        // float64, summed in float64 (within n u64 sum |x| of the exact sum), then cast back:
        // truncated, and NaN (a mean of nothing) or out of range to the type's minimum.
        const long double lowest = out_bits == 32 ? -2147483648.0L : -9223372036854775808.0L;
        if (t.empty()) return {lowest, 0};
        long double sum = 0, mag = 0;
        for (const num& x : t) {
          sum += x.v;
          mag += std::fabs(x.v);
        }
        const long double n = static_cast<long double>(t.size());
        const long double v = sum / n, r = std::trunc(v);
        // Below 2^53 the float64 sum is exact, and a quotient that is not an integer is at least
        // 1/n from one, farther than its rounding: the truncation is exact.
        if (mag < 0x1p53L) return {r, 0};
        const long double e = (n + 1) * 0x1p-53L * mag / n;
        if (std::trunc(v - e) != r || std::trunc(v + e) != r || std::fabs(v) + e >= -lowest) return unk();
        return {r, 0};
      }
      default: return {narrow(acc), 0};
    }
  }

  num float_reduce(const std::vector<num>& t, int rop) const {
    const long double n = static_cast<long double>(t.size());
    switch (rop) {
      case r_sum: return sum_terms(t, m_f);
      case r_mean: {
        if (t.empty()) return {std::numeric_limits<long double>::quiet_NaN(), 0};
        const num s = sum_terms(t, m_f);
        if (unknown(s)) return s;
        if (!std::isfinite(s.v)) return {s.v / n, 0};
        return finish(s.v / n, s.e / n, c_exact);
      }
      case r_prod: {
        // The library multiplies in double: no overflow before the end, unless a partial
        // product leaves double's range (then unknown).
        num acc = constant(1);
        for (const num& x : t) {
          acc = bin([](long double u, long double w) { return u * w; }, acc, x, c_exact, false);
          if (unknown(acc)) return acc;
          const long double m = std::fabs(acc.v);
          if (std::isfinite(acc.v) && m != 0 &&
              (m > std::numeric_limits<double>::max() / 4 || m < std::numeric_limits<double>::min() * 4))
            return unk();
        }
        return finish(acc.v, acc.e, c_exact);
      }
      default: {  // max, min: NaN wins, as in numpy
        if (t.empty()) return unk();
        num best = t[0];
        long double lo = -std::numeric_limits<long double>::infinity(), hi = lo;
        for (const num& x : t) {
          if (unknown(x)) return unk();
          if (std::isnan(x.v)) return {x.v, 0};
        }
        const bool mx = rop == r_max;
        for (const num& x : t) {
          const long double v = mx ? x.v : -x.v;
          if (v > (mx ? best.v : -best.v)) best = x;
          lo = std::max(lo, v - x.e);
          hi = std::max(hi, v + x.e);
        }
        const long double v = mx ? best.v : -best.v;
        if (!std::isfinite(v)) return {best.v, 0};
        return {best.v, std::max(hi - v, v - lo)};
      }
    }
  }

  static value transposed(const value& a) {
    value r;
    r.rows = a.cols;
    r.cols = a.rows;
    r.x.resize(a.x.size());
    for (std::size_t i = 0; i < a.rows; ++i)
      for (std::size_t j = 0; j < a.cols; ++j) r.x[j * a.rows + i] = a.x[i * a.cols + j];
    return r;
  }

  value matmul(const value& a, const value& b) const {
    if (a.cols != b.rows) throw std::logic_error("random graph: product of mismatched shapes");
    value r;
    r.rows = a.rows;
    r.cols = b.cols;
    std::vector<num> t(a.cols);
    for (std::size_t i = 0; i < a.rows; ++i)
      for (std::size_t j = 0; j < b.cols; ++j) {
        if (m_f.integer) {
          std::uint64_t acc = 0;
          bool known = true;
          for (std::size_t k = 0; k < a.cols; ++k) {
            const num &u = a.x[i * a.cols + k], &w = b.x[k * b.cols + j];
            known = known && !unknown(u) && !unknown(w);
            if (known) acc += bits_of(u) * bits_of(w);
          }
          r.x.push_back(known ? num{wrap(acc), 0} : unk());
          continue;
        }
        for (std::size_t k = 0; k < a.cols; ++k) t[k] = mul(a.x[i * a.cols + k], b.x[k * b.cols + j]);
        r.x.push_back(sum_terms(t, m_f));
      }
    return r;
  }

  value step_value(const step& s, const std::vector<value>& p) const {
    const value& a = p[static_cast<std::size_t>(s.a)];
    const int narrow = m_f.bits;
    switch (s.op) {
      case gop::reduce: return reduce(a, s.p, s.axis, narrow);
      case gop::reduce_t: return reduce(a, s.p, s.axis < 0 ? -1 : 1 - s.axis, narrow);
      case gop::dot_mv: return matmul(a, transposed(reduce(p[static_cast<std::size_t>(s.b)], r_sum, 0, narrow)));
      case gop::dot_vm: return matmul(transposed(reduce(p[static_cast<std::size_t>(s.b)], r_sum, 1, narrow)), a);
      case gop::dot_vv:
        return matmul(reduce(a, r_sum, 0, narrow), transposed(reduce(p[static_cast<std::size_t>(s.b)], r_sum, 0, narrow)));
      case gop::dot_mm: {
        const value yt = transposed(p[static_cast<std::size_t>(s.b)]);
        const value& z = p[static_cast<std::size_t>(s.c)];
        return s.p == 0 ? matmul(matmul(a, yt), z) : matmul(a, matmul(yt, z));
      }
      case gop::set_inner: {
        const value& b = p[static_cast<std::size_t>(s.b)];
        value r = a;
        step plus;
        plus.op = gop::add;
        for (std::size_t i = 1; i + 1 < a.rows; ++i)
          for (std::size_t j = 1; j + 1 < a.cols; ++j) {
            const num &u = a.at(i, j), &w = b.at(i + 1, j - 1);
            r.x[i * a.cols + j] = m_f.integer ? int_step(plus, u, w, u) : float_step(plus, u, w, u);
          }
        return r;
      }
      default: return elementwise(s, p);
    }
  }

  /// Every pool entry that an output needs, and whether the call raises shape_error.
  outcome run(const graph& g, std::vector<value> leaves) const {
    std::vector<bool> needed(n_leaves + g.steps.size(), false);
    needed.back() = true;
    needed[static_cast<std::size_t>(g.inter)] = true;
    for (std::size_t i = g.steps.size(); i-- > 0;) {
      if (!needed[n_leaves + i]) continue;
      const step& s = g.steps[i];
      needed[static_cast<std::size_t>(s.a)] = true;
      if (info(s.op).arity > 1) needed[static_cast<std::size_t>(s.b)] = true;
      if (info(s.op).arity > 2) needed[static_cast<std::size_t>(s.c)] = true;
    }
    outcome out;
    out.pool = std::move(leaves);
    for (std::size_t i = 0; i < g.steps.size(); ++i) {
      const step& s = g.steps[i];
      if (!needed[n_leaves + i]) {
        out.pool.emplace_back();
        continue;
      }
      if (is_reduction(s.op) && (s.p == r_max || s.p == r_min)) {
        const value& a = out.pool[static_cast<std::size_t>(s.a)];
        const int axis = s.op == gop::reduce || s.axis < 0 ? s.axis : 1 - s.axis;
        const std::size_t extent = axis < 0 ? a.rows * a.cols : axis == 0 ? a.rows : a.cols;
        if (extent == 0) {
          out.throws = true;
          return out;
        }
      }
      out.pool.push_back(step_value(s, out.pool));
    }
    return out;
  }

  /// sum(x) as the function's third output computes it (int64 for integers).
  num total(const value& x) const { return reduce(x, r_sum, -1, 64).x[0]; }

  elem type() const { return m_type; }

 private:
  format m_f;
  elem m_type;
};

template <class T, std::size_t N>
std::vector<num> to_nums(const xt::xtensor<T, N>& a) {
  std::vector<num> v(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) v[i] = {static_cast<long double>(a.data()[i]), 0};
  return v;
}

/// The leaves' values in pool order.
template <class T>
std::vector<value> leaf_values(const dataset<T>& x) {
  const std::size_t rows = x.a.shape()[0], cols = x.a.shape()[1];
  std::vector<value> p(n_leaves);
  p[0] = {rows, cols, to_nums(x.a)};
  p[1] = {1, cols, to_nums(x.b)};
  p[2] = {rows, 1, to_nums(x.c)};
  p[3] = {1, 1, {{static_cast<long double>(x.d), 0}}};
  p[4] = interpreter::transposed({cols, rows, to_nums(x.e)});
  return p;
}

// ---- comparison -------------------------------------------------------------------------------

struct compare_counts {
  std::size_t compared = 0, unknown = 0, special = 0;
};

inline bool element_ok(const num& want, long double got, const format& f) {
  if (std::isnan(want.v)) return std::isnan(got);
  if (std::isinf(want.v)) return got == want.v;
  if (!std::isfinite(got)) return false;
  if (f.integer) return got == want.v;
  return std::fabs(got - want.v) <= 2 * want.e + f.tiny;
}

/// "" when got (n elements in C order) matches want, else the first few differences.
template <class T>
std::string differences(const value& want, const T* got, std::size_t n, const format& f, compare_counts& counts) {
  if (want.x.size() != n) return "size " + std::to_string(n) + ", expected " + std::to_string(want.x.size());
  std::ostringstream os;
  os.precision(std::numeric_limits<T>::max_digits10);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const num& w = want.x[i];
    if (unknown(w)) {
      ++counts.unknown;
      continue;
    }
    ++counts.compared;
    counts.special += !std::isfinite(w.v);
    if (element_ok(w, static_cast<long double>(got[i]), f)) continue;
    if (bad++ < 4)
      os << " [" << i / want.cols << "," << i % want.cols << "] got " << got[i] << ", expected "
         << static_cast<double>(w.v) << " +- " << static_cast<double>(2 * w.e + f.tiny) << ";";
  }
  if (!bad) return "";
  return std::to_string(bad) + " of " + std::to_string(n) + " elements differ:" + os.str();
}

// ---- building and running ---------------------------------------------------------------------

/// The leaves as symbols of type T.
template <class T>
struct leaf_symbols {
  xsym::var<T, 2> a = xsym::matrix<T>("a");
  xsym::var<T, 1> b = xsym::vector<T>("b");
  xsym::var<T, 2> c = xsym::col<T>("c");
  xsym::var<T, 0> d = xsym::scalar<T>("d");
  xsym::var<T, 2> e = xsym::matrix<T>("e");
  std::vector<xsym::var<T, 2>> pool() const { return {a, xsym::dimshuffle(b, 'x', 0), c, xsym::dimshuffle(d, 'x', 'x'), e.T()}; }
};

// The step as an xsym expression; beside interpreter::float_step and int_step.
template <class T>
xsym::var<T, 2> build(const step& s, const std::vector<xsym::var<T, 2>>& p) {
  using V = xsym::var<T, 2>;
  constexpr bool fl = std::is_floating_point_v<T>;
  // C++ numbers as users write them: double next to floats, int next to integers.
  using lit = std::conditional_t<fl, double, int>;
  const V& a = p[static_cast<std::size_t>(s.a)];
  const V& b = p[static_cast<std::size_t>(info(s.op).arity > 1 ? s.b : s.a)];
  const V& c = p[static_cast<std::size_t>(info(s.op).arity > 2 ? s.c : s.a)];
  const lit k = static_cast<lit>(s.k);
  auto back_to_2d = [](const auto& v, bool row) {  // a reduction's or product's vector as a row or a column
    if (row) return xsym::cast<T>(xsym::dimshuffle(v, 'x', 0));
    return xsym::cast<T>(xsym::dimshuffle(v, 0, 'x'));
  };
  auto reduce = [&](const V& x, int axis) -> V {
    auto one = [&](auto r) -> V {
      if (axis < 0) return xsym::cast<T>(xsym::dimshuffle(r(x), 'x', 'x'));
      return back_to_2d(r(x, axis), axis == 0);
    };
    switch (s.p) {
      case r_sum: return one([](const auto&... q) { return xsym::sum(q...); });
      case r_prod: return one([](const auto&... q) { return xsym::prod(q...); });
      case r_max: return one([](const auto&... q) { return xsym::max(q...); });
      case r_min: return one([](const auto&... q) { return xsym::min(q...); });
      default: return one([](const auto&... q) { return xsym::mean(q...); });
    }
  };
  auto compare = [&]() {
    switch (s.p) {
      case 0: return a > b;
      case 1: return a < b;
      case 2: return a >= b;
      case 3: return a <= b;
      case 4: return a == b;
      default: return a != b;
    }
  };
  switch (s.op) {
    case gop::add: return a + b;
    case gop::sub: return a - b;
    case gop::mul: return a * b;
    case gop::abs: return xsym::abs(a);
    case gop::neg: return -a;
    case gop::sqr: return xsym::sqr(a);
    case gop::maximum: return xsym::maximum(a, b);
    case gop::minimum: return xsym::minimum(a, b);
    case gop::switch_gt: return xsym::switch_(a > b, b, c);
    case gop::cast_cmp: return xsym::cast<T>(a < b) * c;
    case gop::weak_mul: return a * k;
    case gop::weak_rsub: return k - a;
    case gop::weak_add: return a + k;
    case gop::times_one: return a * lit(1) + lit(0);  // canonicalize may drop both
    case gop::select: return xsym::switch_(compare(), a, c);
    case gop::t_add: return (a.T() + b.T()).T();
    case gop::set_inner: {
      using xsym::range;
      using xsym::placeholders::_;
      const auto inner = a(range(1, -1), range(1, -1));
      return xsym::set_subtensor(inner, inner + b(range(2, _), range(_, -2)));
    }
    case gop::t_sqr_sub: return (xsym::sqr(a.T()) - b.T()).T();
    case gop::reduce: return reduce(a, s.axis);
    case gop::reduce_t: return reduce(a.T(), s.axis).T();
    // The vector cast back to T: an integer sum is int64, and the product should be T's.
    case gop::dot_mv: return back_to_2d(xsym::dot(a, xsym::cast<T>(xsym::sum(b, 0))), false);
    case gop::dot_vm: return back_to_2d(xsym::dot(xsym::cast<T>(xsym::sum(b, 1)), a), true);
    case gop::dot_mm: return s.p == 0 ? xsym::dot(xsym::dot(a, b.T()), c) : xsym::dot(a, xsym::dot(b.T(), c));
    case gop::dot_vv:
      return xsym::dimshuffle(xsym::dot(xsym::cast<T>(xsym::sum(a, 0)), xsym::cast<T>(xsym::sum(b, 0))), 'x', 'x');
    case gop::cast_round:
      switch (static_cast<elem>(s.p)) {
        case elem::float32: return xsym::cast<T>(xsym::cast<float>(a));
        case elem::float64: return xsym::cast<T>(xsym::cast<double>(a));
        case elem::int64: return xsym::cast<T>(xsym::cast<std::int64_t>(a));
        case elem::int32:
          if constexpr (fl) return xsym::cast<T>(xsym::cast<std::int32_t>(xsym::tanh(a) * 100.0));
          else return xsym::cast<T>(xsym::cast<std::int32_t>(a));
      }
      break;
    default: break;
  }
  if constexpr (fl) {
    switch (s.op) {
      case gop::mul_tanh: return a * xsym::tanh(b);
      case gop::div: return a / (1.0 + xsym::sqr(b));
      case gop::exp_tanh: return xsym::exp(xsym::tanh(a) * 2.0);
      case gop::log_sq: return xsym::log(1.0 + xsym::sqr(a));
      case gop::sqrt_abs: return xsym::sqrt(xsym::abs(a));
      case gop::tanh: return xsym::tanh(a);
      case gop::sin: return xsym::sin(a);
      case gop::arctan: return xsym::arctan(a);
      case gop::sigmoid: return xsym::sigmoid(a);
      case gop::softplus: return xsym::softplus(a);
      case gop::pow: return xsym::pow(1.0 + xsym::sqr(a), xsym::tanh(b));
      case gop::log1m_sigmoid: return xsym::log(1.0 - xsym::sigmoid(xsym::tanh(a) * 3.0));  // a stabilize target
      case gop::log_sigmoid: return xsym::log(xsym::sigmoid(xsym::tanh(a) * 3.0));
      case gop::expm1_tanh: return xsym::expm1(xsym::tanh(a));
      case gop::log1p_sq: return xsym::log1p(xsym::sqr(a));
      case gop::sigmoid_softplus: return xsym::sigmoid(a) + xsym::softplus(-a);  // one shared exp(-|a|)
      default: break;
    }
  }
  throw std::logic_error(std::string("random graph: ") + info(s.op).name + " is not built for this type");
}

/// One option set of a compiled function.
struct option_set {
  std::string name, mode = "FAST_RUN", linker = "cvm", excluding;
};

/// The option sets of the differential test: every rewrite group off in turn, every linker, FAST_COMPILE.
inline std::vector<option_set> all_option_sets() {
  return {{"default", "FAST_RUN", "cvm", ""},
          {"no fusion", "FAST_RUN", "cvm", "fusion"},
          {"no inplace", "FAST_RUN", "cvm", "inplace"},
          {"no fusion, no inplace", "FAST_RUN", "cvm", "fusion:inplace"},
          {"no merge", "FAST_RUN", "cvm", "merge"},
          {"no algebra", "FAST_RUN", "cvm", "stabilize:canonicalize:constant_folding"},
          {"cvm_nogc", "FAST_RUN", "cvm_nogc", ""},
          {"py", "FAST_RUN", "py", ""},
          {"py, nothing", "FAST_RUN", "py", "fast_run"},
          {"FAST_COMPILE", "FAST_COMPILE", "py", ""}};
}

struct option_stats {
  std::size_t nodes = 0;
  bool composite = false, inplace = false;
};

struct run_report {
  std::vector<std::string> failures;
  std::vector<option_stats> options;  // per option set
  compare_counts counts;
  int calls_raising = 0;  // data sets on which every option set had to raise shape_error
};

template <class T>
void run_typed(const graph& g, const std::vector<option_set>& sets, run_report& rep, int calls) {
  const leaf_symbols<T> sy;
  std::vector<xsym::var<T, 2>> pool = sy.pool();
  for (const step& s : g.steps) pool.push_back(build<T>(s, pool));
  const auto& root = pool.back();
  const auto& inter = pool[static_cast<std::size_t>(g.inter)];
  const auto total = xsym::sum(root);

  const interpreter ref(g.type);
  std::vector<dataset<T>> data;
  std::vector<outcome> want;
  for (std::size_t k = 0; k < g.shapes.size(); ++k) {
    data.push_back(make_data<T>(g.shapes[k], dataset_seed(g, k), g.specials));
    want.push_back(ref.run(g, leaf_values(data.back())));
    rep.calls_raising += want.back().throws;
  }
  const format out_format = ref.fmt();
  const format total_format = std::is_integral_v<T> ? format_of(elem::int64) : out_format;
  for (const option_set& o : sets) {
    auto f = xsym::function("random_graph", xsym::inputs(sy.a, sy.b, sy.c, sy.d, sy.e), xsym::outputs(root, inter, total),
                            xsym::ignore_unused_inputs{}, xsym::mode(o.mode), xsym::linker(o.linker),
                            xsym::optimizer_excluding(o.excluding));
    option_stats st;
    st.nodes = f.toposort().size();
    for (const auto& n : f.toposort()) {
      st.composite |= n.op_name().find("Composite") != std::string::npos;
      st.inplace |= n.get_op().is_inplace();
    }
    rep.options.push_back(st);
    for (std::size_t k = 0; k < data.size(); ++k) {
      const dataset<T>& x = data[k];
      const outcome& w = want[k];
      const std::string where = o.name + ", data set " + std::to_string(k) + " (" + std::to_string(g.shapes[k].rows) + "x" +
                                std::to_string(g.shapes[k].cols) + ")";
      // Called more than once: buffers kept from one call must not leak into the next.
      for (int call = 0; call < calls; ++call) {
        std::string why;
        try {
          auto [r, in, s] = f(x.a, x.b, x.c, x.d, x.e);
          if (w.throws) {
            why = "returned, but a max or min over nothing must raise shape_error";
          } else {
            const value& wr = w.pool.back();
            const value& wi = w.pool[static_cast<std::size_t>(g.inter)];
            auto shape_text = [](const auto& t) { return std::to_string(t.shape()[0]) + "x" + std::to_string(t.shape()[1]); };
            if (r.shape()[0] != wr.rows || r.shape()[1] != wr.cols)
              why = "output 0 has shape " + shape_text(r) + ", expected " + std::to_string(wr.rows) + "x" + std::to_string(wr.cols);
            else if (in.shape()[0] != wi.rows || in.shape()[1] != wi.cols)
              why = "output 1 has shape " + shape_text(in) + ", expected " + std::to_string(wi.rows) + "x" + std::to_string(wi.cols);
            else if (auto d = differences(wr, r.data(), r.size(), out_format, rep.counts); !d.empty())
              why = "output 0 (last step): " + d;
            else if (auto d1 = differences(wi, in.data(), in.size(), out_format, rep.counts); !d1.empty())
              why = "output 1 (entry " + std::to_string(g.inter) + "): " + d1;
            else {
              const value ws{1, 1, {ref.total(wr)}};
              if (auto d2 = differences(ws, &s, 1, total_format, rep.counts); !d2.empty()) why = "output 2 (sum): " + d2;
            }
          }
        } catch (const xsym::shape_error& e) {
          if (!w.throws) why = std::string("raised shape_error: ") + e.what();
        } catch (const std::exception& e) {
          why = std::string("raised: ") + e.what();
        }
        if (!why.empty()) {
          if (rep.failures.size() < 12)
            rep.failures.push_back(where + ", call " + std::to_string(call) + ": " + why + "\n  graph: " + xsym::toposort_text(f));
          break;
        }
      }
    }
  }
}

/// Builds g's function under each option set, calls it on its three data sets and compares the
/// outputs with the reference; what differs is in the report's failures.
inline run_report run_graph(const graph& g, const std::vector<option_set>& sets, int calls = 2) {
  run_report rep;
  try {
    switch (g.type) {
      case elem::float32: run_typed<float>(g, sets, rep, calls); break;
      case elem::float64: run_typed<double>(g, sets, rep, calls); break;
      case elem::int32: run_typed<std::int32_t>(g, sets, rep, calls); break;
      case elem::int64: run_typed<std::int64_t>(g, sets, rep, calls); break;
    }
  } catch (const std::exception& e) {
    rep.failures.push_back(std::string("building the graph or its function raised: ") + e.what());
  }
  return rep;
}

}  // namespace xsym_test::rg

#endif
