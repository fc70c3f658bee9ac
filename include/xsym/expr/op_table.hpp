#ifndef XSYM_EXPR_OP_TABLE_HPP
#define XSYM_EXPR_OP_TABLE_HPP

// Every scalar op, one row each. The rows are text: each layer expands them with its own
// meaning for the names they use, so an op is written once and every reader agrees.
//
//   OP(id, name, arity, infix, family, flops, derivative, expression)
//
// id          scalar_op::id
// name        as Theano prints it inside Elemwise{...}
// arity       number of inputs
// infix       its spelling inside a Composite's text ("" for a call: name(i0, i1))
// family      wrapping    arithmetic on any non-bool type; on integers it wraps around (numpy)
//             any         arithmetic on any non-bool type
//             floating    computes in floating point: integer inputs are cast to float64
//             comparison  bool result
//             bitwise     integers and bool only (and, or, xor, invert)
//             special     switch, cast, identity: kernels of their own (two element types)
// flops       floating-point operations per element, for the profile
// derivative  (adjoint of each input) given z = op(a, b), its adjoint g and constants c(v)
//             of z's type, in grad/grad.hpp's helpers; nullptr where none flows
// expression  the value, from a (and b), in the helpers every backend defines for scalars and
//             its vectors: vneg vpow vsqrt vexp vlog vlog1p vexpm1 vabs vtanh vsigmoid vmax
//             vmaximum vminimum vfloor vceil vround_even, and vlane1(a, f), f applied to
//             each value (backend/cpu/vector_math.hpp, backend/gpu/kernels.hpp),
//             X being the value's type. Special rows' expressions are documentation only.
//
// A program may append rows of its own: define XSYM_USER_OPS(OP) with rows of this form before
// including xsym, identically in every translation unit (docs/design.md, "Adding an op").
#define XSYM_BUILTIN_OPS(OP)                                                                         \
  OP(add, "add", 2, "+", wrapping, 1, (g, g), a + b)                                                 \
  OP(sub, "sub", 2, "-", wrapping, 1, (g, neg(g)), a - b)                                            \
  OP(mul, "mul", 2, "*", wrapping, 1, (mul(g, b), mul(g, a)), a * b)                                 \
  OP(true_div, "true_div", 2, "/", floating, 1, (divide(g, b), neg(divide(mul(g, z), b))), a / b)    \
  OP(neg, "neg", 1, "", wrapping, 1, (neg(g)), vneg(a))                                              \
  OP(pow, "pow", 2, "", floating, 1, /* d/da 0 at b = 0 (a^0 is 1), d/db 0 at a = 0 */               \
     (sw(ew(scalar_op::eq, b, c(0)), c(0), mul(mul(g, b), ew(scalar_op::pow, a, sub(b, c(1))))),     \
      sw(ew(scalar_op::eq, a, c(0)), c(0), mul(mul(g, z), ew(scalar_op::log, a)))),                  \
     vpow(a, b))                                                                                     \
  OP(sqr, "sqr", 1, "", wrapping, 1, (mul(mul(g, c(2)), a)), a * a)                                  \
  OP(sqrt, "sqrt", 1, "", floating, 1, (divide(mul(g, c(0.5)), z)), vsqrt(a))                        \
  OP(exp, "exp", 1, "", floating, 1, (mul(g, z)), vexp(a))                                           \
  OP(log, "log", 1, "", floating, 1, (divide(g, a)), vlog(a))                                        \
  OP(log1p, "log1p", 1, "", floating, 1, (divide(g, add(a, c(1)))), vlog1p(a))                       \
  OP(expm1, "expm1", 1, "", floating, 1, (mul(g, add(z, c(1)))), vexpm1(a))                          \
  /* g * sign(a): 0 at 0, as Theano */                                                               \
  OP(abs, "abs_", 1, "", wrapping, 1,                                                                \
     (sw(ew(scalar_op::lt, a, c(0)), neg(g), sw(ew(scalar_op::gt, a, c(0)), g, c(0)))), vabs(a))     \
  OP(tanh, "tanh", 1, "", floating, 1, (mul(g, sub(c(1), ew(scalar_op::sqr, z)))), vtanh(a))         \
  OP(sigmoid, "scalar_sigmoid", 1, "", floating, 1, (mul(mul(g, z), sub(c(1), z))), vsigmoid(a))     \
  /* max(a, 0) + log1p(exp(-|a|)): exact for large |a| both ways, no branch */                      \
  OP(softplus, "scalar_softplus", 1, "", floating, 1, (mul(g, ew(scalar_op::sigmoid, a))),           \
     vmax(a, X(0)) + vlog1p(vexp(-vabs(a))))                                                         \
  /* the C library's functions, lane by lane (numpy's names; ints computed in float64) */    \
  OP(sin, "sin", 1, "", floating, 1, (mul(g, ew(scalar_op::cos, a))),                                        \
     vlane1(a, [](auto x) { return std::sin(x); }))                                   \
  OP(cos, "cos", 1, "", floating, 1, (neg(mul(g, ew(scalar_op::sin, a)))),                                        \
     vlane1(a, [](auto x) { return std::cos(x); }))                                   \
  OP(tan, "tan", 1, "", floating, 1, (mul(g, add(c(1), ew(scalar_op::sqr, z)))),                                        \
     vlane1(a, [](auto x) { return std::tan(x); }))                                   \
  OP(arcsin, "arcsin", 1, "", floating, 1, (divide(g, ew(scalar_op::sqrt, sub(c(1), ew(scalar_op::sqr, a))))),                                        \
     vlane1(a, [](auto x) { return std::asin(x); }))                                   \
  OP(arccos, "arccos", 1, "", floating, 1, (neg(divide(g, ew(scalar_op::sqrt, sub(c(1), ew(scalar_op::sqr, a)))))),                                        \
     vlane1(a, [](auto x) { return std::acos(x); }))                                   \
  OP(arctan, "arctan", 1, "", floating, 1, (divide(g, add(c(1), ew(scalar_op::sqr, a)))),                                        \
     vlane1(a, [](auto x) { return std::atan(x); }))                                   \
  OP(sinh, "sinh", 1, "", floating, 1, (mul(g, ew(scalar_op::cosh, a))),                                        \
     vlane1(a, [](auto x) { return std::sinh(x); }))                                   \
  OP(cosh, "cosh", 1, "", floating, 1, (mul(g, ew(scalar_op::sinh, a))),                                        \
     vlane1(a, [](auto x) { return std::cosh(x); }))                                   \
  OP(arcsinh, "arcsinh", 1, "", floating, 1, (divide(g, ew(scalar_op::sqrt, add(ew(scalar_op::sqr, a), c(1))))),                                        \
     vlane1(a, [](auto x) { return std::asinh(x); }))                                   \
  OP(arccosh, "arccosh", 1, "", floating, 1, (divide(g, ew(scalar_op::sqrt, sub(ew(scalar_op::sqr, a), c(1))))),                                        \
     vlane1(a, [](auto x) { return std::acosh(x); }))                                   \
  OP(arctanh, "arctanh", 1, "", floating, 1, (divide(g, sub(c(1), ew(scalar_op::sqr, a)))),                                        \
     vlane1(a, [](auto x) { return std::atanh(x); }))                                   \
  OP(erf, "erf", 1, "", floating, 1, (mul(g, mul(c(1.1283791670955126), ew(scalar_op::exp, neg(ew(scalar_op::sqr, a)))))),                                        \
     vlane1(a, [](auto x) { return std::erf(x); }))                                   \
  OP(erfc, "erfc", 1, "", floating, 1, (neg(mul(g, mul(c(1.1283791670955126), ew(scalar_op::exp, neg(ew(scalar_op::sqr, a))))))),                                        \
     vlane1(a, [](auto x) { return std::erfc(x); }))                                   \
  OP(log2, "log2", 1, "", floating, 1, (divide(g, mul(a, c(0.6931471805599453)))),                                        \
     vlane1(a, [](auto x) { return std::log2(x); }))                                   \
  OP(log10, "log10", 1, "", floating, 1, (divide(g, mul(a, c(2.302585092994046)))),                                        \
     vlane1(a, [](auto x) { return std::log10(x); }))                                   \
  OP(exp2, "exp2", 1, "", floating, 1, (mul(g, mul(z, c(0.6931471805599453)))),                                        \
     vlane1(a, [](auto x) { return std::exp2(x); }))                                   \
  /* floor, ceil and round half to even (numpy's round), exact; their gradient is 0 */  \
  OP(floor, "floor", 1, "", floating, 0, (mul(g, c(0))), vfloor(a))                                   \
  OP(ceil, "ceil", 1, "", floating, 0, (mul(g, c(0))), vceil(a))                                   \
  OP(round, "round_half_to_even", 1, "", floating, 0, (mul(g, c(0))), vround_even(a))                                   \
  /* numpy's % and //: floor modulo (the divisor's sign) and floor division; on integers   \
     x % 0 and x // 0 are 0 and INT_MIN // -1 wraps; on floats numpy's divmod */           \
  OP(mod, "mod", 2, "%", any, 1, (g, neg(mul(g, ew(scalar_op::floor_div, a, b)))), vmod(a, b))            \
  OP(floor_div, "int_div", 2, "//", any, 1, (mul(g, c(0)), mul(g, c(0))), vfloordiv(a, b))               \
  /* bitwise and, or, xor and not of integers and bool (on bool: logical) */               \
  OP(bit_and, "and_", 2, "&", bitwise, 0, (nullptr, nullptr), vbitand(a, b))                              \
  OP(bit_or, "or_", 2, "|", bitwise, 0, (nullptr, nullptr), vbitor(a, b))                                 \
  OP(bit_xor, "xor", 2, "^", bitwise, 0, (nullptr, nullptr), vbitxor(a, b))                               \
  OP(invert, "invert", 1, "", bitwise, 0, (nullptr), vinvert(a))                                          \
  OP(maximum, "maximum", 2, "", any, 1, (select_grads(ew(scalar_op::ge, a, b), g, c(0))),            \
     vmaximum(a, b))                                                                                 \
  OP(minimum, "minimum", 2, "", any, 1, (select_grads(ew(scalar_op::le, a, b), g, c(0))),            \
     vminimum(a, b))                                                                                 \
  OP(gt, "gt", 2, "", comparison, 1, (nullptr, nullptr), a > b)                                      \
  OP(lt, "lt", 2, "", comparison, 1, (nullptr, nullptr), a < b)                                      \
  OP(ge, "ge", 2, "", comparison, 1, (nullptr, nullptr), a >= b)                                     \
  OP(le, "le", 2, "", comparison, 1, (nullptr, nullptr), a <= b)                                     \
  OP(eq, "eq", 2, "", comparison, 1, (nullptr, nullptr), a == b)                                     \
  OP(neq, "neq", 2, "", comparison, 1, (nullptr, nullptr), a != b)                                   \
  OP(switch_, "switch", 3, "", special, 1, (nullptr, sw(a, g, c(0)), sw(a, c(0), g)), a ? b : c)     \
  OP(cast, "cast", 1, "", special, 0, (float_to_float(a, t) ? cast(g, a->type) : nullptr), a)        \
  OP(identity, "identity", 1, "", special, 0, (float_to_float(a, t) ? cast(g, a->type) : nullptr), a)

#ifdef XSYM_USER_OPS
#define XSYM_OP_TABLE(OP) XSYM_BUILTIN_OPS(OP) XSYM_USER_OPS(OP)
#else
#define XSYM_OP_TABLE(OP) XSYM_BUILTIN_OPS(OP)
#endif

// (a, b) -> a, b: a parenthesized column spliced into a list.
#define XSYM_UNPAREN(...) __VA_ARGS__
#define XSYM_STRINGIFY_(...) #__VA_ARGS__
#define XSYM_STRINGIFY(...) XSYM_STRINGIFY_(__VA_ARGS__)

#endif
