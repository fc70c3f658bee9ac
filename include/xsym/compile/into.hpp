#ifndef XSYM_COMPILE_INTO_HPP
#define XSYM_COMPILE_INTO_HPP

// into(...): each output written into an array in the caller's memory, by its node where
// it can, else copied in at the end.
#include "function_runtime.hpp"

namespace xsym {

template <class Bind>
void function_runtime::call_into(Bind&& bind, const ndarray* dests) {
  call_with(
      std::forward<Bind>(bind), [&](const ndarray* out) { return finish_into(out, dests); }, dests);
}

// Marks the outputs that their nodes may write straight into the caller's memory: host,
// C-contiguous, of the output's dtype, not an update's new value (that buffer goes to the
// shared variable), and overlapping no input or shared value (a node would overwrite what a
// later node still reads). The others are copied in by finish_into.
inline void function_runtime::bind_destinations(const ndarray* dests) {
  const auto& outs = m_graph->outputs;
  for (std::size_t o = 0; o < outs.size(); ++o) {
    const ndarray& d = dests[o];
    if (detail::overlaps_itself(d)) {  // one element's value would overwrite another's
      std::string strides;
      for (int k = 0; k < d.rank(); ++k)
        strides += (k ? ", " : "") + std::to_string(d.stride(k) * static_cast<std::int64_t>(dtype_size(d.type())));
      throw std::invalid_argument("xsym: function '" + m_name + "': into(...): the destination of output " +
                                  std::to_string(o) + " (shape " + to_string(d.shape()) + ", strides (" + strides +
                                  ") in bytes) has elements that share memory: give it one element per value");
    }
    const detail::byte_range range = detail::bytes_of(d);
    for (std::size_t p = 0; p < o; ++p)
      if (range.overlaps(detail::bytes_of(dests[p])))
        throw std::invalid_argument("xsym: function '" + m_name + "': into(...): the destinations of outputs " +
                                    std::to_string(p) + " and " + std::to_string(o) +
                                    " share memory (their bytes overlap; interleaved views count as overlapping)");
    const int s = outs[o];
    const slot& sl = m_graph->slots[static_cast<std::size_t>(s)];
    if (!m_direct_output[o] || m_dest_of_slot[static_cast<std::size_t>(s)] || d.type() != sl.type ||
        range.lo == range.hi || !d.is_c_contiguous())
      continue;
    bool ok = true;
    for (int in : m_graph->inputs) ok = ok && !range.overlaps(detail::bytes_of(m_values[static_cast<std::size_t>(in)]));
    for (int sh : m_shared_slots)
      ok = ok && !range.overlaps(detail::bytes_of(m_values[static_cast<std::size_t>(sh)]));
    if (!ok) continue;
    m_dest_of_slot[static_cast<std::size_t>(s)] = &d;
    m_dest_slots[m_n_dest_slots++] = s;
  }
}

inline void function_runtime::take_updates_aside(const ndarray* dests, ndarray* values) {
  for (const auto& [target, value] : m_graph->updates) {
    ndarray& v = values[value];
    if (!v.has_value() || v.on_device()) continue;
    for (std::size_t o = 0; o < m_graph->outputs.size(); ++o)
      if (detail::overlaps(v, dests[o])) {
        v = detail::deep_copy(v);
        break;
      }
  }
}

// Copies the outputs that were not written in place into their destinations (after checking
// every shape, so a wrong one leaves the others untouched where they were not written yet).
inline int function_runtime::finish_into(const ndarray* out, const ndarray* dests) {
  const std::size_t n = m_graph->outputs.size();
  for (std::size_t o = 0; o < n; ++o)
    if (!(out[o].shape() == dests[o].shape()))
      throw shape_error("xsym: function '" + m_name + "': output " + std::to_string(o) + " has shape " +
                        to_string(out[o].shape()) + " but its destination in into(...) has shape " +
                        to_string(dests[o].shape()) + " (a destination is not resized: give it the output's shape)");
  if (n == 1) {
    detail::copy_into_destination(out[0], dests[0]);
    return 0;
  }
  // An output read from memory that another destination receives (an input passed through,
  // or a view of one, whose array is also a destination) is taken aside before any is written.
  std::vector<ndarray> aside;
  for (std::size_t o = 0; o < n; ++o)
    for (std::size_t p = 0; p < n; ++p)
      if (p != o && detail::overlaps(out[o], dests[p])) {
        if (aside.empty()) aside.resize(n);
        aside[o] = detail::deep_copy(detail::on_host(out[o]));
        break;
      }
  for (std::size_t o = 0; o < n; ++o)
    detail::copy_into_destination(aside.empty() || !aside[o].has_value() ? out[o] : aside[o], dests[o]);
  return 0;
}

// Slots that held the caller's memory during an into(...) call keep no pointer to it.
inline void function_runtime::release_destinations() {
  for (std::size_t i = 0; i < m_n_dest_slots; ++i) {
    const auto s = static_cast<std::size_t>(m_dest_slots[i]);
    m_values[s].release();
    m_dest_of_slot[s] = nullptr;
  }
  m_n_dest_slots = 0;
}

}  // namespace xsym

#endif
