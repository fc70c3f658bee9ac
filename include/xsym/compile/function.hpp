#ifndef XSYM_COMPILE_FUNCTION_HPP
#define XSYM_COMPILE_FUNCTION_HPP

#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../config/cold.hpp"
#include "../backend/cpu/typed_kernel.hpp"
#include "../expr/var.hpp"
#include "../profile/registry.hpp"
#include "runtime.hpp"

namespace xsym {

/// @brief The symbolic inputs of a function, in call order.
template <class... V>
struct inputs_t {
  std::tuple<V...> vars;
};
template <class... V>
inputs_t<var<typename V::value_type, V::rank>...> inputs(const V&... v) {
  static_assert((is_var_v<V> && ...), "xsym::inputs(...) takes symbolic variables such as xsym::matrix<float>(\"x\")");
  return {{var<typename V::value_type, V::rank>(v)...}};
}

/// @brief The symbolic outputs of a function; calling it returns a std::tuple of xtensor values.
template <class... V>
struct outputs_t {
  std::tuple<V...> vars;
};
namespace detail {
// The device kernel's hook: <xsym/gpu.hpp> declares an overload taking an int, which lookup
// finds where function() is instantiated (after every include); without it, nothing.
template <class Tree>
void use_device_kernel(kernel_request<Tree>, long) {}

// A typed expression handed to function() has its tree's kernels compiled into the program: the
// tree's and its rewritten variants' (each pass alone and both), so that whatever the flags let
// the run-time rewrites do, the linker finds the kernel of the text they leave. A lone op
// already runs one precompiled kernel.
template <class Tree>
void use_tree_kernel() {
  if constexpr (Tree::ops >= 2) {
    cpu::use_typed_kernel<Tree>();
    use_device_kernel(kernel_request<Tree>{}, 0);
  }
}
template <class Tree>
void use_tree_kernels() {
  use_tree_kernel<Tree>();
  use_tree_kernel<stabilized_t<Tree>>();
  use_tree_kernel<canonical_t<Tree>>();
  use_tree_kernel<rewritten_t<Tree>>();
}
template <class Tree>
void use_blocks_kernels() {
  if constexpr (Tree::ops >= 2) {
    cpu::use_typed_blocks<Tree>();
    cpu::use_typed_blocks<stabilized_t<Tree>>();
    cpu::use_typed_blocks<canonical_t<Tree>>();
    cpu::use_typed_blocks<rewritten_t<Tree>>();
  }
}
// A sum's kernel only for the tree the default flags leave: under other flags the reduction
// runs the program a block at a time, to the same bits (a compile cost saved per variant). Not
// for a tree with a sigmoid or softplus, whose program shares one exp among them (share_work)
// and so never binds a tree's kernel.
template <class Tree>
constexpr bool has_shared_work() {
  std::array<scalar_op, static_cast<std::size_t>(Tree::ops)> ops{};
  scalar_op* p = ops.data();
  tree_ops<Tree>::into(p);
  for (scalar_op s : ops)
    if (s == scalar_op::sigmoid || s == scalar_op::softplus) return true;
  return false;
}
template <class Tree>
void use_sum_kernels() {
  using R = rewritten_t<Tree>;
  if constexpr (!has_shared_work<R>()) cpu::use_typed_sum<R>();
}
}  // namespace detail

template <class... V>
outputs_t<var<typename V::value_type, V::rank>...> outputs(const V&... v) {
  static_assert((is_var_v<V> && ...), "xsym::outputs(...) takes symbolic expressions");
  (detail::use_typed(v), ...);
  return {{var<typename V::value_type, V::rank>(v)...}};
}

/// @brief One shared-variable update: after each call, target takes value (computed from the old state).
struct update_t {
  var_ptr target;
  var_ptr value;
};
template <class E, std::size_t N, class V>
update_t update(const shared_var<E, N>& target, const V& value) {
  if constexpr (is_var_v<V>) {
    static_assert(std::is_same_v<typename V::value_type, E>,
                  "xsym::update: the new value's element type must equal the shared variable's (use xsym::cast<T>)");
    static_assert(V::rank == N, "xsym::update: the new value's rank must equal the shared variable's");
    detail::use_typed(value);
    return {target.node(), value.node()};
  } else {
    static_assert(std::is_arithmetic_v<V>, "xsym::update: the new value must be an expression or a number");
    static_assert(N == 0, "xsym::update: a number can only replace a rank-0 shared variable");
    return {target.node(), detail::make_constant(detail::scalar_array(static_cast<E>(value)))};
  }
}

/// @brief The updates a function applies after every call.
struct updates_t {
  std::vector<update_t> list;
};
template <class... U>
updates_t updates(const U&... u) {
  static_assert((std::is_same_v<U, update_t> && ...), "xsym::updates(...) takes xsym::update(shared, expression)");
  return {{u...}};
}

/// @brief Profile this function (true) or not, or record into a shared profile_stats object.
struct profile {
  std::optional<bool> enabled;
  std::shared_ptr<profile_stats> stats;
  explicit profile(bool on) : enabled(on) {}
  explicit profile(std::shared_ptr<profile_stats> s) : enabled(true), stats(std::move(s)) {}
};

namespace detail {
inline void apply_option(function_options& o, const profile& p) {
  o.profile = p.enabled;
  if (p.stats) o.stats = p.stats;
}
inline void apply_option(function_options&, const updates_t&) {}

template <class T, class A>
constexpr bool lossless_v = std::is_same_v<T, A> ||
                            (std::is_same_v<T, double> && (std::is_same_v<A, float> || std::is_same_v<A, std::int32_t>)) ||
                            (std::is_same_v<T, std::int64_t> && (std::is_same_v<A, std::int32_t> || std::is_same_v<A, bool>)) ||
                            (std::is_same_v<T, std::int32_t> && std::is_same_v<A, bool>);

template <class X>
struct static_rank : std::integral_constant<int, -1> {};
template <class EC, std::size_t N, xt::layout_type L, class Tag>
struct static_rank<xt::xtensor_container<EC, N, L, Tag>> : std::integral_constant<int, static_cast<int>(N)> {};

XSYM_COLD_BEGIN  // error paths, out of line: not copied into every argument type's binding
[[noreturn]] inline void throw_argument_rank(const std::string& fname, std::size_t index, const std::string& iname,
                                             std::size_t rank, std::size_t got) {
  throw shape_error("xsym: function '" + fname + "': input " + std::to_string(index) + " ('" + iname + "') has rank " +
                    std::to_string(rank) + ", got an argument of rank " + std::to_string(got));
}

[[noreturn]] inline void throw_argument_overflows(const std::string& fname, std::size_t index, const std::string& iname,
                                                 double value, dtype t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  throw std::invalid_argument("xsym: function '" + fname + "': input " + std::to_string(index) + " ('" + iname +
                              "') is " + std::string(dtype_name(t)) + ", and the number " + buf +
                              " passed for it is beyond that type's range (it would become infinity)");
}

[[noreturn]] inline void throw_destination_rank(const std::string& fname, std::size_t index, std::size_t rank,
                                                std::size_t got) {
  throw shape_error("xsym: function '" + fname + "': into(...): output " + std::to_string(index) + " has rank " +
                    std::to_string(rank) + ", its destination has rank " + std::to_string(got));
}
XSYM_COLD_END

// Turns one call argument into a runtime array in dst: a view of the caller's memory when the
// element type matches, else a converted copy (which dst owns).
template <class E, std::size_t N, class Arg>
void bind_argument(ndarray& dst, const Arg& arg, const std::string& fname, const std::string& iname,
                   std::size_t index) {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (std::is_arithmetic_v<A>) {
    static_assert(N == 0, "xsym: a plain number can only be passed for a rank-0 (scalar) input");
    static_assert(lossless_v<E, A> || std::is_floating_point_v<E>,
                  "xsym: this number's type cannot be converted to the input's element type without loss");
    // A finite double beyond float's range would become infinity (a conversion C++ leaves
    // undefined), as a constant in an expression would (expr/var.hpp's lift).
    if constexpr (std::is_same_v<E, float> && std::is_floating_point_v<A> && sizeof(A) > sizeof(float))
      if (std::isfinite(arg) && std::fabs(arg) >= 0x1.ffffffp+127)
        throw_argument_overflows(fname, index, iname, static_cast<double>(arg), dtype_of<E>());
    dst = scalar_array(static_cast<E>(arg));
  } else {
    static_assert(std::is_base_of_v<xt::xexpression<A>, A>,
                  "xsym: call a function with xtensor containers or expressions (xt::xtensor, xt::xarray, xt::adapt)");
    using T = typename A::value_type;
    static_assert(lossless_v<E, T>,
                  "xsym: an argument's element type differs from the input's and would lose precision; "
                  "convert it first (e.g. xt::cast<float>(a))");
    constexpr int sr = static_rank<A>::value;
    static_assert(sr < 0 || sr == static_cast<int>(N), "xsym: an argument's rank differs from the input's rank");
    const auto& shape = arg.shape();
    if (shape.size() != N)
      throw_argument_rank(fname, index, iname, N, shape.size());
    if constexpr (std::is_same_v<T, E> && strided_memory<A>) {
      if constexpr (N > static_cast<std::size_t>(max_rank))
        throw_rank_exceeds(N);
      else
        dst.rewrap(dtype_of<E>(), shape, arg.strides(), const_cast<T*>(first_element(arg)));
    } else {
      dst = copy_to_ndarray<E>(xt::cast<E>(arg));
    }
  }
}

// For into(...)'s short path (function_runtime::run_direct): arrays of element type E and rank
// N that the kernel reads or writes in place, where they are in C order.
template <class E, std::size_t N, class A>
constexpr bool direct_type() {
  if constexpr (std::is_arithmetic_v<A>) return false;
  else return std::is_same_v<typename A::value_type, E> && strided_memory<A> && N <= static_cast<std::size_t>(max_rank);
}

// An xtensor container or adaptor of row-major layout has C strides by construction (it refuses
// to be given others): its strides need no check.
template <class A>
inline constexpr bool c_order_by_type =
    std::is_base_of_v<xt::xcontainer<A>, A> && A::static_layout == xt::layout_type::row_major;

// arr's number of elements where it has rank N in C order (an extent of 1 takes any stride),
// -1 otherwise; its extents go to `extents`, or must equal `expected`'s.
template <std::size_t N, class A>
std::int64_t c_order_elements(const A& arr, std::int64_t* extents, const std::int64_t* expected) {
  const auto& shape = arr.shape();
  if (shape.size() != N) return -1;
  const auto& strides = arr.strides();
  std::int64_t count = 1;
  for (int d = static_cast<int>(N) - 1; d >= 0; --d) {
    const auto extent = static_cast<std::int64_t>(shape[static_cast<std::size_t>(d)]);
    if ((expected && extent != expected[d]) ||
        (!c_order_by_type<A> && extent != 1 && static_cast<std::int64_t>(strides[static_cast<std::size_t>(d)]) != count))
      return -1;
    if (extents) extents[d] = extent;
    count *= extent;
  }
  return count;
}

// The destination's first element, size and extents where the kernel can write it in place;
// false for anything else, which bind_destination takes or rejects.
template <class E, std::size_t N, class D>
bool direct_destination(const D& d, std::byte*& out, std::int64_t* extents, std::int64_t& n) {
  if constexpr (!direct_type<E, N, D>()) {
    return false;
  } else {
    n = c_order_elements<N>(d, extents, nullptr);
    out = reinterpret_cast<std::byte*>(const_cast<E*>(first_element(d)));
    return n >= 0;
  }
}

// The argument's first element where the kernel can read it in place with the destination's
// extents (rank `rank`; a rank-0 input: any one value); false for anything bind_argument would
// convert, reject or that broadcasts.
template <class E, std::size_t N, class Arg>
bool direct_argument(const std::byte*& p, const Arg& arg, const std::int64_t* extents, std::size_t rank) {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (!direct_type<E, N, A>()) {
    return false;
  } else {
    if ((N > 0 && rank != N) || c_order_elements<N>(arg, nullptr, extents) < 0) return false;
    p = reinterpret_cast<const std::byte*>(first_element(arg));
    return true;
  }
}

// A rank-0 output comes back as a plain number, others as xt::xtensor.
template <class V>
using result_of_t = std::conditional_t<V::rank == 0, typename V::value_type, xt::xtensor<typename V::value_type, V::rank>>;

template <class V>
result_of_t<V> convert_result(const ndarray& a) {
  if constexpr (V::rank == 0) {
    if (a.on_device()) return *on_host(a).template data_as<typename V::value_type>();
    return *a.template data_as<typename V::value_type>();  // one element: any strides read it
  }
  else return to_xtensor<typename V::value_type, V::rank>(a);
}

// Turns one into(...) destination into a runtime array that views the caller's memory.
template <class E, std::size_t N, class D>
void bind_destination(ndarray& dst, D& d, const std::string& fname, std::size_t index) {
  static_assert(!std::is_const_v<D>, "xsym: into(...) writes its outputs: pass writable destinations, not const ones");
  if constexpr (std::is_arithmetic_v<D>) {
    static_assert(N == 0, "xsym: into(...): a plain number can only receive a rank-0 (scalar) output");
    static_assert(std::is_same_v<D, E>,
                  "xsym: into(...): a destination's element type must equal its output's (no conversion is made)");
    dst = ndarray::wrap(dtype_of<E>(), shape_t{}, nullptr, &d);
  } else {
    static_assert(std::is_base_of_v<xt::xexpression<D>, D> && strided_memory<D>,
                  "xsym: into(...) writes into memory with strides: xtensor containers (xt::xtensor, xt::xarray, "
                  "xt::adapt), views of them, or a plain number for a scalar output; not a lazy expression or a "
                  "view without strides of its own (xt::flatten of a transpose): write into a container, then copy");
    static_assert(std::is_same_v<typename D::value_type, E>,
                  "xsym: into(...): a destination's element type must equal its output's (no conversion is made)");
    constexpr int sr = static_rank<D>::value;
    static_assert(sr < 0 || sr == static_cast<int>(N), "xsym: into(...): a destination's rank differs from its output's rank");
    const auto& shape = d.shape();
    if (shape.size() != N)
      throw_destination_rank(fname, index, N, shape.size());
    if constexpr (N > static_cast<std::size_t>(max_rank)) {
      throw_rank_exceeds(N);
    } else {
      dst.rewrap(dtype_of<E>(), shape, d.strides(), first_element(d));
    }
  }
}

template <class R>
struct result_converter;
template <class... V>
struct result_converter<std::tuple<V...>> {
  using type = std::tuple<result_of_t<V>...>;
  static type convert(const ndarray* out) {
    return convert_impl(out, std::index_sequence_for<V...>{});
  }
  template <std::size_t... I>
  static type convert_impl(const ndarray* out, std::index_sequence<I...>) {
    return type{convert_result<V>(out[I])...};
  }
};
}  // namespace detail

/// @brief A compiled function. Call it with one xtensor value per input.
///
/// Thread safety: calls on one object are serialised by an internal lock; different
/// function objects run concurrently.
template <class Inputs, class Outputs, bool Single>
class function_object;

template <class... In, class... Out, bool Single>
class function_object<std::tuple<In...>, std::tuple<Out...>, Single> {
  using converter = detail::result_converter<std::tuple<Out...>>;

 public:
  template <class T> struct first_of { using type = std::tuple_element_t<0, T>; };
  // Lazily: a function of updates only has no output 0 (its call returns an empty tuple).
  using result_type = typename std::conditional_t<Single, first_of<typename converter::type>,
                                                  std::type_identity<typename converter::type>>::type;

  function_object(std::shared_ptr<function_runtime> rt, std::vector<std::string> input_names)
      : m_rt(std::move(rt)), m_input_names(std::move(input_names)) {}

  template <class... Args>
  result_type operator()(const Args&... args) const {
    static_assert(sizeof...(Args) == sizeof...(In), "xsym: wrong number of arguments: pass one value per input");
    // Arguments are bound straight into the function's input slots, under its lock; results
    // are copied out while the lock is held (its buffers are reused).
    return m_rt->call_with(
        [&](ndarray* values, const std::vector<int>& slots) {
          bind_all(values, slots, std::index_sequence_for<Args...>{}, args...);
        },
        [](const ndarray* out) -> result_type {
          if constexpr (Single) return detail::convert_result<std::tuple_element_t<0, std::tuple<Out...>>>(out[0]);
          else return converter::convert(out);
        });
  }

  /// @brief Writes the outputs into the caller's arrays: `f.into(out)(x, y)`, as
  /// `xt::noalias(out) = ...` does. One destination per output, each of its output's element
  /// type and rank (checked at compile time): an xt::xtensor, xt::xarray or xt::adapt (any
  /// strides), or a plain number for a rank-0 output. A destination is never resized: one
  /// whose shape differs from its output's throws shape_error (and no update is applied).
  /// A C-contiguous destination is written by the kernel itself, with no copy and, once warm,
  /// no allocation; others are copied into. A destination may be an argument of the same call
  /// (the function then computes into its own buffer and copies at the end); two destinations
  /// must not share memory or interleave (their byte ranges must not overlap). The returned
  /// call object refers to this function and to the destinations: call it at once, or keep it
  /// while both live to call it again.
  template <class... D>
  auto into(D&... dests) const {
    static_assert(sizeof...(D) == sizeof...(Out), "xsym: into(...) takes one destination per output");
    return into_call<D...>(this, dests...);
  }

  /// @brief What into(...) returns: call it with the function's arguments.
  template <class... D>
  class into_call {
   public:
    into_call(const function_object* f, D&... d) : m_f(f), m_dests(d...) {}
    template <class... Args>
    void operator()(const Args&... args) const {
      static_assert(sizeof...(Args) == sizeof...(In), "xsym: wrong number of arguments: pass one value per input");
      m_f->run_into(m_dests, std::index_sequence_for<D...>{}, args...);
    }

   private:
    const function_object* m_f;
    std::tuple<D&...> m_dests;
  };

  /// @brief The Apply nodes in the order they run.
  const std::vector<apply_node>& toposort() const { return m_rt->graph().nodes; }
  /// @brief The compiled graph (slots, nodes, outputs, updates).
  const function_graph& graph() const { return m_rt->graph(); }
  const std::string& name() const { return m_rt->name(); }
  /// @brief This function's profile (throws when it was built without profiling).
  profile_stats& profile() const {
    if (!m_rt->stats())
      throw std::logic_error("xsym: function '" + m_rt->name() + "' has no profile: " +
                             (profiling_compiled_in ? "pass xsym::profile(true) or set profile=True"
                                                    : "this program was built with XSYM_PROFILING=0"));
    return *m_rt->stats();
  }
  const std::shared_ptr<function_runtime>& runtime() const { return m_rt; }

 private:
  template <std::size_t... I, class... Args>
  void bind_all([[maybe_unused]] ndarray* values, [[maybe_unused]] const std::vector<int>& slots,
                std::index_sequence<I...>, const Args&... args) const {
    (detail::bind_argument<typename In::value_type, In::rank>(values[slots[I]], args, m_rt->name(), m_input_names[I],
                                                              I),
     ...);
  }

  template <std::size_t... I, class... Args>
  static bool direct_all([[maybe_unused]] const std::byte** out, [[maybe_unused]] const std::int64_t* extents,
                         [[maybe_unused]] std::size_t rank, std::index_sequence<I...>, const Args&... args) {
    return (detail::direct_argument<typename In::value_type, In::rank>(out[I], args, extents, rank) && ...);
  }

  template <class Tuple, std::size_t... O, class... Args>
  void run_into(const Tuple& dests, std::index_sequence<O...>, const Args&... args) const {
    // The short path reads the destination as it is: making a runtime array for it is most of
    // the fixed cost a call on a small array pays.
    if constexpr (sizeof...(O) == 1) {
      using O0 = std::tuple_element_t<0, std::tuple<Out...>>;
      if (m_rt->has_direct()) {
        std::byte* out = nullptr;
        std::int64_t extents[std::max<std::size_t>(O0::rank, 1)] = {};
        std::int64_t n = 0;
        const std::byte* in[sizeof...(Args) + 1];
        if (detail::direct_destination<typename O0::value_type, O0::rank>(std::get<0>(dests), out, extents, n) &&
            direct_all(in, extents, O0::rank, std::index_sequence_for<Args...>{}, args...) && m_rt->run_direct(in, out, n))
          return;
      }
    }
    run_into_loop(dests, std::index_sequence<O...>{}, args...);
  }

  // The call loop, out of line: inlined, its frame and saved registers were most of the short
  // path's fixed cost.
  template <class Tuple, std::size_t... O, class... Args>
  [[gnu::noinline]] void run_into_loop(const Tuple& dests, std::index_sequence<O...>, const Args&... args) const {
    ndarray wraps[sizeof...(O)];
    (detail::bind_destination<typename std::tuple_element_t<O, std::tuple<Out...>>::value_type,
                                   std::tuple_element_t<O, std::tuple<Out...>>::rank>(wraps[O], std::get<O>(dests),
                                                                                      m_rt->name(), O),
     ...);
    m_rt->call_into(
        [&](ndarray* values, const std::vector<int>& slots) {
          bind_all(values, slots, std::index_sequence_for<Args...>{}, args...);
        },
        static_cast<const ndarray*>(wraps));
  }

  std::shared_ptr<function_runtime> m_rt;
  std::vector<std::string> m_input_names;
};

namespace detail {
XSYM_COLD_BEGIN  // building a function: once
template <class... In, class OutTuple, class... Rest>
auto make_function(std::string name, const inputs_t<In...>& in, const OutTuple& outs, const Rest&... rest) {
  function_options opts;
  std::vector<std::pair<var_ptr, var_ptr>> ups;
  [[maybe_unused]] auto take = [&](const auto& r) {
    using R = std::remove_cvref_t<decltype(r)>;
    if constexpr (std::is_same_v<R, updates_t>) {
      for (const auto& u : r.list) ups.push_back({u.target, u.value});
    } else if constexpr (std::is_same_v<R, update_t>) {
      ups.push_back({r.target, r.value});
    } else {
      apply_option(opts, r);
    }
  };
  (take(rest), ...);
  std::vector<var_ptr> in_nodes, out_nodes;
  std::vector<std::string> names;
  std::apply([&](const auto&... v) { (in_nodes.push_back(v.node()), ...); (names.push_back(v.name()), ...); }, in.vars);
  std::apply([&](const auto&... v) { (out_nodes.push_back(v.node()), ...); }, outs);
  auto rt = std::make_shared<function_runtime>(std::move(name), in_nodes, out_nodes, ups, opts);
  // As in Theano, every profiled function's report is printed at exit.
  if (rt->stats() && rt->stats()->print_at_exit()) register_for_exit_report(rt->stats());
  return std::pair{rt, names};
}
XSYM_COLD_END
}  // namespace detail

/// @brief Compiles outputs from inputs: `function("train", inputs(x, y), outputs(a, b), updates(...))`.
///
/// Options after the outputs, in any order: updates(...), mode("FAST_COMPILE"), linker("cvm_nogc"),
/// profile(true), optimizer_excluding("fusion"), ignore_unused_inputs{}.
template <class... In, class... Out, class... Rest>
auto function(std::string name, const inputs_t<In...>& in, const outputs_t<Out...>& out, const Rest&... rest) {
  auto [rt, names] = detail::make_function(std::move(name), in, out.vars, rest...);
  return function_object<std::tuple<In...>, std::tuple<Out...>, false>(rt, names);
}

/// @brief The single-output form: calling it returns one xtensor value.
template <class... In, symbolic O, class... Rest>
auto function(std::string name, const inputs_t<In...>& in, const O& out, const Rest&... rest) {
  using V = var<typename O::value_type, O::rank>;
  detail::use_typed(out);
  auto [rt, names] = detail::make_function(std::move(name), in, std::tuple<V>(out), rest...);
  return function_object<std::tuple<In...>, std::tuple<V>, true>(rt, names);
}

/// @brief Prints a compiled function's graph as Theano's debugprint does.
template <class F>
  requires requires(const F& f) { f.graph(); }
void debugprint(const F& f, std::ostream& os = std::cout) {
  debugprint(f.graph(), os);
}

/// @brief "[Elemwise{add,no_inplace}(x, y), ...]": a function's toposort as the seeds print it.
template <class F>
  requires requires(const F& f) { f.graph(); }
std::string toposort_text(const F& f) {
  std::string s = "[";
  const auto& g = f.graph();
  for (std::size_t i = 0; i < g.nodes.size(); ++i) s += (i ? ", " : "") + g.node_text(static_cast<int>(i));
  return s + "]";
}

}  // namespace xsym

#endif
