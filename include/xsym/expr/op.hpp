#ifndef XSYM_EXPR_OP_HPP
#define XSYM_EXPR_OP_HPP

#include <charconv>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "ndarray.hpp"
#include "op_table.hpp"
#include "../config/cold.hpp"

namespace xsym {

/// @brief The scalar function an Elemwise op applies to every element (one per row of
/// expr/op_table.hpp, in its order).
enum class scalar_op : std::uint8_t {
#define XSYM_OP_ID(id, ...) id,
  XSYM_OP_TABLE(XSYM_OP_ID)
#undef XSYM_OP_ID
};

/// @brief How an op treats element types (see expr/op_table.hpp).
enum class op_family : std::uint8_t { wrapping, any, floating, comparison, special, bitwise };

struct scalar_op_info {
  std::string_view name;        // as Theano prints it inside Elemwise{...}
  int arity;
  std::string_view infix;       // non-empty for ops printed infix in a Composite
  op_family family;
  int flops;                    // per element, for the profile
  std::string_view expression;  // the row's value text, as the JIT compiles it
  std::string_view derivative;
  bool comparison;
  bool float_only;              // computes in floating point (ints are cast to float64 first)
};

inline constexpr scalar_op_info scalar_op_table[] = {
#define XSYM_OP_INFO(id, name, arity, infix, family, flops, derivative, ...)                              \
  {name, arity, infix, op_family::family, flops, XSYM_STRINGIFY(__VA_ARGS__), XSYM_STRINGIFY(derivative), \
   op_family::family == op_family::comparison, op_family::family == op_family::floating},
    XSYM_OP_TABLE(XSYM_OP_INFO)
#undef XSYM_OP_INFO
};
inline constexpr int scalar_op_count = static_cast<int>(sizeof scalar_op_table / sizeof scalar_op_table[0]);

constexpr const scalar_op_info& info(scalar_op op) { return scalar_op_table[static_cast<int>(op)]; }

namespace detail {
/// One op's term in a Composite's text, from its operands' terms: "(i0 + i1)", "exp(i0)";
/// first_op is the op at the top of the first operand's term (add and mul chains print flat,
/// "(i0 + i1 + i2)"). The run-time fusion and the typed trees (expr/typed.hpp) both write it.
constexpr std::string composite_term(scalar_op op, dtype out_type, const std::string* args, std::size_t n,
                                     scalar_op first_op) {
  const auto& inf = info(op);
  // Appended to one string: GCC 12 rejects some string temporaries in constant evaluation.
  std::string t;
  if (!inf.infix.empty()) {
    const std::string& a = args[0];
    const bool flat = first_op == op && (op == scalar_op::add || op == scalar_op::mul) && a.size() > 2;
    t += '(';
    t.append(a, flat ? 1 : 0, flat ? a.size() - 2 : a.size());
    t += ' ';
    t += inf.infix;
    t += ' ';
    t += args[1];
    t += ')';
    return t;
  }
  if (op == scalar_op::neg) {
    t += "(-";
    t += args[0];
    t += ')';
    return t;
  }
  if (op == scalar_op::cast) {
    t += "Cast{";
    t += dtype_name(out_type);
    t += "}(";
    t += args[0];
    t += ')';
    return t;
  }
  t += op == scalar_op::switch_ ? std::string_view("Switch") : inf.name;
  if (inf.comparison)
    for (auto& ch : t)
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
  t += '(';
  for (std::size_t j = 0; j < n; ++j) {
    if (j) t += ", ";
    t += args[j];
  }
  t += ')';
  return t;
}
}  // namespace detail

/// @brief A reduction's combining function.
enum class reduce_op : std::uint8_t { sum, prod, max, min, mean };

constexpr std::string_view reduce_name(reduce_op r) {
  switch (r) {
    case reduce_op::sum: return "Sum";
    case reduce_op::prod: return "Prod";
    case reduce_op::max: return "Max";
    case reduce_op::min: return "Min";
    case reduce_op::mean: return "Mean";
  }
  return "?";
}

/// @brief Which family an op belongs to: the "Class" section of a profile.
enum class op_kind : std::uint8_t {
  elemwise, composite, dimshuffle, reduce, dot, gemv, dot22, shape_prod, transfer,
  // dot(A.T, g) where g is an output of a Composite reading dot(A, x): one pass over A's rows
  // (rewrite/one_pass.hpp). Inputs (A, x, [y0,] the Composite's other inputs); outputs the
  // Composite's, then the product.
  one_pass_gemv,
  // A collective across processes (the optional MPI layer, <xsym/mpi.hpp>): the elementwise
  // reduction of one input over every rank of the op's communicator.
  allreduce,
  // Integer-array indexing along the first axis (numpy's x[idx], Theano's AdvancedSubtensor1):
  // inputs (x, idx); and its gradient, a copy of x with the rows of y added at idx (repeated
  // indices add up; AdvancedIncSubtensor1): inputs (x, y, idx).
  take,
  inc_rows,
  // The position of the maximum (reduction max) or minimum (min) along `axes` (one axis, or
  // all_axes: the flat C-order index), as int64; the first one on ties, a NaN counting as
  // the extreme (numpy's argmax and argmin).
  arg_reduce,
  // Basic slicing (numpy's x[1:-1, ::2, 3]): a view of x by `slices` (Theano's Subtensor).
  subtensor,
  // A copy of x with the region `slices` names set to y or incremented by y, y broadcast to
  // the region: inputs (x, y) (Theano's IncSubtensor; in place on x when it dies there).
  inc_subtensor,
  // x's elements in C order under another shape: a view when x is C-contiguous. Inputs (x),
  // the shape `dims` with at most one -1; or (x, like), the shape of `like` (a gradient).
  reshape,
  // The inputs laid end to end along axes[0] (numpy's concatenate).
  join,
  // Part pass_u of a Join along axes[0]: inputs (joined, the Join's inputs); a view of the
  // joined array where that input lay (the Join's gradient).
  join_part,
  // An array of the shape given by int scalar inputs, filled with the first input broadcast to
  // it: inputs (value, extent 0, extent 1, ...) (Theano's Alloc: zeros, ones, full).
  alloc,
  // numpy's arange: inputs (start, stop, step), scalars of the output's dtype.
  arange,
  // The running sum (reduction sum) or product (prod) along axes[0] (numpy's cumsum, cumprod;
  // Theano's CumOp).
  cumulative,
  // Matrix products batch by batch: (b, n, k) x (b, k, m) -> (b, n, m) (Theano's BatchedDot).
  batched_dot,
  // Input 0 unchanged (a view) when every other input, a bool scalar, is true; else an
  // assertion_error with `message` (Theano's Assert).
  check
};

/// @brief One axis of a basic slice: numpy's start:stop:step (absent ends are the axis's
/// ends in the step's direction), or an integer index, which drops the axis.
struct slice_spec {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  bool has_start = false;
  bool has_stop = false;
  bool index = false;  // x[start]: the axis is dropped
  friend bool operator==(const slice_spec&, const slice_spec&) = default;
};

namespace detail {
// One axis of a basic slice on an axis of n elements, by numpy's rules: the first element, the
// count and the step. An index out of [-n, n) is an index_error naming it.
struct axis_range {
  std::int64_t start = 0, count = 0, step = 1;
};
inline axis_range resolve_slice(const slice_spec& s, std::int64_t n, int axis) {
  if (s.index) {
    if (s.start < -n || s.start >= n)
      throw index_error("index " + std::to_string(s.start) + " is out of range for axis " + std::to_string(axis) +
                        " with " + std::to_string(n) + " elements");
    return {s.start < 0 ? s.start + n : s.start, 1, 1};
  }
  auto clamp = [](std::int64_t v, std::int64_t lo, std::int64_t hi) { return v < lo ? lo : v > hi ? hi : v; };
  auto wrap = [&](std::int64_t v) { return v < 0 ? v + n : v; };
  // The count as 1 + (distance - 1) / |step|, in unsigned: b - a + step - 1 and -step overflow
  // for steps near the int64 limits. Where at most one element is taken the stride is never
  // walked, so the step is 1 (x.stride * step would overflow for a step longer than the axis).
  auto result = [](std::int64_t first, std::int64_t distance, std::int64_t step) -> axis_range {
    if (distance <= 0) return {first, 0, 1};
    const std::uint64_t magnitude = step > 0 ? static_cast<std::uint64_t>(step) : std::uint64_t{0} - static_cast<std::uint64_t>(step);
    const auto count = static_cast<std::int64_t>(1 + (static_cast<std::uint64_t>(distance) - 1) / magnitude);
    return {first, count, count > 1 ? step : 1};
  };
  if (s.step > 0) {
    const std::int64_t a = s.has_start ? clamp(wrap(s.start), 0, n) : 0;
    const std::int64_t b = s.has_stop ? clamp(wrap(s.stop), 0, n) : n;
    return result(a, b - a, s.step);
  }
  const std::int64_t a = s.has_start ? clamp(wrap(s.start), -1, n - 1) : n - 1;
  const std::int64_t b = s.has_stop ? clamp(wrap(s.stop), -1, n - 1) : -1;
  return result(a, a - b, s.step);
}


// The number of elements x[slices] has, for x of shape s.
inline std::int64_t region_size(const std::vector<slice_spec>& slices, const shape_t& s) {
  std::int64_t n = 1;
  for (int d = 0; d < s.rank; ++d)
    n *= d < static_cast<int>(slices.size()) ? resolve_slice(slices[static_cast<std::size_t>(d)], s[d], d).count : s[d];
  return n;
}
}  // namespace detail

/// @brief A group of processes that reduces arrays together (an MPI communicator). expr knows
/// only this interface; <xsym/mpi.hpp> implements it, so a program without it needs no MPI.
class communicator {
 public:
  virtual ~communicator() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  virtual std::string name() const = 0;
  /// @brief out = the reduction of `in` over every rank. Every rank calls it with the same
  /// dtype and shape; where they differ, every rank throws (naming both shapes), none hangs.
  /// wait_ticks receives the part spent waiting for the other ranks to arrive.
  virtual void allreduce(const ndarray& in, ndarray& out, reduce_op r, std::uint64_t& wait_ticks) const = 0;
  /// @brief A call of a function holding `nodes` AllReduce nodes on this communicator starts.
  /// Called before anything in the call can fail, so that a rank whose call fails before its
  /// AllReduce still counts it and the ranks can tell that they are out of step.
  virtual void begin_call(int nodes) const { (void)nodes; }
};

/// @brief One instruction of a fused elementwise program (see compile/elemwise.hpp).
struct instruction {
  scalar_op op;
  dtype in_type;   // the type the op computes in (the condition of a switch is bool)
  dtype out_type;
  int args[3];     // register numbers; registers [0, n_inputs) are the node's inputs
  int dst;
};

/// @brief A fused elementwise kernel: straight-line code over registers.
struct program {
  int n_inputs = 0;
  std::vector<dtype> reg_types;  // one per register, inputs first
  std::vector<instruction> code;
  std::vector<int> outputs;      // register of each output
  std::string text;              // "((i0 + i1 + i2) * i3)"
  std::vector<std::string> absorbed;  // names of the ops it replaced, for the profile
};

namespace detail {
XSYM_COLD_BEGIN  // fusion and linking: once per function
/// The text of every register of p, as Theano prints a Composite (inputs i0, i1, ...): an
/// output's term is what its Composite, or a program of it alone, is named by.
inline std::vector<std::string> register_texts(const program& p) {
  std::vector<std::string> text(p.reg_types.size());
  std::vector<scalar_op> last_op(p.reg_types.size(), scalar_op::identity);
  for (int r = 0; r < p.n_inputs; ++r) text[static_cast<std::size_t>(r)] = "i" + std::to_string(r);
  for (const auto& ins : p.code) {
    std::string args[3];
    const int arity = info(ins.op).arity;
    for (int j = 0; j < arity; ++j) args[j] = text[static_cast<std::size_t>(ins.args[j])];
    text[static_cast<std::size_t>(ins.dst)] =
        composite_term(ins.op, ins.out_type, args, static_cast<std::size_t>(arity), last_op[static_cast<std::size_t>(ins.args[0])]);
    last_op[static_cast<std::size_t>(ins.dst)] = ins.op;
  }
  return text;
}
XSYM_COLD_END
}  // namespace detail

/// @brief An operation: what an Apply node computes. Immutable once built.
struct op {
  op_kind kind = op_kind::elemwise;
  scalar_op scalar = scalar_op::identity;
  dtype cast_to = dtype::float64;              // for scalar_op::cast
  std::vector<int> pattern;                    // dimshuffle: input dim, or -1 for 'x'
  reduce_op reduction = reduce_op::sum;
  std::vector<int> axes;                       // reduce: sorted; empty with all_axes
  bool all_axes = false;
  bool transpose_a = false;                    // gemv: the matrix is used transposed
  bool accumulate = false;                     // gemv: inputs (y0, A, x), output beta * y0 + alpha * op(A) x
  double alpha = 1.0;
  double beta = 1.0;                           // gemv only; Gemm's is 1
  std::shared_ptr<const program> fused;        // composite; one_pass_gemv, inc_subtensor (set): its Composite
  int pass_u = 0;                              // one_pass_gemv: the Composite's input that is dot(A, x)
  int pass_g = 0;                              // one_pass_gemv: the Composite's output the product reads
  std::vector<std::pair<int, int>> destroy_map;  // (output, input) pairs written in place
  bool on_gpu = false;                         // runs on the device (device=cuda)
  bool to_device = false;                      // transfer: GpuFromHost (else HostFromGpu)
  std::shared_ptr<const communicator> comm;    // allreduce: the processes it reduces over
  std::vector<slice_spec> slices;              // subtensor, inc_subtensor: one per leading axis
  bool set_values = false;                     // inc_subtensor: set (else increment)
  std::uint8_t value_broadcastable = 0;        // inc_subtensor with a fused value: the value's pattern
  std::vector<std::int64_t> dims;              // reshape: the new shape, one -1 at most
  bool extents_from_inputs = false;            // reshape: inputs (x, extent 0, ...), int64 scalars
  std::string message;                         // check: what a false condition means

  bool is_inplace() const { return !destroy_map.empty(); }
  XSYM_COLD_BEGIN  // names and text: graph building, reports, debugprint
  /// @brief (output, input) pairs where the output is a view of the input (Theano's view_map).
  std::vector<std::pair<int, int>> view_map() const {
    if (is_view()) return {{0, 0}};
    return {};
  }
  bool is_view() const {
    return kind == op_kind::dimshuffle || kind == op_kind::subtensor || kind == op_kind::reshape ||
           kind == op_kind::join_part || kind == op_kind::check;
  }

  /// @brief The op's name as the profile's Ops section prints it.
  std::string name() const {
    if (kind == op_kind::transfer) return to_device ? "GpuFromHost" : "HostFromGpu";
    if (on_gpu) return gpu_name();
    return cpu_name();
  }

  /// @brief The op's class, as the profile's Class section prints it.
  std::string class_name() const {
    if (kind == op_kind::transfer) return to_device ? "xsym::GpuFromHost" : "xsym::HostFromGpu";
    std::string c = cpu_class_name();
    return on_gpu ? "xsym::Gpu" + c.substr(6) : c;
  }

 private:
  // Theano's GPU names: GpuElemwise{...}, GpuCAReduce{add}{0}, GpuGemv{...}, GpuDimShuffle{...}.
  std::string gpu_name() const {
    if (kind == op_kind::reduce) {
      const char* scalar = reduction == reduce_op::sum    ? "add"
                           : reduction == reduce_op::prod ? "mul"
                           : reduction == reduce_op::max  ? "maximum"
                           : reduction == reduce_op::min  ? "minimum"
                                                          : "mean";
      std::string n = std::string("GpuCAReduce{") + scalar + "}";
      if (all_axes) return n;
      n += "{";
      for (std::size_t i = 0; i < axes.size(); ++i) n += (i ? "," : "") + std::to_string(axes[i]);
      return n + "}";
    }
    std::string n = cpu_name();
    if (kind == op_kind::dimshuffle) return "Gpu" + n.substr(7);  // InplaceDimShuffle -> GpuDimShuffle
    if (kind == op_kind::dot) return "GpuDot";
    return "Gpu" + n;
  }

  // The fused program as a name prints it: Composite{text}, a long text as Theano's "...".
  std::string composite_part() const {
    return "Composite{" + (fused->text.size() > 80 ? std::string("...") : fused->text) + "}";
  }

  std::string cpu_name() const {
    const std::string inplace = destroy_map.empty() ? "no_inplace" : "inplace";
    switch (kind) {
      case op_kind::elemwise:
        if (scalar == scalar_op::cast) {
          std::string n = "Elemwise{Cast{" + std::string(dtype_name(cast_to)) + "}}";
          return destroy_map.empty() ? n : n + destroy_suffix();
        }
        return "Elemwise{" + std::string(info(scalar).name) + "," + inplace + "}";
      case op_kind::composite:
        // Long composites print as Theano's do; the profile lists their full text and parts.
        return "Elemwise{" + composite_part() + "}" +
               destroy_suffix();
      case op_kind::dimshuffle: {
        std::string n = "InplaceDimShuffle{";
        for (std::size_t i = 0; i < pattern.size(); ++i)
          n += (i ? "," : "") + (pattern[i] < 0 ? std::string("x") : std::to_string(pattern[i]));
        return n + "}";
      }
      case op_kind::reduce: {
        // A fused input's program follows the axes: Sum{Composite{sqr((i0 - i1))}}, Sum{1;Composite{(i0 * i1)}}.
        std::string n(reduce_name(reduction));
        std::string f;
        if (fused) f = composite_part();
        if (all_axes) return f.empty() ? n : n + "{" + f + "}";  // Theano prints a full reduction without axes
        n += "{";
        for (std::size_t i = 0; i < axes.size(); ++i) n += (i ? "," : "") + std::to_string(axes[i]);
        return n + (f.empty() ? "" : ";" + f) + "}";
      }
      case op_kind::dot: return "dot";
      case op_kind::gemv:
        if (accumulate) {
          char buf[64];
          if (beta == 1.0) std::snprintf(buf, sizeof buf, ",alpha=%g", alpha);
          else std::snprintf(buf, sizeof buf, ",alpha=%g,beta=%g", alpha, beta);
          return "Gemv{" + inplace + buf + "}";
        }
        return "Gemv{" + inplace + "}";
      case op_kind::dot22:
        if (accumulate) {
          char buf[64];
          std::snprintf(buf, sizeof buf, ",alpha=%g", alpha);
          return "Gemm{" + inplace + buf + "}";
        }
        return "Dot22";
      case op_kind::shape_prod: {
        std::string n = axes.size() == 1 ? "Shape_i{" : "ShapeProd{";
        for (std::size_t i = 0; i < axes.size(); ++i) n += (i ? "," : "") + std::to_string(axes[i]);
        return n + "}";
      }
      case op_kind::transfer: return "Transfer";
      case op_kind::allreduce: {
        const char* r = reduction == reduce_op::sum ? "sum" : reduction == reduce_op::prod ? "prod"
                        : reduction == reduce_op::max ? "max" : "min";
        return std::string("AllReduce{") + r + "}";
      }
      case op_kind::arg_reduce:
        return std::string(reduction == reduce_op::max ? "Argmax" : "Argmin") + "{axis=" +
               (all_axes ? std::string("None") : "(" + std::to_string(axes[0]) + ",)") + "}";
      case op_kind::take: return "AdvancedSubtensor1";
      case op_kind::subtensor: return "Subtensor{" + slices_text() + "}";
      case op_kind::inc_subtensor:
        return std::string("IncSubtensor{") + (destroy_map.empty() ? "" : "Inplace") + (set_values ? "Set;" : "Inc;") +
               slices_text() +
               (fused ? ";" + composite_part() : std::string()) +
               "}";
      case op_kind::reshape: return "Reshape{" + std::to_string(dims.size()) + "}";
      case op_kind::join: return "Join{axis=" + std::to_string(axes[0]) + "}";
      case op_kind::join_part: return "Split{axis=" + std::to_string(axes[0]) + ",part=" + std::to_string(pass_u) + "}";
      case op_kind::alloc: return "Alloc";
      case op_kind::batched_dot: return "BatchedDot";
      case op_kind::check: return "Assert{" + message + "}";
      case op_kind::arange: return "ARange{" + std::string(dtype_name(cast_to)) + "}";
      case op_kind::cumulative:
        return "CumOp{" + std::to_string(axes[0]) + (reduction == reduce_op::sum ? ", add}" : ", mul}");
      case op_kind::inc_rows: return "AdvancedIncSubtensor1{" + inplace + ",inc}";
      case op_kind::one_pass_gemv: {
        std::string n = "OnePassGemv{" + composite_part();
        char buf[64];
        if (!accumulate) buf[0] = 0;
        else if (beta == 1.0) std::snprintf(buf, sizeof buf, ",alpha=%g", alpha);
        else std::snprintf(buf, sizeof buf, ",alpha=%g,beta=%g", alpha, beta);
        return n + buf + "}";
      }
    }
    return "?";
  }

  std::string cpu_class_name() const {
    switch (kind) {
      case op_kind::elemwise:
      case op_kind::composite: return "xsym::Elemwise";
      case op_kind::dimshuffle: return "xsym::DimShuffle";
      case op_kind::reduce: return "xsym::CAReduce";
      case op_kind::dot: return "xsym::Dot";
      case op_kind::gemv: return "xsym::Gemv";
      case op_kind::dot22: return accumulate ? "xsym::Gemm" : "xsym::Dot22";
      case op_kind::shape_prod: return "xsym::Shape";
      case op_kind::transfer: return "xsym::Transfer";
      case op_kind::one_pass_gemv: return "xsym::OnePassGemv";
      case op_kind::allreduce: return "xsym::AllReduce";
      case op_kind::arg_reduce: return reduction == reduce_op::max ? "xsym::Argmax" : "xsym::Argmin";
      case op_kind::take: return "xsym::AdvancedSubtensor1";
      case op_kind::inc_rows: return "xsym::AdvancedIncSubtensor1";
      case op_kind::subtensor: return "xsym::Subtensor";
      case op_kind::inc_subtensor: return "xsym::IncSubtensor";
      case op_kind::reshape: return "xsym::Reshape";
      case op_kind::join: return "xsym::Join";
      case op_kind::join_part: return "xsym::Split";
      case op_kind::alloc: return "xsym::Alloc";
      case op_kind::batched_dot: return "xsym::BatchedDot";
      case op_kind::check: return "xsym::Assert";
      case op_kind::arange: return "xsym::ARange";
      case op_kind::cumulative: return "xsym::CumOp";
    }
    return "?";
  }

 public:
  /// @brief Two ops with the same signature compute the same function (merge uses it).
  std::string signature() const {
    std::string sig = name() + (transpose_a ? "/T" : "") +
                      (fused ? "/" + fused->text : std::string());
    if (kind == op_kind::one_pass_gemv) sig += "/" + std::to_string(pass_u) + "/" + std::to_string(pass_g);
    if (kind == op_kind::reshape) {
      for (auto d : dims) sig += "/" + std::to_string(d);
      if (extents_from_inputs) sig += "/inputs";
    }
    if (kind == op_kind::allreduce) {  // one communicator's reduction is not another's
      char buf[32];
      std::snprintf(buf, sizeof buf, "/%p", static_cast<const void*>(comm.get()));
      sig += buf;
    }
    if (accumulate) {
      // The name prints alpha and beta to 6 digits; two products differing further are not one.
      char buf[64];
      std::snprintf(buf, sizeof buf, "/%.17g/%.17g", alpha, beta);
      sig += buf;
    }
    return sig;
  }

 private:
  // Theano's text of a slice: "1:-1:" per axis (start:stop:step, absent parts empty), "3"
  // for an index, axes separated by ", ".
  std::string slices_text() const {
    std::string t;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      const slice_spec& s = slices[i];
      if (i) t += ", ";
      if (s.index) {
        t += std::to_string(s.start);
        continue;
      }
      t += (s.has_start ? std::to_string(s.start) : "") + ":" + (s.has_stop ? std::to_string(s.stop) : "") + ":" +
           (s.step != 1 ? std::to_string(s.step) : "");
    }
    return t;
  }

  std::string destroy_suffix() const {
    if (destroy_map.empty()) return "";
    std::string s = "[";
    for (std::size_t i = 0; i < destroy_map.size(); ++i)
      s += (i ? ", " : "") + std::string("(") + std::to_string(destroy_map[i].first) + ", " +
           std::to_string(destroy_map[i].second) + ")";
    return s + "]";
  }
  XSYM_COLD_END
};

XSYM_COLD_BEGIN
namespace detail {
// Shortest text that reads back to the same value, with a ".0" on whole floats (Python's repr).
inline std::string format_number(double v, bool floating) {
  if (!floating) return std::to_string(static_cast<std::int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

inline std::string format_float_for(dtype t, double v) {
  if (t == dtype::float32) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
    std::string s(buf, r.ptr);
    if (s.find_first_of(".eni") == std::string::npos) s += ".0";
    return s;
  }
  return format_number(v, is_float(t));
}
}  // namespace detail
XSYM_COLD_END

}  // namespace xsym

#endif
