#ifndef XSYM_COMPILE_TEST_VALUES_HPP
#define XSYM_COMPILE_TEST_VALUES_HPP

// compute_test_value's evaluator: expr asks it for a node's value as the node is built.
#include <memory>
#include <vector>

#include "../config/cold.hpp"
#include "function_runtime.hpp"

namespace xsym::detail {
XSYM_COLD_BEGIN  // building graphs with test values on
// With XSYM_COMPILED_LIB the runtime installs it: a program's files then compile none of it.
#if XSYM_RUNTIME_DEFINITIONS

// The node alone over inputs bound to its inputs' test values, without rewrites, on the
// reference kernels: what it computes is what the node means, not what a rewrite made of it.
inline ndarray evaluate_test_value(const variable& v) {
  std::vector<var_ptr> leaves;
  std::vector<ndarray> args;
  for (const auto& in : v.inputs) {
    leaves.push_back(make_input(in->type, in->rank, in->name, in->broadcastable));
    args.push_back(*test_value_of(*in));
  }
  auto node = std::make_shared<variable>(v);
  node->id = next_variable_id();
  node->inputs = leaves;
  node->test_value = nullptr;
  function_options opts;
  opts.mode = "FAST_COMPILE";
  opts.linker = "py";
  opts.optimizer = "None";
  opts.profile = false;
  opts.device = "cpu";
  opts.is_reference = true;
  opts.ignore_unused_inputs = true;
  function_runtime rt("compute_test_value", leaves, {node}, {}, opts);
  std::vector<ndarray> outs, ups;
  rt.evaluate(args.data(), outs, ups);
  return std::move(outs[0]);
}

inline const bool test_value_evaluator_installed = (test_value_evaluator() = &evaluate_test_value, true);
#endif

XSYM_COLD_END
}  // namespace xsym::detail

#endif
