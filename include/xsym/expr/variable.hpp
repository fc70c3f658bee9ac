#ifndef XSYM_EXPR_VARIABLE_HPP
#define XSYM_EXPR_VARIABLE_HPP

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include "../config/cold.hpp"
#include "../config/config.hpp"
#include "ndarray.hpp"
#include "op.hpp"

namespace xsym {

namespace detail {
#if defined(__cpp_lib_source_location)
using source_site = std::source_location;
#else
// Clang before 15 with libstdc++ has no std::source_location; the builtins it is made of.
class source_site {
 public:
  static constexpr source_site current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE(),
                                       unsigned column = __builtin_COLUMN()) noexcept {
    source_site s;
    s.m_file = file;
    s.m_line = line;
    s.m_column = column;
    return s;
  }
  constexpr const char* file_name() const noexcept { return m_file; }
  constexpr unsigned line() const noexcept { return m_line; }
  constexpr unsigned column() const noexcept { return m_column; }

 private:
  const char* m_file = "";
  unsigned m_line = 0, m_column = 0;
};
#endif

/// The user's line being built on this thread (set by the typed API's outermost call).
inline source_site& build_site() {
  thread_local source_site site{};
  return site;
}
/// Marks the nodes made in its scope with the user's line, unless an outer call already did
/// (the user's call, not the library's inside it); a rewrite replaces it with the line of the
/// node it rewrites.
class at_site {
 public:
  explicit at_site(const source_site& where, bool replace = false) : m_was(build_site()) {
    if (replace || m_was.line() == 0) build_site() = where;
  }
  ~at_site() { build_site() = m_was; }
  at_site(const at_site&) = delete;
  at_site& operator=(const at_site&) = delete;

 private:
  source_site m_was;
};

inline std::string site_text(const source_site& w) {
  return std::string(w.file_name()) + ":" + std::to_string(w.line()) + ":" + std::to_string(w.column());
}
}  // namespace detail

/// @brief Raised when an expression cannot be built (bad axes, bad pattern, bad dtype); names
/// the user's line that was building it, when the call that threw knows it.
class graph_error : public std::invalid_argument {
 public:
  explicit graph_error(const std::string& what) : std::invalid_argument(located(what)) {}
  explicit graph_error(const char* what) : graph_error(std::string(what)) {}

 private:
  static std::string located(const std::string& what) {
    const detail::source_site& w = detail::build_site();
    if (w.line() == 0) return what;
    const std::string at = detail::site_text(w);
    return what.find(at) == std::string::npos ? what + " (at " + at + ")" : what;
  }
};

enum class var_kind : std::uint8_t { input, shared, constant, apply };

/// @brief The value a shared variable holds between calls.
struct shared_value {
  ndarray value;
  std::string name;
  // Held by a call that updates the variable from reading it to writing it, so that calls
  // updating it are serial and readers see every update of a call or none; recursive, so that
  // a MonitorMode callback on the calling thread may still get_value().
  mutable std::recursive_mutex mutex;
};

namespace detail {
/// The shared values a call read, by variable.
using shared_values_read = std::vector<std::pair<const shared_value*, ndarray>>;
/// While a call runs MonitorMode callbacks on this thread, the values it read: get_value gives
/// those instead of waiting for a variable's lock, which another call may hold while it waits
/// for one this call holds.
inline const shared_values_read*& values_in_callback() {
  thread_local const shared_values_read* values = nullptr;
  return values;
}
struct callback_values {
  explicit callback_values(const shared_values_read* v) : saved(std::exchange(values_in_callback(), v)) {}
  callback_values(const callback_values&) = delete;
  callback_values& operator=(const callback_values&) = delete;
  ~callback_values() { values_in_callback() = saved; }
  const shared_values_read* saved;
};
}  // namespace detail

struct variable;
using var_ptr = std::shared_ptr<const variable>;

/// @brief A node of the symbolic graph: a leaf or the single output of an op applied to inputs.
///
/// Identity is the id, never the structure: two inputs named "x" are two variables.
struct variable {
  std::uint64_t id = 0;
  var_kind kind = var_kind::input;
  dtype type = dtype::float64;
  int rank = 0;
  std::uint8_t broadcastable = 0;      // bit d: dimension d is always 1 and broadcasts (Theano's pattern)
  std::string name;
  std::shared_ptr<const op> fn;        // apply
  std::vector<var_ptr> inputs;         // apply
  std::shared_ptr<shared_value> shared;  // shared
  ndarray constant;                    // constant
  detail::source_site where{};  // the user's line that made it (line 0: unknown)
  std::shared_ptr<const ndarray> test_value;  // compute_test_value: its value on the test values
};

namespace detail {
inline std::uint64_t next_variable_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

/// Computes one Apply variable's value from its inputs' test values; installed by compile
/// (it runs the CPU executor), null in a program without it.
using test_value_evaluator_fn = ndarray (*)(const variable& apply);
inline test_value_evaluator_fn& test_value_evaluator() {
  static test_value_evaluator_fn f = nullptr;
  return f;
}

inline var_ptr make_leaf(var_kind kind, dtype t, int rank, std::string name) {
  auto v = std::make_shared<variable>();
  v->id = next_variable_id();
  v->kind = kind;
  v->type = t;
  v->rank = rank;
  v->name = std::move(name);
  return v;
}

inline var_ptr make_input(dtype t, int rank, std::string name, std::uint8_t broadcastable = 0) {
  auto v = std::const_pointer_cast<variable>(make_leaf(var_kind::input, t, rank, std::move(name)));
  v->broadcastable = broadcastable;
  return v;
}

inline bool is_broadcastable(const var_ptr& v, int d) { return (v->broadcastable >> d) & 1u; }

inline var_ptr make_shared_variable(ndarray value, std::string name) {
  auto v = std::make_shared<variable>();
  v->id = next_variable_id();
  v->kind = var_kind::shared;
  v->type = value.type();
  v->rank = value.rank();
  v->name = name;
  v->shared = std::make_shared<shared_value>();
  v->shared->value = std::move(value);
  v->shared->name = std::move(name);
  return v;
}

inline var_ptr make_constant(ndarray value) {
  auto v = std::make_shared<variable>();
  v->id = next_variable_id();
  v->kind = var_kind::constant;
  v->type = value.type();
  v->rank = value.rank();
  for (int d = 0; d < value.rank(); ++d)
    if (value.shape(d) == 1) v->broadcastable |= static_cast<std::uint8_t>(1u << d);
  v->constant = std::move(value);
  return v;
}

template <class T>
ndarray scalar_array(T value) {
  ndarray a = ndarray::empty(dtype_of<T>(), shape_t{});
  *a.data_as<T>() = value;
  return a;
}

inline ndarray scalar_array_of(dtype t, double value) {
  return visit_dtype(t, [&](auto z) { return scalar_array(static_cast<decltype(z)>(value)); });
}

// Which output dimensions are statically 1, from the op and its inputs' patterns.
XSYM_COLD_BEGIN  // building graphs, never per call
inline std::uint8_t infer_broadcastable(const op& o, const std::vector<var_ptr>& in, int rank) {
  auto bit = [](const var_ptr& v, int d) { return static_cast<std::uint8_t>(((v->broadcastable >> d) & 1u) << 0); };
  std::uint8_t b = 0;
  switch (o.kind) {
    case op_kind::elemwise:
    case op_kind::composite:
      b = static_cast<std::uint8_t>((1u << rank) - 1u);
      for (const auto& v : in) b &= v->broadcastable;
      return b;
    case op_kind::dimshuffle:
      for (int i = 0; i < rank; ++i) {
        const int p = o.pattern[static_cast<std::size_t>(i)];
        if (p < 0 || bit(in[0], p)) b |= static_cast<std::uint8_t>(1u << i);
      }
      return b;
    case op_kind::arg_reduce:
    case op_kind::reduce: {
      int j = 0;
      for (int d = 0; d < in[0]->rank; ++d)
        if (std::find(o.axes.begin(), o.axes.end(), d) == o.axes.end()) b |= static_cast<std::uint8_t>(bit(in[0], d) << j++);
      return b;
    }
    case op_kind::gemv:
      if (o.accumulate) return static_cast<std::uint8_t>(in[0]->broadcastable & bit(in[1], o.transpose_a ? 1 : 0));
      return bit(in[0], o.transpose_a ? 1 : 0);
    case op_kind::shape_prod: return 0;
    case op_kind::transfer: return in[0]->broadcastable;
    case op_kind::one_pass_gemv: return 0;  // made only in a built graph
    case op_kind::allreduce: return in[0]->broadcastable;  // every rank has the same shape
    case op_kind::take: return static_cast<std::uint8_t>(in[0]->broadcastable & ~1u);  // as many rows as indices
    case op_kind::inc_rows: return in[0]->broadcastable;
    case op_kind::subtensor: {
      // A dimension stays 1 only under a slice without ends (x[1:] of one element is empty).
      int j = 0;
      for (int d = 0; d < in[0]->rank; ++d) {
        const slice_spec* s = d < static_cast<int>(o.slices.size()) ? &o.slices[static_cast<std::size_t>(d)] : nullptr;
        if (s && s->index) continue;
        if (bit(in[0], d) && (!s || (!s->has_start && !s->has_stop))) b |= static_cast<std::uint8_t>(1u << j);
        ++j;
      }
      return b;
    }
    case op_kind::inc_subtensor: return in[0]->broadcastable;
    case op_kind::batched_dot:  // batches where both have one; a's rows, c's columns
      return static_cast<std::uint8_t>((bit(in[0], 0) & bit(in[1], 0)) | (bit(in[0], 1) << 1) | (bit(in[1], 2) << 2));
    case op_kind::check: return in[0]->broadcastable;
    case op_kind::reshape:
      if (o.extents_from_inputs) {
        for (int i = 0; i < rank; ++i) {
          const variable& e = *in[1 + static_cast<std::size_t>(i)];
          if (e.kind == var_kind::constant && e.constant.flat_as_double(0) == 1) b |= static_cast<std::uint8_t>(1u << i);
        }
        return b;
      }
      if (in.size() > 1) return in[1]->broadcastable;
      for (int i = 0; i < rank; ++i)
        if (o.dims[static_cast<std::size_t>(i)] == 1) b |= static_cast<std::uint8_t>(1u << i);
      return b;
    case op_kind::join:
      b = static_cast<std::uint8_t>((1u << rank) - 1u);
      for (const auto& v : in) b &= v->broadcastable;
      return in.size() == 1 ? b : static_cast<std::uint8_t>(b & ~(1u << o.axes[0]));
    case op_kind::join_part: return in[1 + static_cast<std::size_t>(o.pass_u)]->broadcastable;
    case op_kind::alloc:  // an extent that is the constant 1
      for (int i = 0; i < rank; ++i) {
        const variable& e = *in[1 + static_cast<std::size_t>(i)];
        if (e.kind == var_kind::constant && e.constant.flat_as_double(0) == 1) b |= static_cast<std::uint8_t>(1u << i);
      }
      return b;
    case op_kind::arange: return 0;
    case op_kind::cumulative: return in[0]->broadcastable;
    case op_kind::dot22:
      if (o.accumulate)
        return static_cast<std::uint8_t>(in[0]->broadcastable & (bit(in[1], 0) | (bit(in[2], 1) << 1)));
      return static_cast<std::uint8_t>(bit(in[0], 0) | (bit(in[1], 1) << 1));
    case op_kind::dot:
      if (in[0]->rank == 2 && in[1]->rank == 1) return bit(in[0], 0);
      if (in[0]->rank == 1 && in[1]->rank == 2) return bit(in[1], 1);
      if (in[0]->rank == 2 && in[1]->rank == 2) return static_cast<std::uint8_t>(bit(in[0], 0) | (bit(in[1], 1) << 1));
      return 0;
  }
  return 0;
}

// compute_test_value: off, or what an input without a test value does (ignore, warn, raise).
enum class test_value_mode : std::uint8_t { off, ignore, warn, raise };
inline test_value_mode test_value_setting() {
  if (test_value_evaluator() == nullptr) return test_value_mode::off;
  try {
    const std::string& m = config.compute_test_value.value();
    return m == "raise" ? test_value_mode::raise : m == "warn" ? test_value_mode::warn
           : m == "ignore" ? test_value_mode::ignore : test_value_mode::off;
  } catch (const config_error&) {
    return test_value_mode::off;  // a bad flag is reported where function() reads the flags
  }
}

inline std::shared_ptr<const ndarray> test_value_of(const variable& v) {
  if (v.kind == var_kind::constant) return std::make_shared<const ndarray>(v.constant);
  if (v.kind == var_kind::shared && !v.test_value) {
    std::lock_guard lock(v.shared->mutex);
    return std::make_shared<const ndarray>(v.shared->value);  // Theano's rule: its current value
  }
  return v.test_value;
}

[[noreturn]] inline void throw_no_test_value(const variable& v, const variable& input, std::size_t k) {
  throw graph_error("xsym: compute_test_value=raise: input " + std::to_string(k) + " of " + v.fn->name() +
                    (v.where.line() ? " at " + site_text(v.where) : std::string()) + " (" +
                    (input.name.empty() ? std::string("an unnamed ") + std::string(dtype_name(input.type)) + " tensor"
                                        : "'" + input.name + "'") +
                    ") has no test value; give it one with xsym::set_test_value(x, value)");
}

// Nodes that rewrites make while function() builds a graph get no test value.
inline bool& test_values_suspended() {
  thread_local bool suspended = false;
  return suspended;
}
class suspend_test_values {
 public:
  suspend_test_values() : m_was(test_values_suspended()) { test_values_suspended() = true; }
  ~suspend_test_values() { test_values_suspended() = m_was; }
  suspend_test_values(const suspend_test_values&) = delete;
  suspend_test_values& operator=(const suspend_test_values&) = delete;

 private:
  bool m_was;
};

// Runs v on its inputs' test values; a node that fails there fails here, naming the user's line.
inline void attach_test_value(variable& v) {
  if (test_values_suspended()) return;
  const test_value_mode mode = test_value_setting();
  if (mode == test_value_mode::off) return;
  for (std::size_t k = 0; k < v.inputs.size(); ++k) {
    const variable& in = *v.inputs[k];
    if (in.kind == var_kind::constant || in.kind == var_kind::shared || in.test_value) continue;
    if (mode == test_value_mode::raise) throw_no_test_value(v, in, k);
    if (mode == test_value_mode::warn && in.kind == var_kind::input)  // an Apply input already warned
      std::fprintf(stderr, "xsym: compute_test_value=warn: %s%s: input '%s' has no test value; not computed\n",
                   v.fn->name().c_str(), v.where.line() ? (" at " + site_text(v.where)).c_str() : "", in.name.c_str());
    return;
  }
  try {
    v.test_value = std::make_shared<const ndarray>(test_value_evaluator()(v));
  } catch (const std::exception& e) {
    std::string msg = "xsym: compute_test_value: " + v.fn->name();
    if (v.where.line()) msg += " made at " + site_text(v.where);
    msg += " fails on its inputs' test values (shapes";
    for (const auto& in : v.inputs) msg += " " + to_string(test_value_of(*in)->shape());
    msg += "): " + std::string(e.what());
    if (dynamic_cast<const shape_error*>(&e)) throw shape_error(msg);
    throw graph_error(msg);
  }
}

inline var_ptr make_apply(op o, std::vector<var_ptr> inputs, dtype t, int rank) {
  auto v = std::make_shared<variable>();
  v->broadcastable = infer_broadcastable(o, inputs, rank);
  v->id = next_variable_id();
  v->kind = var_kind::apply;
  v->type = t;
  v->rank = rank;
  v->fn = std::make_shared<const op>(std::move(o));
  v->inputs = std::move(inputs);
  v->where = build_site();
  attach_test_value(*v);
  return v;
}

// Casts a constant's value now (constant folding) instead of adding a Cast node.
inline ndarray cast_array(const ndarray& a, dtype to) {
  ndarray out = ndarray::empty(to, a.shape());
  const ndarray src = a.contiguous();
  visit_dtype(a.type(), [&](auto from) {
    using F = decltype(from);
    visit_dtype(to, [&](auto t) {
      using T = decltype(t);
      const F* s = src.data_as<F>();
      T* d = out.data_as<T>();
      for (std::int64_t i = 0; i < a.size(); ++i) d[i] = convert_value<T>(s[i]);
    });
  });
  return out;
}

inline var_ptr cast(const var_ptr& v, dtype to) {
  if (v->type == to) return v;
  if (v->kind == var_kind::constant) return make_constant(cast_array(v->constant, to));
  op o;
  o.kind = op_kind::elemwise;
  o.scalar = scalar_op::cast;
  o.cast_to = to;
  return make_apply(std::move(o), {v}, to, v->rank);
}

inline var_ptr dimshuffle(const var_ptr& v, std::vector<int> pattern) {
  std::vector<bool> used(static_cast<std::size_t>(v->rank), false);
  for (int p : pattern) {
    if (p < -1 || p >= v->rank)
      throw graph_error("xsym::dimshuffle: dimension " + std::to_string(p) + " does not exist in a rank-" +
                        std::to_string(v->rank) + " tensor");
    if (p >= 0) {
      if (used[static_cast<std::size_t>(p)])
        throw graph_error("xsym::dimshuffle: dimension " + std::to_string(p) + " appears twice in the pattern");
      used[static_cast<std::size_t>(p)] = true;
    }
  }
  if (static_cast<int>(pattern.size()) > max_rank)
    throw graph_error("xsym::dimshuffle: rank " + std::to_string(pattern.size()) + " exceeds max_rank");
  for (int d = 0; d < v->rank; ++d)
    if (!used[static_cast<std::size_t>(d)] && !((v->broadcastable >> d) & 1u))
      throw graph_error("xsym::dimshuffle: dimension " + std::to_string(d) +
                        " is dropped but is not broadcastable (only dimensions that are always 1 can be dropped)");
  // The identity pattern is no op; a dimshuffle of a dimshuffle is one dimshuffle.
  bool identity = static_cast<int>(pattern.size()) == v->rank;
  for (std::size_t i = 0; identity && i < pattern.size(); ++i) identity = pattern[i] == static_cast<int>(i);
  if (identity) return v;
  if (v->kind == var_kind::apply && v->fn->kind == op_kind::dimshuffle) {
    std::vector<int> composed;
    for (int p : pattern) composed.push_back(p < 0 ? -1 : v->fn->pattern[static_cast<std::size_t>(p)]);
    return dimshuffle(v->inputs[0], std::move(composed));
  }
  op o;
  o.kind = op_kind::dimshuffle;
  o.pattern = std::move(pattern);
  const int rank = static_cast<int>(o.pattern.size());
  return make_apply(std::move(o), {v}, v->type, rank);
}

// Numpy aligns ranks by prepending length-1 axes; a constant is reshaped in place.
inline var_ptr align_rank(const var_ptr& v, int rank) {
  if (v->rank == rank) return v;
  const int extra = rank - v->rank;
  if (v->kind == var_kind::constant) {
    shape_t s;
    s.rank = rank;
    for (int i = 0; i < extra; ++i) s[i] = 1;
    for (int i = 0; i < v->rank; ++i) s[extra + i] = v->constant.shape(i);
    ndarray c = v->constant.contiguous();
    std::array<std::int64_t, max_rank> st{};
    ndarray shaped = c.view(s, st);
    shaped.set_c_strides();
    return make_constant(shaped);
  }
  std::vector<int> pattern(static_cast<std::size_t>(extra), -1);
  for (int i = 0; i < v->rank; ++i) pattern.push_back(i);
  return dimshuffle(v, std::move(pattern));
}

/// The dtype an elementwise op computes in, given its inputs' dtypes (numpy's rules).
inline dtype elemwise_compute_type(scalar_op s, const std::vector<var_ptr>& in) {
  const auto inf = info(s);
  std::size_t first = s == scalar_op::switch_ ? 1 : 0;
  dtype t = in[first]->type;
  for (std::size_t i = first + 1; i < in.size(); ++i) t = promote(t, in[i]->type);
  if (inf.float_only && !is_float(t)) t = dtype::float64;
  return t;
}

inline var_ptr elemwise(scalar_op s, std::vector<var_ptr> in) {
  const auto inf = info(s);
  if (static_cast<int>(in.size()) != inf.arity)
    throw graph_error("xsym: " + std::string(inf.name) + " takes " + std::to_string(inf.arity) + " inputs");
  // numpy's: an integer is its own floor, ceil and round, in its own dtype (through float64
  // one above 2**53 would change).
  if ((s == scalar_op::floor || s == scalar_op::ceil || s == scalar_op::round) &&
      (in[0]->type == dtype::int32 || in[0]->type == dtype::int64))
    return in[0];
  const dtype compute = elemwise_compute_type(s, in);
  if (inf.family == op_family::bitwise && is_float(compute))
    throw graph_error("xsym: " + std::string(inf.name) + " takes integer or bool tensors, not " +
                      std::string(dtype_name(compute)));
  const bool arithmetic = !inf.comparison && s != scalar_op::switch_ && s != scalar_op::cast &&
                          inf.family != op_family::bitwise;
  if (arithmetic && compute == dtype::bool_)
    throw graph_error("xsym: " + std::string(inf.name) +
                      " is not defined on bool tensors; cast them first with xsym::cast<std::int64_t>");
  int rank = 0;
  for (auto& v : in) rank = std::max(rank, v->rank);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const bool is_condition = s == scalar_op::switch_ && i == 0;
    in[i] = align_rank(cast(in[i], is_condition ? dtype::bool_ : compute), rank);
  }
  op o;
  o.kind = op_kind::elemwise;
  o.scalar = s;
  const dtype out = inf.comparison ? dtype::bool_ : compute;
  return make_apply(std::move(o), std::move(in), out, rank);
}

inline std::vector<int> normalize_axes(std::vector<int> axes, int rank, const char* what) {
  for (int& a : axes) {
    const int orig = a;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank)
      throw graph_error(std::string("xsym::") + what + ": axis " + std::to_string(orig) +
                        " is out of range for a rank-" + std::to_string(rank) + " tensor");
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    throw graph_error(std::string("xsym::") + what + ": an axis is repeated");
  return axes;
}

inline dtype reduce_result_type(reduce_op r, dtype in) {
  switch (r) {
    case reduce_op::sum:
    case reduce_op::prod: return is_float(in) ? in : dtype::int64;
    case reduce_op::mean: return is_float(in) ? in : dtype::float64;
    case reduce_op::max:
    case reduce_op::min: return in;
  }
  return in;
}

inline var_ptr reduce(const var_ptr& v, reduce_op r, std::vector<int> axes, bool all) {
  op o;
  o.kind = op_kind::reduce;
  o.reduction = r;
  const char* what = r == reduce_op::sum ? "sum" : r == reduce_op::prod ? "prod" : r == reduce_op::max ? "max"
                     : r == reduce_op::min ? "min" : "mean";
  if (all) {
    o.all_axes = true;
    for (int i = 0; i < v->rank; ++i) o.axes.push_back(i);
  } else {
    o.axes = normalize_axes(std::move(axes), v->rank, what);
    if (static_cast<int>(o.axes.size()) == v->rank) o.all_axes = true;
  }
  const int rank = v->rank - static_cast<int>(o.axes.size());
  const dtype out = reduce_result_type(r, v->type);
  return make_apply(std::move(o), {v}, out, rank);
}

/// The number of elements of v along axes, as a rank-0 tensor of type t (mean and its gradient).
inline var_ptr shape_prod(const var_ptr& v, std::vector<int> axes, dtype t) {
  op o;
  o.kind = op_kind::shape_prod;
  o.axes = std::move(axes);
  return make_apply(std::move(o), {v}, t, 0);
}

/// The reduction of v over every process of comm (sum, prod, max or min), same dtype and shape.
inline var_ptr allreduce(const var_ptr& v, reduce_op r, std::shared_ptr<const communicator> comm) {
  if (!comm) throw graph_error("xsym::allreduce: no communicator");
  if (r == reduce_op::mean)
    throw graph_error("xsym::allreduce: mean is not a collective reduction; divide the sum by the count");
  if (v->type == dtype::bool_ && (r == reduce_op::sum || r == reduce_op::prod))
    throw graph_error("xsym::allreduce: sum and prod are not defined on bool tensors (max is any, min is all)");
  op o;
  o.kind = op_kind::allreduce;
  o.reduction = r;
  o.comm = std::move(comm);
  return make_apply(std::move(o), {v}, v->type, v->rank);
}

/// The int64 position of v's maximum (r = max) or minimum (r = min) along one axis, or over
/// all of v in C order (all).
inline var_ptr arg_reduce(const var_ptr& v, reduce_op r, int axis, bool all) {
  op o;
  o.kind = op_kind::arg_reduce;
  o.reduction = r;
  o.all_axes = all;
  const char* what = r == reduce_op::max ? "argmax" : "argmin";
  if (all) {
    for (int i = 0; i < v->rank; ++i) o.axes.push_back(i);
  } else {
    if (v->rank == 0) throw graph_error(std::string("xsym::") + what + ": a rank-0 tensor has no axis");
    o.axes = normalize_axes({axis}, v->rank, what);
  }
  const int rank = all ? 0 : v->rank - 1;
  return make_apply(std::move(o), {v}, dtype::int64, rank);
}

/// x's rows at the integer indices idx (a vector; negative ones count from the end).
inline var_ptr take(const var_ptr& x, const var_ptr& idx) {
  if (x->rank < 1) throw graph_error("xsym::take: a rank-0 tensor has no rows to take");
  if (idx->rank != 1 || (idx->type != dtype::int32 && idx->type != dtype::int64))
    throw graph_error("xsym::take: the indices must be a vector of int32 or int64");
  op o;
  o.kind = op_kind::take;
  return make_apply(std::move(o), {x, idx}, x->type, x->rank);
}

/// A copy of x with y's rows added at the rows idx names (repeated indices add up).
inline var_ptr inc_rows(const var_ptr& x, const var_ptr& y, const var_ptr& idx) {
  if (x->type == dtype::bool_) throw graph_error("xsym::inc_rows: adding is not defined on bool tensors");
  if (y->type != x->type || y->rank != x->rank)
    throw graph_error("xsym::inc_rows: the rows added must have the tensor's dtype and rank");
  if (idx->rank != 1 || (idx->type != dtype::int32 && idx->type != dtype::int64))
    throw graph_error("xsym::inc_rows: the indices must be a vector of int32 or int64");
  op o;
  o.kind = op_kind::inc_rows;
  return make_apply(std::move(o), {x, y, idx}, x->type, x->rank);
}

/// numpy's basic slicing: x[slices], one entry per leading axis (the others whole). A view.
inline var_ptr subtensor(const var_ptr& x, std::vector<slice_spec> slices) {
  if (slices.size() > static_cast<std::size_t>(x->rank))
    throw graph_error("xsym: " + std::to_string(slices.size()) + " indices into a rank-" + std::to_string(x->rank) +
                      " tensor");
  int rank = x->rank;
  bool whole = true;
  for (const slice_spec& s : slices) {
    if (!s.index && s.step == 0) throw graph_error("xsym: a slice's step cannot be zero");
    rank -= s.index ? 1 : 0;
    whole &= !s.index && !s.has_start && !s.has_stop && s.step == 1;
  }
  if (whole) return x;  // x[:] is x
  op o;
  o.kind = op_kind::subtensor;
  o.slices = std::move(slices);
  return make_apply(std::move(o), {x}, x->type, rank);
}

// inc_subtensor of a value numpy's same_kind casting would not cast to the tensor's dtype (a
// float into an int tensor): numpy's x[...] += y refuses it rather than truncate each value.
[[noreturn]] inline void throw_inc_not_same_kind(const std::string& value, dtype from, dtype to) {
  throw graph_error("xsym::inc_subtensor: cannot add " + value + " of dtype " + std::string(dtype_name(from)) +
                    " into a tensor of dtype " + std::string(dtype_name(to)) + ": numpy's same_kind casting refuses " +
                    std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                    " (each value would be truncated); cast explicitly, the value with xsym::cast<" +
                    std::string(cpp_type_name(to)) + ">(...) or the tensor to a float type first");
}

/// x with the region x[slices] set to y (set) or incremented by y, y broadcast to the region
/// (numpy's x[...] = y and x[...] += y as a value; Theano's set_subtensor, inc_subtensor).
/// set casts y to x's dtype as numpy's assignment does; inc takes only a y that numpy's
/// same_kind rule casts to it.
inline var_ptr inc_subtensor(const var_ptr& x, var_ptr y, std::vector<slice_spec> slices, bool set) {
  const char* what = set ? "xsym::set_subtensor" : "xsym::inc_subtensor";
  if (!set && x->type == dtype::bool_) throw graph_error(std::string(what) + ": adding is not defined on bool tensors");
  if (!set && !casts_same_kind(y->type, x->type)) throw_inc_not_same_kind("a value", y->type, x->type);
  int region = x->rank;
  for (const slice_spec& s : slices) {
    if (!s.index && s.step == 0) throw graph_error(std::string(what) + ": a slice's step cannot be zero");
    region -= s.index ? 1 : 0;
  }
  if (slices.size() > static_cast<std::size_t>(x->rank) || y->rank > region)
    throw graph_error(std::string(what) + ": a rank-" + std::to_string(y->rank) + " value does not fit a rank-" +
                      std::to_string(region) + " region of a rank-" + std::to_string(x->rank) + " tensor");
  y = align_rank(cast(y, x->type), region);
  op o;
  o.kind = op_kind::inc_subtensor;
  o.slices = std::move(slices);
  o.set_values = set;
  return make_apply(std::move(o), {x, std::move(y)}, x->type, x->rank);
}

/// x's elements in C order with shape `dims` (one -1 at most: the extent that keeps the size).
inline var_ptr reshape(const var_ptr& x, std::vector<std::int64_t> dims) {
  if (dims.size() > 4) throw graph_error("xsym::reshape: rank " + std::to_string(dims.size()) + " exceeds 4");
  int unknown = 0;
  for (auto d : dims) {
    if (d < -1) throw graph_error("xsym::reshape: extent " + std::to_string(d) + " is negative (only -1 is allowed)");
    unknown += d == -1;
  }
  if (unknown > 1) throw graph_error("xsym::reshape: at most one extent can be -1");
  op o;
  o.kind = op_kind::reshape;
  o.dims = std::move(dims);
  const int rank = static_cast<int>(o.dims.size());
  return make_apply(std::move(o), {x}, x->type, rank);
}

/// x's elements with the shape `like` has at run time (reshape's gradient).
inline var_ptr reshape_like(const var_ptr& x, const var_ptr& like) {
  op o;
  o.kind = op_kind::reshape;
  o.dims.assign(static_cast<std::size_t>(like->rank), -1);
  return make_apply(std::move(o), {x, like}, x->type, like->rank);
}

/// x's elements in C order with the shape the int scalars `extents` give at run time.
inline var_ptr reshape_to(const var_ptr& x, std::vector<var_ptr> extents) {
  if (extents.size() > 4) throw graph_error("xsym::reshape: rank " + std::to_string(extents.size()) + " exceeds 4");
  op o;
  o.kind = op_kind::reshape;
  o.extents_from_inputs = true;
  o.dims.assign(extents.size(), -1);
  const int rank = static_cast<int>(extents.size());
  std::vector<var_ptr> in{x};
  for (auto& e : extents) {
    if (e->rank != 0 || !(e->type == dtype::int32 || e->type == dtype::int64))
      throw graph_error("xsym::reshape: an extent must be an int32 or int64 scalar");
    in.push_back(cast(e, dtype::int64));
  }
  return make_apply(std::move(o), std::move(in), x->type, rank);
}

/// x, checked when it runs: every condition (a bool scalar) must be true, else an
/// assertion_error with `message`.
inline var_ptr check(const var_ptr& x, std::vector<var_ptr> conditions, std::string message) {
  for (const auto& c : conditions)
    if (c->rank != 0 || c->type != dtype::bool_) throw graph_error("xsym::check: a condition must be a bool scalar");
  op o;
  o.kind = op_kind::check;
  o.message = std::move(message);
  std::vector<var_ptr> in{x};
  in.insert(in.end(), conditions.begin(), conditions.end());
  return make_apply(std::move(o), std::move(in), x->type, x->rank);
}

/// Matrix products batch by batch: a (b, n, k) with c (b, k, m), in their promoted dtype.
inline var_ptr batched_dot(var_ptr a, var_ptr c) {
  if (a->rank != 3 || c->rank != 3)
    throw graph_error("xsym::batched_dot takes two rank-3 tensors; got ranks " + std::to_string(a->rank) + " and " +
                      std::to_string(c->rank));
  if (a->type == dtype::bool_ || c->type == dtype::bool_) throw graph_error("xsym::batched_dot is not defined on bool tensors");
  const dtype t = promote(a->type, c->type);
  op o;
  o.kind = op_kind::batched_dot;
  return make_apply(std::move(o), {cast(a, t), cast(c, t)}, t, 3);
}

/// The tensors laid end to end along `axis` (numpy's concatenate), in their promoted dtype.
inline var_ptr join(std::vector<var_ptr> xs, int axis) {
  if (xs.empty()) throw graph_error("xsym::concatenate: nothing to join");
  const int rank = xs[0]->rank;
  dtype t = xs[0]->type;
  for (const auto& v : xs) {
    if (v->rank != rank)
      throw graph_error("xsym::concatenate: the tensors have ranks " + std::to_string(rank) + " and " +
                        std::to_string(v->rank) + "; they must be equal");
    t = promote(t, v->type);
  }
  op o;
  o.kind = op_kind::join;
  o.axes = normalize_axes({axis}, rank, "concatenate");
  for (auto& v : xs) v = cast(v, t);
  return make_apply(std::move(o), std::move(xs), t, rank);
}

/// The part of `joined` (a Join along axis of `parts`) where parts[k] lay.
inline var_ptr join_part(const var_ptr& joined, const std::vector<var_ptr>& parts, int k, int axis) {
  op o;
  o.kind = op_kind::join_part;
  o.axes = {axis};
  o.pass_u = k;
  std::vector<var_ptr> in{joined};
  in.insert(in.end(), parts.begin(), parts.end());
  return make_apply(std::move(o), std::move(in), joined->type, joined->rank);
}

/// An array of shape `extents` (int scalars) filled with `value` broadcast to it (Theano's alloc).
inline var_ptr alloc(var_ptr value, std::vector<var_ptr> extents) {
  if (extents.size() > 4) throw graph_error("xsym::alloc: rank " + std::to_string(extents.size()) + " exceeds 4");
  if (static_cast<std::size_t>(value->rank) > extents.size())
    throw graph_error("xsym::alloc: a rank-" + std::to_string(value->rank) + " value does not fit a rank-" +
                      std::to_string(extents.size()) + " array");
  for (auto& e : extents) {
    if (e->rank != 0 || !(e->type == dtype::int32 || e->type == dtype::int64))
      throw graph_error("xsym::alloc: an extent must be an int32 or int64 scalar");
    e = cast(e, dtype::int64);
  }
  const int rank = static_cast<int>(extents.size());
  const dtype t = value->type;
  std::vector<var_ptr> in{align_rank(value, rank)};
  in.insert(in.end(), extents.begin(), extents.end());
  op o;
  o.kind = op_kind::alloc;
  return make_apply(std::move(o), std::move(in), t, rank);
}

/// numpy's arange(start, stop, step) in dtype t (the scalars cast to it).
inline var_ptr arange(const var_ptr& start, const var_ptr& stop, const var_ptr& step, dtype t) {
  if (start->rank != 0 || stop->rank != 0 || step->rank != 0)
    throw graph_error("xsym::arange: start, stop and step are scalars");
  if (t == dtype::bool_) throw graph_error("xsym::arange: no bool ranges");
  op o;
  o.kind = op_kind::arange;
  o.cast_to = t;
  return make_apply(std::move(o), {cast(start, t), cast(stop, t), cast(step, t)}, t, 1);
}

/// The running sum (r = sum) or product (prod) of v along `axis` (numpy's cumsum, cumprod).
inline var_ptr cumulative(const var_ptr& v, reduce_op r, int axis) {
  const char* what = r == reduce_op::sum ? "cumsum" : "cumprod";
  if (v->rank == 0) throw graph_error(std::string("xsym::") + what + ": a rank-0 tensor has no axis");
  if (v->type == dtype::bool_) throw graph_error(std::string("xsym::") + what + " is not defined on bool tensors");
  op o;
  o.kind = op_kind::cumulative;
  o.reduction = r;
  o.axes = normalize_axes({axis}, v->rank, what);
  return make_apply(std::move(o), {v}, v->type, v->rank);
}

inline var_ptr dot(var_ptr a, var_ptr b) {
  if (a->rank < 1 || a->rank > 2 || b->rank < 1 || b->rank > 2)
    throw graph_error("xsym::dot takes vectors and matrices; got ranks " + std::to_string(a->rank) + " and " +
                      std::to_string(b->rank));
  if (a->type == dtype::bool_ || b->type == dtype::bool_)
    throw graph_error("xsym::dot is not defined on bool tensors");
  const dtype t = promote(a->type, b->type);
  a = cast(a, t);
  b = cast(b, t);
  op o;
  o.kind = op_kind::dot;
  const int rank = a->rank + b->rank - 2;
  return make_apply(std::move(o), {std::move(a), std::move(b)}, t, rank);
}
XSYM_COLD_END
}  // namespace detail

}  // namespace xsym

#endif
