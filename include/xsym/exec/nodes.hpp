#ifndef XSYM_EXEC_NODES_HPP
#define XSYM_EXEC_NODES_HPP

// Nodes both backends run the same way: an elementwise node around its kernel (outputs
// prepared, an input's buffer taken over in place, the caller's memory during into(...)), and
// a dimshuffle, which is a view (no data moves).
#include "../config/limits.hpp"
#include "buffers.hpp"
#include "shapes.hpp"

namespace xsym::detail {

// An elementwise node on either backend: outputs prepared (or an input taken over in place),
// then `exec(ins, outs)` runs the kernel.
template <bool OnDevice, class Exec>
void elemwise_node(const thunk& t, ndarray* values, Exec&& exec) {
  const apply_node& n = *t.node;
  const ndarray* ins[limits::max_registers];
  const std::size_t n_in = n.inputs.size();
  const int* in_slots = n.inputs.data();
  for (std::size_t k = 0; k < n_in; ++k) ins[k] = &values[in_slots[k]];
  const shape_t shape = cpu::broadcast_shape(ins, t.slot_bcast.data(), static_cast<int>(n_in));
  if (n.outputs.size() > limits::max_outputs)
    throw std::logic_error("xsym: a fused node has more than " + std::to_string(limits::max_outputs) + " outputs");
  ndarray* outs[limits::max_outputs] = {};
  ndarray* destroyed = nullptr;
  ndarray spare;  // only an in-place node uses it
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    ndarray& out = values[n.outputs[o]];
    if constexpr (!OnDevice) {
      if (take_destination(t, n.outputs[o], out,
                           t.prog.prog->reg_types[static_cast<std::size_t>(t.prog.prog->outputs[o])], shape)) {
        outs[o] = &out;
        continue;
      }
    }
    if (o == 0 && !n.fn->destroy_map.empty()) {
      // The input dies here: take its buffer when it has the output's shape and is ours alone.
      ndarray& victim = values[n.inputs[static_cast<std::size_t>(n.fn->destroy_map[0].second)]];
      if (victim.shape() == shape && victim.is_c_contiguous() && victim.owner() && victim.owner().use_count() == 1) {
        spare = std::move(out);  // the buffer this output had goes to the input's producer
        out = victim;            // the input is still read below; it is replaced once the node has run
        destroyed = &victim;
        outs[o] = &out;
        continue;
      }
    }
    prepare_output(out, t.prog.prog->reg_types[static_cast<std::size_t>(t.prog.prog->outputs[o])], shape, t.pool,
                   OnDevice);
    outs[o] = &out;
  }
  exec(ins, outs);
  // The consumed input's slot keeps the spare buffer, so its producer reuses it next call.
  if (destroyed) *destroyed = std::move(spare);
}

inline void run_dimshuffle(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  values[n.outputs[0]] = dimshuffle_view(values[n.inputs[0]], n.fn->pattern);
}

}  // namespace xsym::detail

#endif
