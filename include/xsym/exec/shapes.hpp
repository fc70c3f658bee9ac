#ifndef XSYM_EXEC_SHAPES_HPP
#define XSYM_EXEC_SHAPES_HPP

// Each op's output shape from its inputs, one rule for both backends (and constant folding).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "../config/cold.hpp"
#include "../expr/ndarray.hpp"
#include "../expr/op.hpp"

namespace xsym::detail {

// DimShuffle: a view of `in` with its dimensions reordered, 'x' (-1) a new dimension of 1.
inline ndarray dimshuffle_view(const ndarray& in, const std::vector<int>& pattern) {
  shape_t s;
  s.rank = static_cast<int>(pattern.size());
  std::array<std::int64_t, max_rank> st{};
  for (int i = 0; i < s.rank; ++i) {
    const int p = pattern[static_cast<std::size_t>(i)];
    s[i] = p < 0 ? 1 : in.shape(p);
    st[static_cast<std::size_t>(i)] = p < 0 ? 0 : in.stride(p);
  }
  return in.view(s, st);
}

// Subtensor: the view of x that x[slices] is (axes after the slices whole; indices dropped).
inline ndarray subtensor_view(const ndarray& x, const std::vector<slice_spec>& slices) {
  shape_t s;
  std::array<std::int64_t, max_rank> st{};
  std::int64_t offset = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (d >= static_cast<int>(slices.size())) {
      st[static_cast<std::size_t>(s.rank)] = x.stride(d);
      s[s.rank++] = x.shape(d);
      continue;
    }
    const axis_range r = resolve_slice(slices[static_cast<std::size_t>(d)], x.shape(d), d);
    if (r.count > 0) offset += r.start * x.stride(d);
    if (slices[static_cast<std::size_t>(d)].index) continue;
    st[static_cast<std::size_t>(s.rank)] = x.stride(d) * r.step;
    s[s.rank++] = r.count;
  }
  return x.view_at(offset, s, st);
}

// Reshape's shape: `dims` with its -1 resolved so that the size is x's; a shape_error where no
// such shape exists.
inline shape_t reshape_shape(const std::vector<std::int64_t>& dims, const ndarray& x) {
  shape_t s;
  s.rank = static_cast<int>(dims.size());
  std::int64_t known = 1;
  int unknown = -1;
  bool over = false;  // extents whose product passes 2^63 describe no array x can be
  for (int i = 0; i < s.rank; ++i) {
    s[i] = dims[static_cast<std::size_t>(i)];
    if (s[i] < 0) unknown = i;
    else over |= __builtin_mul_overflow(known, s[i], &known);
  }
  if (!over && unknown >= 0 && known > 0 && x.size() % known == 0) s[unknown] = x.size() / known;
  if (over || (unknown >= 0 && (known == 0 || x.size() % known != 0)) || s.size() != x.size()) {
    std::string want = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) want += (i ? ", " : "") + std::to_string(dims[i]);
    throw shape_error("cannot reshape an array of shape " + to_string(x.shape()) + " (" + std::to_string(x.size()) +
                      " elements) into shape " + want + (dims.size() == 1 ? ",)" : ")"));
  }
  return s;
}

// A reduction keeps the dimensions not in `axes`.
inline shape_t reduce_shape(const shape_t& in, const std::vector<int>& axes) {
  shape_t s;
  for (int d = 0; d < in.rank; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) s[s.rank++] = in[d];
  return s;
}
inline shape_t reduce_shape(const ndarray& in, const std::vector<int>& axes) { return reduce_shape(in.shape(), axes); }

// Dot, Gemv and Dot22 without accumulation: vector . vector is a scalar, matrix . vector and
// vector . matrix a vector, matrix . matrix a matrix.
inline shape_t product_shape(const op& o, const ndarray& a, const ndarray& b) {
  shape_t s;
  if (o.kind == op_kind::gemv) {
    s.rank = 1;
    s[0] = o.transpose_a ? a.shape(1) : a.shape(0);
  } else if (a.rank() == 1 && b.rank() == 1) {
  } else if (a.rank() == 2 && b.rank() == 1) {
    s.rank = 1;
    s[0] = a.shape(0);
  } else if (a.rank() == 1 && b.rank() == 2) {
    s.rank = 1;
    s[0] = b.shape(1);
  } else {
    s.rank = 2;
    s[0] = a.shape(0);
    s[1] = b.shape(1);
  }
  return s;
}

[[noreturn]] inline void throw_accumulated_shape(const op& o, const ndarray& y0, const ndarray& a, const ndarray& b,
                                                const char* prefix);

// An accumulating Gemv (y0 + alpha op(A) x) or Gemm (y0 + alpha A B): y0 must have the
// product's shape. `prefix` names the backend's op ("" or "Gpu") in the error.
inline void check_accumulated(const op& o, const ndarray& y0, const ndarray& a, const ndarray& b, const char* prefix) {
  const bool ok = o.kind == op_kind::gemv
                      ? y0.rank() == 1 && y0.shape(0) == (o.transpose_a ? a.shape(1) : a.shape(0))
                      : y0.rank() == 2 && y0.shape(0) == a.shape(0) && y0.shape(1) == b.shape(1);
  if (!ok) throw_accumulated_shape(o, y0, a, b, prefix);
}

XSYM_COLD_BEGIN  // the error path
[[noreturn]] inline void throw_accumulated_shape(const op& o, const ndarray& y0, const ndarray& a, const ndarray& b,
                                                const char* prefix) {
  if (o.kind == op_kind::gemv)
    throw shape_error(std::string(prefix) + "Gemv: the accumulated vector has shape " + to_string(y0.shape()) +
                      " but the product has " + std::to_string(o.transpose_a ? a.shape(1) : a.shape(0)) + " rows");
  throw shape_error(std::string(prefix) + "Gemm: the accumulated matrix has shape " + to_string(y0.shape()) +
                    " but the product is " + std::to_string(a.shape(0)) + " x " + std::to_string(b.shape(1)));
}
XSYM_COLD_END

}  // namespace xsym::detail

#endif
