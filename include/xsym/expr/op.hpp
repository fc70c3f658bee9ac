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
#include "../config/cold.hpp"

namespace xsym {

/// @brief The scalar function an Elemwise op applies to every element.
enum class scalar_op : std::uint8_t {
  add, sub, mul, true_div, neg, pow, sqr, sqrt, exp, log, log1p, expm1, abs, tanh,
  sigmoid, softplus, maximum, minimum, gt, lt, ge, le, eq, neq, switch_, cast, identity
};

struct scalar_op_info {
  std::string_view name;   // as Theano prints it inside Elemwise{...}
  int arity;
  std::string_view infix;  // non-empty for ops printed infix in a Composite
  bool comparison;
  bool float_only;         // computes in floating point (ints are cast to float64 first)
};

constexpr scalar_op_info info(scalar_op op) {
  switch (op) {
    case scalar_op::add: return {"add", 2, "+", false, false};
    case scalar_op::sub: return {"sub", 2, "-", false, false};
    case scalar_op::mul: return {"mul", 2, "*", false, false};
    case scalar_op::true_div: return {"true_div", 2, "/", false, true};
    case scalar_op::neg: return {"neg", 1, "", false, false};
    case scalar_op::pow: return {"pow", 2, "", false, true};
    case scalar_op::sqr: return {"sqr", 1, "", false, false};
    case scalar_op::sqrt: return {"sqrt", 1, "", false, true};
    case scalar_op::exp: return {"exp", 1, "", false, true};
    case scalar_op::log: return {"log", 1, "", false, true};
    case scalar_op::log1p: return {"log1p", 1, "", false, true};
    case scalar_op::expm1: return {"expm1", 1, "", false, true};
    case scalar_op::abs: return {"abs_", 1, "", false, false};
    case scalar_op::tanh: return {"tanh", 1, "", false, true};
    case scalar_op::sigmoid: return {"scalar_sigmoid", 1, "", false, true};
    case scalar_op::softplus: return {"scalar_softplus", 1, "", false, true};
    case scalar_op::maximum: return {"maximum", 2, "", false, false};
    case scalar_op::minimum: return {"minimum", 2, "", false, false};
    case scalar_op::gt: return {"gt", 2, "", true, false};
    case scalar_op::lt: return {"lt", 2, "", true, false};
    case scalar_op::ge: return {"ge", 2, "", true, false};
    case scalar_op::le: return {"le", 2, "", true, false};
    case scalar_op::eq: return {"eq", 2, "", true, false};
    case scalar_op::neq: return {"neq", 2, "", true, false};
    case scalar_op::switch_: return {"switch", 3, "", false, false};
    case scalar_op::cast: return {"cast", 1, "", false, false};
    case scalar_op::identity: return {"identity", 1, "", false, false};
  }
  return {"?", 0, "", false, false};
}

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
enum class op_kind : std::uint8_t { elemwise, composite, dimshuffle, reduce, dot, gemv, dot22, shape_prod, transfer };

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
  std::shared_ptr<const program> fused;        // composite
  std::vector<std::pair<int, int>> destroy_map;  // (output, input) pairs written in place
  bool on_gpu = false;                         // runs on the device (device=cuda)
  bool to_device = false;                      // transfer: GpuFromHost (else HostFromGpu)

  bool is_inplace() const { return !destroy_map.empty(); }
  XSYM_COLD_BEGIN  // names and text: graph building, reports, debugprint
  /// @brief (output, input) pairs where the output is a view of the input (Theano's view_map).
  std::vector<std::pair<int, int>> view_map() const {
    if (kind == op_kind::dimshuffle) return {{0, 0}};
    return {};
  }
  bool is_view() const { return kind == op_kind::dimshuffle; }

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
        return "Elemwise{Composite{" + (fused->text.size() > 80 ? std::string("...") : fused->text) + "}}" +
               destroy_suffix();
      case op_kind::dimshuffle: {
        std::string n = "InplaceDimShuffle{";
        for (std::size_t i = 0; i < pattern.size(); ++i)
          n += (i ? "," : "") + (pattern[i] < 0 ? std::string("x") : std::to_string(pattern[i]));
        return n + "}";
      }
      case op_kind::reduce: {
        std::string n(reduce_name(reduction));
        if (all_axes) return n;  // Theano prints a full reduction without axes
        n += "{";
        for (std::size_t i = 0; i < axes.size(); ++i) n += (i ? "," : "") + std::to_string(axes[i]);
        return n + "}";
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
    }
    return "?";
  }

 public:
  /// @brief Two ops with the same signature compute the same function (merge uses it).
  std::string signature() const {
    std::string sig = name() + (transpose_a ? "/T" : "") + (kind == op_kind::composite ? "/" + fused->text : std::string());
    if (accumulate) {
      // The name prints alpha and beta to 6 digits; two products differing further are not one.
      char buf[64];
      std::snprintf(buf, sizeof buf, "/%.17g/%.17g", alpha, beta);
      sig += buf;
    }
    return sig;
  }

 private:
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
