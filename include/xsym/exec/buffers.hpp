#ifndef XSYM_EXEC_BUFFERS_HPP
#define XSYM_EXEC_BUFFERS_HPP

// Output buffers for a node: reused from the last call, taken from the pool, or the caller's
// memory during an into(...) call.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "thunk.hpp"

namespace xsym::detail {

/// The bytes of a new array of this shape and dtype; a shape_error where they exceed what an
/// array can address (extents a node computed, such as Alloc's, can multiply past 2^63).
inline std::size_t array_bytes(const shape_t& shape, dtype t) {
  std::int64_t n = static_cast<std::int64_t>(dtype_size(t));
  bool over = false;
  for (int d = 0; d < shape.rank; ++d) over |= __builtin_mul_overflow(n, shape[d], &n);
  if (over || n < 0)
    throw shape_error("an array of shape " + to_string(shape) + " of " + std::string(dtype_name(t)) +
                      " takes more bytes than an array can address (at most " +
                      std::to_string(std::numeric_limits<std::ptrdiff_t>::max()) + ")");
  return static_cast<std::size_t>(n);
}

/// An owning C-contiguous copy (DebugMode's snapshots, an output taken aside).
inline ndarray deep_copy(const ndarray& a) {
  if (!a.has_value()) return a;
  if (a.on_device()) return cast_array(a, a.type());
  ndarray c;
  a.copy_contiguous_into(c);  // memcpy where a is contiguous
  return c;
}

// Called per destination and input on every into(...) call: one pass over each shape.
inline bool overlaps(const ndarray& a, const ndarray& b) { return bytes_of(a).overlaps(bytes_of(b)); }

// Gives `slot` a C-contiguous buffer of that shape, reusing the one it holds when nothing
// else refers to it (so a no-gc function allocates nothing in steady state).
inline void prepare_output(ndarray& slot, dtype t, const shape_t& shape, buffer_pool* pool = nullptr,
                           bool on_device = false) {
  // A warm call: last call's buffer, of this dtype and shape, ours alone.
  if (slot.type() == t && slot.shape() == shape && slot.on_device() == on_device && slot.is_c_contiguous() &&
      slot.owner().use_count() == 1 && slot.data() == slot.owner().get())
    return;
  const std::size_t bytes = array_bytes(shape, t);
  if (slot.owner() && slot.owner().use_count() == 1 && slot.on_device() == on_device && slot.capacity() >= bytes &&
      slot.capacity() <= 2 * bytes + 64) {
    slot.reuse_buffer(t, shape);
    return;
  }
  if (pool && pool->take(slot, t, shape, bytes, on_device)) return;
  slot = on_device ? ndarray::empty_on_device(t, shape) : ndarray::empty(t, shape);
}

// The caller's memory for this output slot when an into(...) call bound some, with this dtype
// and shape: the slot's own buffer goes to the pool (the next plain call takes it back) and the
// node writes straight into the caller's array. Only ever a host, C-contiguous destination that
// overlaps no input or shared value (the runtime checked when it bound it).
inline bool take_destination(const thunk& t, int slot, ndarray& out, dtype type, const shape_t& shape) {
  if (!t.dests) return false;
  const ndarray* d = t.dests[slot];
  if (!d || d->type() != type || !(d->shape() == shape)) return false;
  if (t.pool && out.owner()) t.pool->give(out);
  out = *d;
  return true;
}

// Copies a value into a destination in the caller's memory (same dtype and shape, any strides),
// unless the node already wrote it there.
inline void copy_into_destination(const ndarray& value, const ndarray& dst) {
  if (value.size() == 0) return;
  // Written in place, or the output is the very array the caller passed. Checked before
  // on_host, whose copy costs two reference-count updates per call; a device value never is.
  bool same = !value.on_device() && value.data() == dst.data();
  for (int d = 0; same && d < dst.rank(); ++d) same = dst.shape(d) == 1 || value.stride(d) == dst.stride(d);
  if (same) return;
  ndarray src = on_host(value);
  if (overlaps(src, dst)) src = deep_copy(src);  // e.g. an input's transpose written back into that input
  const std::size_t es = dtype_size(dst.type());
  if (src.is_c_contiguous() && dst.is_c_contiguous()) {
    if (src.nbytes()) std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  copy_strided(dst.data(), dst.strides(), src.data(), src.strides(), dst.shape(), es);
}

}  // namespace xsym::detail

#endif
