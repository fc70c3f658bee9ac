#ifndef XSYM_EXEC_CPU_NODES_HPP
#define XSYM_EXEC_CPU_NODES_HPP

// The CPU thunks: each op kind's node on the CPU kernels (backend/cpu).
#include <cstdio>
#include <cstring>

#include "../backend/cpu/blas.hpp"
#include "../backend/cpu/one_pass.hpp"
#include "../backend/cpu/reduce.hpp"
#include "buffers.hpp"
#include "naive.hpp"
#include "nodes.hpp"
#include "shapes.hpp"

namespace xsym::detail {

// The type integer sums and products are computed in so that they wrap around, as numpy's do
// (unsigned: no signed overflow); floats are their own.
template <class T>
using wrapping_t = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::type_identity<T>>::type;

// Every input one element (a function of scalars held in arrays, as in the seeds' call-overhead
// example): the steps run once, on the kernels run_program would call with n = 1, so the
// results are the same bits, without broadcasting, span or block bookkeeping. An in-place node
// writes its own buffer here (for one element, taking over its input's saves nothing; the
// update of a shared scalar, b - 0.01 * gb, is one). Compiled (cxx) programs and any input of
// more than one element take the general path.
inline bool run_elemwise_one(const thunk& t, ndarray* values) {
  const cpu::compiled_program& cp = t.prog;
  const apply_node& n = *t.node;
  const std::size_t n_in = n.inputs.size();
  const ndarray& first = values[n.inputs[0]];
  const int rank = first.rank();
  const void* reg[limits::max_registers];
  for (std::size_t k = 0; k < n_in; ++k) {
    const ndarray& a = values[n.inputs[k]];
    if (a.rank() != rank || a.size() != 1) return false;
    reg[k] = a.data();
  }
  const program& p = *cp.prog;
  ndarray* outs[limits::max_outputs];
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    ndarray& out = values[n.outputs[o]];
    const dtype type = p.reg_types[static_cast<std::size_t>(p.outputs[o])];
    if (!take_destination(t, n.outputs[o], out, type, first.shape())) prepare_output(out, type, first.shape(), t.pool);
    outs[o] = &out;
  }
  alignas(8) unsigned char scratch[limits::max_registers][8];
  const void* args[cpu::detail::max_chain_links + 1];
  const unsigned* input_args = t.one_element_inputs.data();  // per step, its arguments that are inputs
  for (const cpu::compiled_step& st : cp.steps) {
    const unsigned mask = *input_args++;
    for (int j = 0; j < st.arity; ++j) args[j] = (mask >> j) & 1u ? reg[st.args[j]] : scratch[st.args[j]];
    if (!st.chain) st.kernel(scratch[st.dst], args, mask, 1);
    else st.chain_one(scratch[st.dst], args, st.chain_codes, st.links);
  }
  for (std::size_t o = 0; o < n.outputs.size(); ++o) {
    const auto r = static_cast<std::size_t>(p.outputs[o]);
    const void* from = r < n_in ? reg[r] : scratch[r];
    std::byte* to = outs[o]->data();
    switch (cp.out_bytes[o]) {  // a fixed-size copy is a move, not a call
      case 8: std::memcpy(to, from, 8); break;
      case 4: std::memcpy(to, from, 4); break;
      case 1: std::memcpy(to, from, 1); break;
      default: std::memcpy(to, from, static_cast<std::size_t>(cp.out_bytes[o])); break;
    }
  }
  return true;
}

inline void run_elemwise(const thunk& t, ndarray* values) {
  if (t.one_element_path && run_elemwise_one(t, values)) return;
  elemwise_node<false>(t, values, [&](const ndarray* const* ins, ndarray* const* outs) { cpu::run_program(t.prog, ins, outs, t.par); });
}

inline void run_reduce(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  const shape_t s = reduce_shape(in, n.fn->axes);
  ndarray& out = values[n.outputs[0]];
  if (!take_destination(t, n.outputs[0], out, t.out_type, s)) prepare_output(out, t.out_type, s, t.pool);
  cpu::run_reduce(*n.fn, in, out);
}

inline void run_reduce_naive(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, reduce_shape(in, n.fn->axes), t.pool);
  naive::reduce(*n.fn, in, out);
}

// A reduction whose input is an elementwise program of the node's inputs (careduce_fusion),
// reduced as it is computed, so the elementwise value never goes through memory:
// - sums and means over trailing axes (all axes included) of inputs that are whole C-ordered
//   arrays, one value, or one row of the reduced axes: a typed tree's sums (bind_typed_sum),
//   or for one long row the program's values a block at a time; both in sum_contiguous's
//   order, so the result has the bits of the two nodes;
// - otherwise blocks of about reduce_block_bytes along axis 0: where the reduction keeps axis
//   0, each block's rows are reduced into their place by the loop run_reduce runs (the two
//   nodes' bits); where it reduces it, the blocks' results are combined in order
//   (cpu::reduce_block: max and min keep their bits, sums are within float64 rounding).
// DebugMode's reference (`fused` false), small values and a threaded program (openmp) compute
// the value, then reduce it, as the two nodes did.
inline constexpr std::int64_t reduce_block_bytes = 16384;

// The trailing reduced axes as rows x len, and each input's step from row to row in bytes (0:
// one value, or the same row for every row); false where the layout is another.
inline bool reduced_rows(const op& o, const shape_t& shape, const ndarray* const* ins, int n_in, std::int64_t& rows,
                         std::int64_t& len, std::int64_t* step) {
  const int k = o.axes.empty() ? shape.rank : o.axes.front();
  for (std::size_t a = 0; a < o.axes.size(); ++a)
    if (o.axes[a] != k + static_cast<int>(a)) return false;
  if (k + static_cast<int>(o.axes.size()) != shape.rank || o.axes.empty()) return false;
  rows = 1;
  len = 1;
  for (int d = 0; d < shape.rank; ++d) (d < k ? rows : len) *= shape[d];
  for (int j = 0; j < n_in; ++j) {
    const ndarray& a = *ins[j];
    if (!a.is_c_contiguous()) return false;
    bool whole = a.shape() == shape, one_row = a.rank() == shape.rank;
    for (int d = 0; one_row && d < shape.rank; ++d) one_row = d < k ? a.shape(d) == 1 : a.shape(d) == shape[d];
    if (a.size() == 1 && !whole) step[j] = 0;
    else if (whole) step[j] = len * static_cast<std::int64_t>(dtype_size(a.type()));
    else if (one_row) step[j] = 0;
    else return false;
  }
  return true;
}

inline void reduce_fused_node(const thunk& t, ndarray* values, bool fused) {
  const apply_node& n = *t.node;
  const op& o = *n.fn;
  const int n_in = static_cast<int>(n.inputs.size());
  const ndarray* ins[limits::max_registers] = {};
  for (int k = 0; k < n_in; ++k) ins[k] = &values[n.inputs[static_cast<std::size_t>(k)]];
  const shape_t shape = cpu::broadcast_shape(ins, t.slot_bcast.data(), n_in);
  const dtype vt = t.prog.prog->reg_types[static_cast<std::size_t>(t.prog.prog->outputs[0])];
  ndarray& out = values[n.outputs[0]];
  const shape_t kept = reduce_shape(shape, o.axes);
  if (!take_destination(t, n.outputs[0], out, t.out_type, kept)) prepare_output(out, t.out_type, kept, t.pool);
  const std::int64_t total = shape.size();
  const std::int64_t per_block = reduce_block_bytes / static_cast<std::int64_t>(dtype_size(vt));
  // Threads compute the whole value at once (the program splits it); the reduction below
  // still combines axis 0's blocks in one thread's order.
  const bool threaded = fused && total > 0 && t.par.threads > 1 && total >= t.par.elemwise_minsize;
  fused = fused && total > 0 && !threaded;
  std::int64_t rows = 0, len = 0, step[limits::max_registers] = {};
  // Sums over trailing axes of such inputs take sum_contiguous's order on one thread: a
  // threaded value is then reduced as the two nodes would, not in blocks.
  const bool sum_rows = (o.reduction == reduce_op::sum || o.reduction == reduce_op::mean) && total > 0 &&
                        reduced_rows(o, shape, ins, n_in, rows, len, step);
  if (fused && sum_rows) {
    // Short rows cost more one at a time than a block of them does where a row ends in part
    // of a vector (its values computed from copies): those of less than 256 bytes take blocks.
    const std::int64_t row_bytes = len * static_cast<std::int64_t>(dtype_size(vt));
    // The typed sums read each input as one value where the graph's types said so, else as
    // rows of len values: an input that is one value only at run time (a column of one row)
    // goes to the program's loops.
    bool typed = t.prog.typed_sum != nullptr;
    for (int k = 0; typed && k < n_in; ++k)
      typed = ((t.prog.typed_sum_scalar_bits >> k) & 1u) || ins[k]->size() != 1 || ins[k]->shape() == shape || len == 1;
    if (typed && (rows == 1 || row_bytes % 64 == 0 || row_bytes >= 256)) {
      ndarray acc;
      prepare_output(acc, dtype::float64, kept, t.pool);
      const std::byte* in_bytes[limits::max_registers] = {};
      for (int k = 0; k < n_in; ++k) in_bytes[k] = ins[k]->data();
      t.prog.typed_sum(in_bytes, t.prog.sum_map.data(), step, rows, len, acc.data_as<double>());
      cpu::finish_blocks(o, acc, len, out);
      if (t.pool) t.pool->give(acc);
      return;
    }
    if (rows == 1 && len > per_block) {
      ndarray value;
      prepare_output(value, vt, shape_t{{per_block}, 1}, t.pool);
      double s = cpu::kernels_of(vt).sum_program(t.prog, ins, n_in, value, len);
      ndarray acc = ndarray::wrap(dtype::float64, shape_t{}, nullptr, &s);
      cpu::finish_blocks(o, acc, len, out);
      if (t.pool) t.pool->give(value);
      return;
    }
  }
  const std::int64_t inner = shape[0] ? total / shape[0] : 0;
  const bool keeps_rows = o.axes.empty() || o.axes.front() != 0;
  // Where axis 0 is reduced, a block's result is combined once per block: 16 rows a block or
  // more, and a value of four blocks or less in one piece (measured faster: it stays in L2).
  const std::int64_t per = std::max<std::int64_t>(keeps_rows ? 1 : 16, per_block / std::max<std::int64_t>(inner, 1));
  const bool in_blocks = shape[0] > per && (keeps_rows || total > 4 * per_block);
  // Where axis 0 is reduced, blocks' results are combined in order into acc: a sum's blocks in
  // float64, max and min in the input's type; finish_blocks writes out.
  ndarray acc, part;
  op bo;  // a mean's blocks are summed, and divided by finish_blocks
  auto start_blocks = [&] {
    bo.kind = op_kind::reduce;
    bo.reduction = o.reduction == reduce_op::mean ? reduce_op::sum : o.reduction;
    bo.axes = o.axes;
    prepare_output(acc, cpu::block_acc_type(o, vt), kept, t.pool);
    prepare_output(part, cpu::block_acc_type(o, vt), kept, t.pool);
  };
  auto finish = [&] {
    std::int64_t count = 1;
    for (int a : o.axes) count *= shape[a];
    cpu::finish_blocks(o, acc, count, out);
    if (t.pool) {
      t.pool->give(acc);
      t.pool->give(part);
    }
  };
  if (!fused || !in_blocks) {
    ndarray value;
    prepare_output(value, vt, shape, t.pool);
    ndarray* outs[1] = {&value};
    cpu::run_program(t.prog, ins, outs, t.par);
    if (t.naive_products) {
      naive::reduce(o, value, out);
    } else if (threaded && in_blocks && !keeps_rows && !sum_rows) {
      start_blocks();
      for (std::int64_t r = 0; r < shape[0]; r += per) {
        shape_t vs = shape;
        vs[0] = std::min(per, shape[0] - r);
        cpu::reduce_block(bo, value.view_at(r * value.stride(0), vs, value.strides()), acc, part, r == 0);
      }
      finish();
    } else {
      cpu::run_reduce(o, value, out);
    }
    if (t.pool) t.pool->give(value);
    return;
  }
  // Each block's views: rows [r, r + m) of each input; one values and inputs broadcast along
  // axis 0 as they are.
  shape_t bshape = shape;
  bshape[0] = per;
  ndarray value;
  prepare_output(value, vt, bshape, t.pool);
  ndarray views[limits::max_registers];
  const ndarray* vins[limits::max_registers] = {};
  if (!keeps_rows) start_blocks();
  const std::int64_t out_row = keeps_rows && kept.rank ? out.size() / std::max<std::int64_t>(kept[0], 1) : 0;
  for (std::int64_t r = 0; r < shape[0]; r += per) {
    const std::int64_t m = std::min(per, shape[0] - r);
    for (int k = 0; k < n_in; ++k) {
      const ndarray& a = *ins[k];
      if (a.size() == 1 || a.shape(0) == 1) {
        vins[k] = &a;
        continue;
      }
      shape_t s = a.shape();
      s[0] = m;
      views[k] = a.view_at(r * a.stride(0), s, a.strides());
      vins[k] = &views[k];
    }
    shape_t vs = bshape;
    vs[0] = m;
    ndarray v = value.view(vs, value.strides());
    ndarray* outs[1] = {&v};
    cpu::run_program(t.prog, vins, outs);
    if (keeps_rows) {
      shape_t os = kept;
      os[0] = m;
      ndarray rows_out = out.view_at(r * out_row, os, out.strides());
      cpu::run_reduce(o, v, rows_out);
    } else {
      cpu::reduce_block(bo, v, acc, part, r == 0);
    }
  }
  if (!keeps_rows) finish();
  if (t.pool) t.pool->give(value);
}
inline void run_reduce_fused(const thunk& t, ndarray* values) { reduce_fused_node(t, values, true); }
inline void run_reduce_steps(const thunk& t, ndarray* values) { reduce_fused_node(t, values, false); }

// out = beta y0 + alpha op(A) x in a buffer of out's own, y0 read where it is.
inline void gemv_beside(const thunk& t, ndarray& out, const ndarray& y0, const ndarray& a, bool transpose,
                        const ndarray& x, double alpha, double beta) {
  prepare_output(out, y0.type(), y0.shape(), t.pool);
  if (t.naive_products) return naive::gemv(a, transpose, x, out, alpha, &y0, beta);
  ndarray y0_copy;
  const ndarray& c = y0.is_c_contiguous() ? y0 : (y0_copy = y0.contiguous());
  cpu::run_gemv(a, transpose, x, out, alpha, true, t.par, &c, beta);
}

inline void run_dot_family(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  ndarray& out = values[n.outputs[0]];
  const op& o = *n.fn;
  if (o.accumulate) {
    // out = beta * y0 + alpha * op(A) x, or y0 + alpha * A B, in y0's buffer when it dies here;
    // else y0 is read where it is (a shared variable's value, weight decay folded in as beta).
    ndarray& y0_slot = values[n.inputs[0]];
    const ndarray& A = values[n.inputs[1]];
    const ndarray& B = values[n.inputs[2]];
    check_accumulated(o, y0_slot, A, B, "");
    const bool in_place = o.is_inplace() && y0_slot.is_c_contiguous() && y0_slot.owner() && y0_slot.owner().use_count() == 1;
    if (o.kind == op_kind::dot22) {
      if (in_place) {
        out = std::move(y0_slot);
      } else {
        prepare_output(out, y0_slot.type(), y0_slot.shape(), t.pool);
        const ndarray c = y0_slot.contiguous();
        if (out.nbytes()) std::memcpy(out.data(), c.data(), out.nbytes());  // an empty y0 may have no buffer
      }
      cpu::run_dot22(A, B, out, o.alpha, true);
    } else if (in_place) {
      out = std::move(y0_slot);
      cpu::run_gemv(A, o.transpose_a, B, out, o.alpha, true, t.par, nullptr, o.beta);
    } else {
      gemv_beside(t, out, y0_slot, A, o.transpose_a, B, o.alpha, o.beta);
    }
    return;
  }
  const ndarray& a = values[n.inputs[0]];
  const ndarray& b = values[n.inputs[1]];
  prepare_output(out, a.type(), product_shape(o, a, b), t.pool);
  if (o.kind == op_kind::gemv) cpu::run_gemv(a, o.transpose_a, b, out, 1.0, false, t.par);
  else if (a.rank() == 1 && b.rank() == 1) cpu::run_dot(a, b, out);
  else if (a.rank() == 2 && b.rank() == 1) cpu::run_gemv(a, false, b, out, 1.0, false, t.par);
  else if (a.rank() == 1 && b.rank() == 2) cpu::run_gemv(b, true, a, out, 1.0, false, t.par);
  else cpu::run_dot22(a, b, out);
}

// run_dot_family on DebugMode's own loops (naive above), never in place.
inline void run_dot_family_naive(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  ndarray& out = values[n.outputs[0]];
  const op& o = *n.fn;
  if (o.accumulate) {
    const ndarray& y0 = values[n.inputs[0]];
    const ndarray& A = values[n.inputs[1]];
    const ndarray& B = values[n.inputs[2]];
    check_accumulated(o, y0, A, B, "");
    if (o.kind != op_kind::dot22) return gemv_beside(t, out, y0, A, o.transpose_a, B, o.alpha, o.beta);
    prepare_output(out, y0.type(), y0.shape(), t.pool);
    const ndarray c = y0.contiguous();
    if (out.nbytes()) std::memcpy(out.data(), c.data(), out.nbytes());
    naive::dot22(A, B, out, o.alpha, true);
    return;
  }
  const ndarray& a = values[n.inputs[0]];
  const ndarray& b = values[n.inputs[1]];
  prepare_output(out, a.type(), product_shape(o, a, b), t.pool);
  if (o.kind == op_kind::gemv) naive::gemv(a, o.transpose_a, b, out, 1.0, nullptr, 1.0);
  else if (a.rank() == 1 && b.rank() == 1) naive::dot(a, b, out);
  else if (a.rank() == 2 && b.rank() == 1) naive::gemv(a, false, b, out, 1.0, nullptr, 1.0);
  else if (a.rank() == 1 && b.rank() == 2) naive::gemv(b, true, a, out, 1.0, nullptr, 1.0);
  else naive::dot22(a, b, out, 1.0, false);
}

inline void run_shape_prod(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  std::int64_t count = 1;
  for (int a : n.fn->axes) count *= in.shape(a);
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, shape_t{}, t.pool);
  xsym::detail::visit_dtype(out.type(), [&](auto z) { *out.data_as<decltype(z)>() = static_cast<decltype(z)>(count); });
}

// AllReduce: the communicator reduces the input over every rank into the output (an into(...)
// destination straight, when it is C-contiguous).
inline void run_allreduce(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  ndarray& out = values[n.outputs[0]];
  const ndarray* d = t.dests ? t.dests[n.outputs[0]] : nullptr;
  if (!(d && d->is_c_contiguous() && take_destination(t, n.outputs[0], out, t.out_type, in.shape())))
    prepare_output(out, t.out_type, in.shape(), t.pool);
  n.fn->comm->allreduce(in, out, n.fn->reduction, t.wait_ticks);
}

// AllReduce in DebugMode's twin: the function's own node's result in this call, no collective
// (collective_log); what the twin read is kept for the comparison with what the node read.
inline void run_allreduce_replay(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  collective_log::entry* e = t.replay ? t.replay->take(n.fn.get()) : nullptr;
  if (!e)
    throw std::runtime_error(
        "xsym DebugMode: the graph without optimizations reduces over the ranks where the function's own nodes did "
        "not in this call; DebugMode replays the function's AllReduce results and runs no collective of its own");
  e->twin_input = values[n.inputs[0]];
  values[n.outputs[0]] = e->output;
}

// Argmax / Argmin: the input as [outer, len, inner] around the reduced axis (or one line of
// every element, in C order), the first extreme of each line; a NaN is the extreme (numpy).
inline void run_arg_reduce(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray x = values[n.inputs[0]].contiguous();
  const op& o = *n.fn;
  std::int64_t outer = 1, len = x.size(), inner = 1;
  shape_t s;
  if (!o.all_axes) {
    const int a = o.axes[0];
    len = x.shape(a);
    for (int d = 0; d < x.rank(); ++d) {
      if (d < a) outer *= x.shape(d);
      if (d > a) inner *= x.shape(d);
      if (d != a) s[s.rank++] = x.shape(d);
    }
  }
  if (len == 0 && outer * inner > 0)
    throw shape_error(std::string("attempt to get ") + (o.reduction == reduce_op::max ? "argmax" : "argmin") +
                      " of an empty sequence (shape " + to_string(x.shape()) + ")");
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, dtype::int64, s, t.pool);
  std::int64_t* r = out.data_as<std::int64_t>();
  const bool want_max = o.reduction == reduce_op::max;
  visit_dtype(x.type(), [&](auto z) {
    using T = decltype(z);
    const T* p = x.data_as<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (inner == 1 && len > 0) {  // along the last axis: each line in vectors
        for (std::int64_t i = 0; i < outer; ++i)
          r[i] = want_max ? cpu::detail::arg_extreme_contiguous<reduce_op::max>(p + i * len, len)
                          : cpu::detail::arg_extreme_contiguous<reduce_op::min>(p + i * len, len);
        return;
      }
    }
    for (std::int64_t i = 0; i < outer; ++i)
      for (std::int64_t k = 0; k < inner; ++k) {
        const T* line = p + i * len * inner + k;
        std::int64_t best = 0;
        for (std::int64_t j = 1; j < len; ++j) {
          const T v = line[j * inner], b = line[best * inner];
          if constexpr (std::is_floating_point_v<T>) {
            if (b != b) break;  // the first NaN stays
            if (v != v) {
              best = j;
              break;
            }
          }
          if (want_max ? b < v : v < b) best = j;
        }
        r[i * inner + k] = best;
      }
  });
}

// The row numbers of an index vector (any strides, int32 or int64), negative ones counted from
// the end; an index outside [-rows, rows) is an error naming it and its position.
inline std::vector<std::int64_t> row_indices(const ndarray& idx, std::int64_t rows) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(idx.size()));
  visit_dtype(idx.type(), [&](auto z) {
    using I = decltype(z);
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      const I* p = idx.data_as<I>();
      for (std::int64_t i = 0; i < idx.size(); ++i) {
        const auto v = static_cast<std::int64_t>(p[i * idx.stride(0)]);
        if (v < -rows || v >= rows)
          throw index_error("index " + std::to_string(v) + " (position " + std::to_string(i) +
                            " of the indices) is out of range for " + std::to_string(rows) + " rows");
        r[static_cast<std::size_t>(i)] = v < 0 ? v + rows : v;
      }
    }
  });
  return r;
}

// AdvancedSubtensor1: x's rows at idx, copied (rows are whole C-order blocks of x).
inline void run_take(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray x = values[n.inputs[0]].contiguous();
  const auto rows = row_indices(values[n.inputs[1]], x.shape(0));
  shape_t s = x.shape();
  s[0] = static_cast<std::int64_t>(rows.size());
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, s, t.pool);
  const std::size_t row_bytes = x.shape(0) ? x.nbytes() / static_cast<std::size_t>(x.shape(0)) : 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (row_bytes) std::memcpy(out.data() + i * row_bytes, x.data() + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
}

// AdvancedIncSubtensor1: x with y's row i added at row idx[i], in index order. y broadcasts
// (numpy's np.add.at) along the dimensions its type marks broadcastable.
inline void run_inc_rows(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& x = values[n.inputs[0]];
  const ndarray& y = values[n.inputs[1]];
  const auto rows = row_indices(values[n.inputs[2]], x.shape(0));
  shape_t want = x.shape();
  want[0] = static_cast<std::int64_t>(rows.size());
  std::array<std::int64_t, max_rank> y_strides{};
  const std::uint8_t y_bcast = t.slot_bcast[1];
  for (int d = 0; d < x.rank(); ++d) {
    const bool broadcast = y.shape(d) == 1 && ((y_bcast >> d) & 1u);
    if (y.shape(d) != want[d] && !broadcast)
      throw shape_error("the rows added have shape " + to_string(y.shape()) + ", where " + std::to_string(rows.size()) +
                        " indices into " + to_string(x.shape()) + " need " + to_string(want) +
                        " (or 1 along a dimension broadcastable in y's type)");
    y_strides[static_cast<std::size_t>(d)] = broadcast ? 0 : y.stride(d);
  }
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, x.shape(), t.pool);
  const ndarray src = x.contiguous();
  std::memcpy(out.data(), src.data(), src.nbytes());
  const std::int64_t row = x.shape(0) ? x.size() / x.shape(0) : 0;
  if (row == 0) return;
  // y's row i with the broadcast strides, walked in C order beside out's (C-contiguous) row.
  shape_t row_shape = x.shape();
  row_shape[0] = 1;
  visit_dtype(x.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, bool>) {
      using A = wrapping_t<T>;
      T* o = out.data_as<T>();
      const T* a = y.data_as<T>();
      for (std::size_t i = 0; i < rows.size(); ++i) {
        T* orow = o + rows[i] * row;
        const T* yrow = a + static_cast<std::int64_t>(i) * y_strides[0];
        for_each_row2(row_shape, out.strides(), y_strides,
                      [&](std::int64_t od, std::int64_t oy, std::int64_t len, std::int64_t sd, std::int64_t sy) {
                        for (std::int64_t k = 0; k < len; ++k) {
                          T& d = orow[od + k * sd];
                          d = static_cast<T>(static_cast<A>(d) + static_cast<A>(yrow[oy + k * sy]));
                        }
                      });
      }
    }
  });
}

// dst's elements = src's (same dtype and shape, any strides; dst does not overlap src).
inline void copy_elements(const ndarray& src, const ndarray& dst) {
  if (src.is_c_contiguous() && dst.is_c_contiguous()) {
    if (src.nbytes()) std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  copy_strided(dst.data(), dst.strides(), src.data(), src.strides(), src.shape(), dtype_size(src.type()));
}

inline void run_subtensor(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  values[n.outputs[0]] = subtensor_view(values[n.inputs[0]], n.fn->slices);
}

// An extent read from an int scalar input (copied to the host from the device: a GPU Reshape's
// extents are device values); a negative one is a shape_error naming its axis.
inline std::int64_t extent_of(const ndarray& e, int axis) {
  const auto v = static_cast<std::int64_t>(on_host(e).flat_as_double(0));
  if (v < 0) throw shape_error("extent " + std::to_string(v) + " for axis " + std::to_string(axis) + " is negative");
  return v;
}

// Reshape: a view of a C-contiguous x; else of a C-contiguous copy.
inline void run_reshape(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& x = values[n.inputs[0]];
  shape_t s;
  if (n.fn->extents_from_inputs) {
    s.rank = static_cast<int>(n.inputs.size()) - 1;
    for (int d = 0; d < s.rank; ++d) s[d] = extent_of(values[n.inputs[1 + static_cast<std::size_t>(d)]], d);
  } else {
    s = n.inputs.size() > 1 ? values[n.inputs[1]].shape() : reshape_shape(n.fn->dims, x);
  }
  if (s.size() != x.size())
    throw shape_error("cannot reshape an array of shape " + to_string(x.shape()) + " into shape " + to_string(s));
  ndarray v = (x.is_c_contiguous() ? x : x.contiguous()).view(s, {});
  v.set_c_strides();
  values[n.outputs[0]] = std::move(v);
}

// x's elements outside the region `slices` takes, into out (x's shape). A region of unit steps
// leaves at most two boxes per axis around it (before and after it along that axis, inside it
// along the axes before); any other region copies all of x.
inline void copy_outside(const ndarray& x, const ndarray& out, const std::vector<slice_spec>& slices) {
  std::int64_t lo[max_rank] = {}, hi[max_rank] = {};
  for (int d = 0; d < x.rank(); ++d) {
    lo[d] = 0;
    hi[d] = x.shape(d);
    if (d >= static_cast<int>(slices.size())) continue;
    const axis_range r = resolve_slice(slices[static_cast<std::size_t>(d)], x.shape(d), d);
    if (r.count == 0 || (r.step != 1 && r.count > 1)) return copy_elements(x, out);
    lo[d] = r.start;
    hi[d] = r.start + r.count;
  }
  for (int d = 0; d < x.rank(); ++d)
    for (const auto& [from, to] : {std::pair{std::int64_t{0}, lo[d]}, std::pair{hi[d], x.shape(d)}}) {
      if (from == to) continue;
      shape_t s = x.shape();
      std::int64_t at_x = 0, at_out = 0;
      for (int e = 0; e < x.rank(); ++e) {
        const std::int64_t first = e < d ? lo[e] : e == d ? from : 0;
        s[e] = e < d ? hi[e] - lo[e] : e == d ? to - from : x.shape(e);
        at_x += first * x.stride(e);
        at_out += first * out.stride(e);
      }
      copy_elements(x.view_at(at_x, s, x.strides()), out.view_at(at_out, s, out.strides()));
    }
}

// The array IncSubtensor writes: x's buffer when the node destroys x and nothing else holds it
// (`keep`: x is also read after the output is made), else a copy of x where the node sets
// values, only the elements outside the region.
inline void inc_subtensor_output(const thunk& t, ndarray& x, ndarray& out, bool keep) {
  const op& o = *t.node->fn;
  if (o.is_inplace() && !keep && x.is_c_contiguous() && x.owner() && x.owner().use_count() == 1) {
    out = std::move(x);
    return;
  }
  prepare_output(out, t.out_type, x.shape(), t.pool);
  if (o.set_values) copy_outside(x, out, o.slices);
  else copy_elements(x, out);
}

// x[slices] of out set to (or incremented by) y, y broadcast along the region's dimensions
// where `y_bcast` says it is statically broadcastable; the shapes are checked before anything
// is written.
inline void inc_subtensor_into(const thunk& t, ndarray& x, const ndarray& y, std::uint8_t y_bcast, ndarray& out,
                               bool keep) {
  const op& o = *t.node->fn;
  const shape_t region = subtensor_view(x, o.slices).shape();  // no view kept: x may be taken in place
  std::array<std::int64_t, max_rank> y_strides{};
  for (int d = 0; d < region.rank; ++d) {
    const bool broadcast = y.shape(d) == 1 && ((y_bcast >> d) & 1u);
    if (y.shape(d) != region[d] && !broadcast)
      throw shape_error("the value of shape " + to_string(y.shape()) + " does not fit the region of shape " +
                        to_string(region) + " that the slice takes from shape " + to_string(x.shape()));
    y_strides[static_cast<std::size_t>(d)] = broadcast ? 0 : y.stride(d);
  }
  inc_subtensor_output(t, x, out, keep);
  const ndarray dst = subtensor_view(out, o.slices);
  visit_dtype(out.type(), [&](auto z) {
    using T = decltype(z);
    T* d = dst.data_as<T>();
    const T* v = y.data_as<T>();
    // Rows whose elements are adjacent in both take a loop the compiler vectorizes.
    if (o.set_values) {
      for_each_row2(dst.shape(), dst.strides(), y_strides,
                    [&](std::int64_t od, std::int64_t oy, std::int64_t len, std::int64_t sd, std::int64_t sy) {
                      if (sd == 1 && sy == 1) std::memcpy(d + od, v + oy, static_cast<std::size_t>(len) * sizeof(T));
                      else
                        for (std::int64_t i = 0; i < len; ++i) d[od + i * sd] = v[oy + i * sy];
                    });
    } else if constexpr (!std::is_same_v<T, bool>) {
      using A = wrapping_t<T>;
      for_each_row2(dst.shape(), dst.strides(), y_strides,
                    [&](std::int64_t od, std::int64_t oy, std::int64_t len, std::int64_t sd, std::int64_t sy) {
                      T* dr = d + od;
                      const T* vr = v + oy;
                      if (sd == 1 && sy == 1)
                        for (std::int64_t i = 0; i < len; ++i) dr[i] = static_cast<T>(static_cast<A>(dr[i]) + static_cast<A>(vr[i]));
                      else
                        for (std::int64_t i = 0; i < len; ++i)
                          dr[i * sd] = static_cast<T>(static_cast<A>(dr[i * sd]) + static_cast<A>(vr[i * sy]));
                    });
    }
  });
}

// IncSubtensor: x with x[slices] set to (or incremented by) y. In x's buffer when the node
// destroys x and nothing else holds it.
inline void run_inc_subtensor(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  ndarray& x = values[n.inputs[0]];
  inc_subtensor_into(t, x, values[n.inputs[1]], t.slot_bcast[1], values[n.outputs[0]], n.inputs[1] == n.inputs[0]);
}

// IncSubtensor{Set} whose value is a fused elementwise program of inputs 1, 2, ...
// (set_subtensor_fusion): the program writes its rows straight into the output's region, and
// only x's elements outside the region are copied, so the value never goes through memory of
// its own. Where the value does not fill the region element for element (it broadcasts into
// it, or the region's rows are strided), and for DebugMode's reference (`direct` false), the
// value is computed into an array and set, as the two nodes did.
inline void inc_subtensor_fused_node(const thunk& t, ndarray* values, bool direct) {
  const apply_node& n = *t.node;
  const op& o = *n.fn;
  ndarray& x = values[n.inputs[0]];
  const int n_in = static_cast<int>(n.inputs.size()) - 1;
  const ndarray* ins[limits::max_registers] = {};
  bool reads_x = false;  // the program reads x's slot itself: x must outlive the output
  for (int k = 0; k < n_in; ++k) {
    ins[k] = &values[n.inputs[static_cast<std::size_t>(k) + 1]];
    reads_x |= n.inputs[static_cast<std::size_t>(k) + 1] == n.inputs[0];
  }
  const shape_t shape = cpu::broadcast_shape(ins, t.slot_bcast.data() + 1, n_in);
  bool fits = direct;  // the region takes the value's rows element for element
  {
    const ndarray region = subtensor_view(x, o.slices);  // released before x may be taken in place
    const int last = region.rank() - 1;
    fits = fits && shape == region.shape() && (last < 0 || region.stride(last) == 1 || region.shape(last) == 1);
  }
  if (fits) {
    ndarray& out = values[n.outputs[0]];
    inc_subtensor_output(t, x, out, reads_x);
    ndarray dst = subtensor_view(out, o.slices);
    ndarray* outs[1] = {&dst};
    cpu::run_program(t.prog, ins, outs, t.par);
    return;
  }
  ndarray value;
  prepare_output(value, t.out_type, shape, t.pool);
  ndarray* outs[1] = {&value};
  cpu::run_program(t.prog, ins, outs, t.par);
  inc_subtensor_into(t, x, value, o.value_broadcastable, values[n.outputs[0]], reads_x);
  if (t.pool) t.pool->give(value);
}
inline void run_inc_subtensor_fused(const thunk& t, ndarray* values) { inc_subtensor_fused_node(t, values, true); }
inline void run_inc_subtensor_steps(const thunk& t, ndarray* values) { inc_subtensor_fused_node(t, values, false); }

// Join: the inputs copied one after the other along the axis into a C-contiguous output.
inline void run_join(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const int axis = n.fn->axes[0];
  shape_t s = values[n.inputs[0]].shape();
  s[axis] = 0;
  for (int in : n.inputs) {
    const ndarray& x = values[in];
    for (int d = 0; d < s.rank; ++d)
      if (d != axis && x.shape(d) != s[d]) {
        std::string shapes;
        for (int j : n.inputs) shapes += (shapes.empty() ? "" : ", ") + to_string(values[j].shape());
        throw shape_error("the tensors joined along axis " + std::to_string(axis) + " have shapes " + shapes +
                          ", which differ in axis " + std::to_string(d));
      }
    s[axis] += x.shape(axis);
  }
  ndarray& out = values[n.outputs[0]];
  prepare_output(out, t.out_type, s, t.pool);
  std::int64_t at = 0;
  for (int in : n.inputs) {
    const ndarray& x = values[in];
    copy_elements(x, out.view_at(at * out.stride(axis), x.shape(), out.strides()));
    at += x.shape(axis);
  }
}

// Split (the Join's gradient): the view of the joined array where part k lay.
inline void run_join_part(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const int axis = n.fn->axes[0];
  const ndarray& joined = values[n.inputs[0]];
  std::int64_t at = 0, total = 0;
  for (std::size_t j = 1; j < n.inputs.size(); ++j) {
    const std::int64_t e = values[n.inputs[j]].shape(axis);
    if (static_cast<int>(j) - 1 < n.fn->pass_u) at += e;
    total += e;
  }
  if (total != joined.shape(axis))
    throw shape_error("the array split has " + std::to_string(joined.shape(axis)) + " elements along axis " +
                      std::to_string(axis) + " where its parts have " + std::to_string(total));
  shape_t s = joined.shape();
  s[axis] = values[n.inputs[1 + static_cast<std::size_t>(n.fn->pass_u)]].shape(axis);
  values[n.outputs[0]] = joined.view_at(at * joined.stride(axis), s, joined.strides());
}

// Alloc: the value broadcast (along its statically broadcastable dimensions) to the shape
// the extent inputs give.
inline void run_alloc(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& v = values[n.inputs[0]];
  shape_t s;
  s.rank = static_cast<int>(n.inputs.size()) - 1;
  for (int d = 0; d < s.rank; ++d) s[d] = extent_of(values[n.inputs[1 + static_cast<std::size_t>(d)]], d);
  std::array<std::int64_t, max_rank> v_strides{};
  for (int d = 0; d < s.rank; ++d) {
    const bool broadcast = v.shape(d) == 1 && ((t.slot_bcast[0] >> d) & 1u);
    if (v.shape(d) != s[d] && !broadcast)
      throw shape_error("the value of shape " + to_string(v.shape()) + " does not broadcast to shape " + to_string(s));
    v_strides[static_cast<std::size_t>(d)] = broadcast ? 0 : v.stride(d);
  }
  ndarray& out = values[n.outputs[0]];
  if (!take_destination(t, n.outputs[0], out, t.out_type, s)) prepare_output(out, t.out_type, s, t.pool);
  copy_elements(v.view(s, v_strides), out);  // the value broadcast: strides of 0
}

// ARange: numpy's count, ceil((stop - start) / step) (none when negative), and start + i step.
// Integer counts and values are computed in uint64, where stop - start and i * step cannot
// overflow (the true distance is below 2^64, each value lies in [start, stop)); a count whose
// bytes exceed what an array can address is an error naming it (numpy's "Maximum allowed size").
inline void run_arange(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& a = values[n.inputs[0]];
  const ndarray& b = values[n.inputs[1]];
  const ndarray& c = values[n.inputs[2]];
  ndarray& out = values[n.outputs[0]];
  visit_dtype(t.out_type, [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, bool>) {
      const T start = *a.data_as<T>(), stop = *b.data_as<T>(), step = *c.data_as<T>();
      if (step == T(0)) throw shape_error("arange: the step is zero");
      constexpr auto max_count = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max() / sizeof(T));
      auto too_long = [](const std::string& count) {
        throw shape_error("arange: the range has " + count + " elements, more than an array of " +
                          std::string(dtype_name(dtype_of<T>())) + " can hold (at most " + std::to_string(max_count) + ")");
      };
      std::int64_t count = 0;
      if constexpr (std::is_integral_v<T>) {
        auto u = [](T v) { return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)); };  // modulo 2^64
        if (step > 0 ? stop > start : stop < start) {
          const std::uint64_t distance = step > 0 ? u(stop) - u(start) : u(start) - u(stop);
          const std::uint64_t magnitude = step > 0 ? u(step) : std::uint64_t{0} - u(step);
          const std::uint64_t k = 1 + (distance - 1) / magnitude;
          if (k > max_count) too_long(std::to_string(k));
          count = static_cast<std::int64_t>(k);
        }
      } else {
        const double q = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
        if (!(q == q) || std::isinf(q)) throw shape_error("arange: the length of the range is not finite");
        if (q > static_cast<double>(max_count)) {  // checked before the cast, which would be undefined
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.17g", q);
          too_long(buf);
        }
        count = q > 0 ? static_cast<std::int64_t>(q) : 0;
      }
      shape_t s;
      s.rank = 1;
      s[0] = count;
      if (!take_destination(t, n.outputs[0], out, t.out_type, s)) prepare_output(out, t.out_type, s, t.pool);
      T* o = out.data_as<T>();
      if constexpr (std::is_integral_v<T>) {
        const auto first = static_cast<std::uint64_t>(static_cast<std::int64_t>(start));
        const auto by = static_cast<std::uint64_t>(static_cast<std::int64_t>(step));
        for (std::int64_t i = 0; i < count; ++i)
          o[i] = static_cast<T>(static_cast<std::int64_t>(first + static_cast<std::uint64_t>(i) * by));
      } else {
        for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * step);
      }
    }
  });
}

// CumOp: the running sum or product along the axis, in the input's type (integers wrap).
inline void run_cumulative(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& x = values[n.inputs[0]];
  const int axis = n.fn->axes[0];
  const bool sum = n.fn->reduction == reduce_op::sum;
  ndarray& out = values[n.outputs[0]];
  if (!take_destination(t, n.outputs[0], out, t.out_type, x.shape())) prepare_output(out, t.out_type, x.shape(), t.pool);
  copy_elements(x, out);
  const std::int64_t len = x.shape(axis);
  std::int64_t inner = 1;
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape(d);
  const std::int64_t outer = len ? x.size() / (len * inner) : 0;
  visit_dtype(out.type(), [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, bool>) {
      using A = wrapping_t<T>;
      T* o = out.data_as<T>();
      auto run = [&](auto combine) {  // the operation chosen once, outside the loops
        for (std::int64_t i = 0; i < outer; ++i)
          for (std::int64_t j = 1; j < len; ++j) {
            T* row = o + (i * len + j) * inner;
            const T* prev = row - inner;
            for (std::int64_t k = 0; k < inner; ++k) row[k] = static_cast<T>(combine(static_cast<A>(prev[k]), static_cast<A>(row[k])));
          }
      };
      if (sum) run([](A a, A b) { return a + b; });
      else run([](A a, A b) { return a * b; });
    }
  });
}

// Assert: x itself when every condition holds.
inline void run_check(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  for (std::size_t k = 1; k < n.inputs.size(); ++k)
    if (!*values[n.inputs[k]].data_as<bool>())
      throw assertion_error(n.fn->message + " (condition " + std::to_string(k - 1) + " is false)");
  values[n.outputs[0]] = values[n.inputs[0]];
}

// BatchedDot: one matrix product per batch, into the batch's block of a C-contiguous output.
inline void run_batched_dot(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& a = values[n.inputs[0]];
  const ndarray& c = values[n.inputs[1]];
  if (a.shape(0) != c.shape(0) || a.shape(2) != c.shape(1))
    throw shape_error("batched_dot: shapes " + to_string(a.shape()) + " and " + to_string(c.shape()) +
                      " are not aligned (batches and inner extents must agree)");
  shape_t s;
  s.rank = 3;
  s[0] = a.shape(0);
  s[1] = a.shape(1);
  s[2] = c.shape(2);
  ndarray& out = values[n.outputs[0]];
  if (!take_destination(t, n.outputs[0], out, t.out_type, s)) prepare_output(out, t.out_type, s, t.pool);
  shape_t as = a.shape(), cs = c.shape(), os = s;
  for (shape_t* m : {&as, &cs, &os}) {
    (*m)[0] = (*m)[1];
    (*m)[1] = (*m)[2];
    m->rank = 2;
  }
  auto matrix = [](const ndarray& x, std::int64_t i, const shape_t& ms) {
    std::array<std::int64_t, max_rank> st{};
    st[0] = x.stride(1);
    st[1] = x.stride(2);
    return x.view_at(i * x.stride(0), ms, st);
  };
  for (std::int64_t i = 0; i < s[0]; ++i) {
    ndarray block = matrix(out, i, os);
    if (a.shape(2) == 0) {  // no terms: zeros
      if (block.nbytes()) std::memset(block.data(), 0, block.nbytes());
      continue;
    }
    cpu::run_dot22(matrix(a, i, as), matrix(c, i, cs), block);
  }
}

// OnePassGemv (rewrite/one_pass.hpp): u = A x, the Composite's outputs from u and its other
// inputs, then the product beta y0 + alpha Aᵀ g. One pass over A where A is large and laid
// out by rows and the Composite's inputs are one value or one per row; else the three steps
// one after the other, as the nodes it replaced (which also gives their errors).
struct one_pass_rows {
  const cpu::compiled_program* cp;
  int pass_u;
  const std::byte* base[limits::max_registers];
  bool scalar[limits::max_registers];
  std::byte* out_base[limits::max_outputs];
  static void run(void* ctx, std::int64_t r0, std::int64_t n, const void* u) {
    const one_pass_rows& c = *static_cast<const one_pass_rows*>(ctx);
    const cpu::compiled_program& cp = *c.cp;
    const std::byte* in[limits::max_registers];
    std::byte* out[limits::max_outputs];
    for (int r = 0; r < cp.prog->n_inputs; ++r)
      in[r] = r == c.pass_u ? static_cast<const std::byte*>(u)
              : c.scalar[r] ? c.base[r]
                            : c.base[r] + r0 * cp.in_bytes[static_cast<std::size_t>(r)];
    for (std::size_t o = 0; o < cp.prog->outputs.size(); ++o) out[o] = c.out_base[o] + r0 * cp.out_bytes[o];
    cpu::detail::run_span(cp, in, c.scalar, out, n);
  }
};

// A block's g by the program of g alone (a typed tree's kernel, or cxx's loop): rows
// [r0, r0 + n), u's n values kept at u + r0.
struct one_pass_block_g {
  const cpu::compiled_program* g_prog;
  const one_pass_rows* rows;  // the inputs' bases and which are one value
  std::int64_t bytes;         // of an element
  std::byte* u;
  std::byte* g;
  static void run(void* ctx, std::int64_t r0, std::int64_t n, const void* ub) {
    const one_pass_block_g& c = *static_cast<const one_pass_block_g*>(ctx);
    const one_pass_rows& rw = *c.rows;
    std::byte* const uk = c.u + r0 * c.bytes;
    std::memcpy(uk, ub, static_cast<std::size_t>(n * c.bytes));
    const std::byte* in[limits::max_registers];
    for (int r = 0; r < rw.cp->prog->n_inputs; ++r)
      in[r] = r == rw.pass_u ? uk : rw.scalar[r] ? rw.base[r] : rw.base[r] + r0 * c.bytes;
    std::byte* out[1] = {c.g + r0 * c.bytes};
    cpu::detail::run_span(*c.g_prog, in, rw.scalar, out, n);
  }
};

inline shape_t vector_shape(std::int64_t n) {
  shape_t s;
  s.rank = 1;
  s[0] = n;
  return s;
}

// `allowed`: false for the reference thunk (DebugMode, linker=py), which runs the three steps.
inline void one_pass_gemv_node(const thunk& t, ndarray* values, bool allowed) {
  const apply_node& n = *t.node;
  const op& o = *n.fn;
  const program& p = *t.prog.prog;
  const ndarray& a = values[n.inputs[0]];
  const ndarray& x = values[n.inputs[1]];
  const ndarray* y0 = o.accumulate ? &values[n.inputs[2]] : nullptr;
  const std::size_t first = o.accumulate ? 3 : 2;  // the Composite's inputs other than u
  const dtype type = a.type();
  const std::int64_t m = a.shape(0), k = a.shape(1);
  // The Composite's inputs, u's place filled below; their broadcast patterns (u's is none).
  const ndarray* ins[limits::max_registers];
  std::uint8_t bcast[limits::max_registers];
  for (int r = 0, j = 0; r < p.n_inputs; ++r) {
    if (r == o.pass_u) {
      bcast[r] = 0;
      continue;
    }
    ins[r] = &values[n.inputs[first + static_cast<std::size_t>(j)]];
    bcast[r] = t.slot_bcast[first + static_cast<std::size_t>(j++)];
  }
  bool one_pass = allowed && (type == dtype::float32 || type == dtype::float64) && m > 0 && k > 0 && a.stride(1) == 1 &&
                  a.stride(0) >= k && x.type() == type && x.shape(0) == k && x.is_c_contiguous() &&
                  (!y0 || (y0->type() == type && y0->shape(0) == k && y0->is_c_contiguous()));
  for (int r = 0; r < p.n_inputs && one_pass; ++r) {
    if (r == o.pass_u) continue;
    const ndarray& v = *ins[r];
    one_pass = v.rank() == 1 && (bcast[r] ? v.shape(0) == 1 : v.shape(0) == m && v.stride(0) == 1);
  }
  // A matrix the caches keep: by blocks of rows where g has a compiled kernel (typed or cxx's;
  // the program's one-value inputs are the node's broadcast ones, as both were bound for), else
  // the steps.
  const bool resident = static_cast<std::int64_t>(a.nbytes()) < cpu::one_pass_min_bytes();
  const bool blocks = one_pass && resident && t.block_g && (t.block_g->jit[0] || t.block_g->typed);
  one_pass = one_pass && (!resident || blocks);
  thread_local ndarray u;  // A x, when the steps run one after the other or by blocks
  if (!one_pass) {
    prepare_output(u, type, vector_shape(m));
    if (t.naive_products) naive::gemv(a, false, x, u, 1.0, nullptr, 1.0);
    else cpu::run_gemv(a, false, x, u, 1.0, false, t.par);
  }
  ins[o.pass_u] = &u;
  const shape_t shape = one_pass ? vector_shape(m) : cpu::broadcast_shape(ins, bcast, p.n_inputs);
  ndarray* outs[limits::max_outputs];
  for (std::size_t j = 0; j + 1 < n.outputs.size(); ++j) {
    ndarray& out = values[n.outputs[j]];
    const dtype ot = p.reg_types[static_cast<std::size_t>(p.outputs[j])];
    if (!take_destination(t, n.outputs[j], out, ot, shape)) prepare_output(out, ot, shape, t.pool);
    outs[j] = &out;
  }
  ndarray& y = values[n.outputs.back()];
  if (!one_pass) {
    cpu::run_program(t.prog, ins, outs, t.par);
    const ndarray& g = *outs[o.pass_g];
    if (!y0) {
      prepare_output(y, g.type(), vector_shape(k), t.pool);
      if (t.naive_products) naive::gemv(a, true, g, y, o.alpha, nullptr, 1.0);
      else cpu::run_gemv(a, true, g, y, o.alpha, false, t.par);
      return;
    }
    if (y0->rank() != 1 || y0->shape(0) != k)
      throw shape_error("OnePassGemv: the accumulated vector has shape " + to_string(y0->shape()) +
                        " but the product has " + std::to_string(k) + " rows");
    gemv_beside(t, y, *y0, a, true, g, o.alpha, o.beta);
    return;
  }
  if (!take_destination(t, n.outputs.back(), y, type, vector_shape(k))) prepare_output(y, type, vector_shape(k), t.pool);
  one_pass_rows rows{&t.prog, o.pass_u, {}, {}, {}};
  for (int r = 0; r < p.n_inputs; ++r) {
    if (r == o.pass_u) continue;
    rows.base[r] = ins[r]->data();
    rows.scalar[r] = bcast[r] != 0;
  }
  for (std::size_t j = 0; j + 1 < n.outputs.size(); ++j) rows.out_base[j] = outs[j]->data();
  const int threads = m * k >= t.par.product_minsize ? t.par.threads : 1;
  if (!blocks) {
    const cpu::detail::one_pass_rows_fn fn{&one_pass_rows::run, &rows};
    cpu::kernels_of(type).one_pass(a, x, fn, *outs[o.pass_g], o.alpha, y0, o.beta, y, threads);
    return;
  }
  // Each block's g by the compiled program of g alone (inlined where a typed tree's blocks are
  // bound for these one-value inputs), u kept for the whole program after.
  prepare_output(u, type, vector_shape(m));
  const cpu::compiled_program& bgp = *t.block_g;
  std::uint64_t one_value = 0;
  for (int r = 0; r < p.n_inputs; ++r) one_value |= static_cast<std::uint64_t>(rows.scalar[r]) << r;
  if (bgp.typed_blocks && one_value == bgp.typed_scalar_bits) {
    bgp.typed_blocks(a, x, rows.base, o.pass_u, bgp.blocks_map.data(), u.data(), outs[o.pass_g]->data(),
                     o.alpha, y0, o.beta, y, threads, bgp.typed_faulty);
  } else {
    one_pass_block_g bg{&bgp, &rows, static_cast<std::int64_t>(dtype_size(type)), u.data(), outs[o.pass_g]->data()};
    const cpu::detail::one_pass_rows_fn fn{&one_pass_block_g::run, &bg};
    cpu::kernels_of(type).one_pass_blocks(a, x, fn, *outs[o.pass_g], o.alpha, y0, o.beta, y, threads);
  }
  if (p.outputs.size() == 1) return;
  // The other outputs over all rows; g as the blocks computed it (the whole program's loop
  // may contract another multiply-add), so the program's g goes to scratch.
  thread_local ndarray g_scratch;
  prepare_output(g_scratch, type, vector_shape(m));
  rows.out_base[o.pass_g] = g_scratch.data();
  one_pass_rows::run(&rows, 0, m, u.data());
}

inline void run_one_pass_gemv(const thunk& t, ndarray* values) { one_pass_gemv_node(t, values, true); }
inline void run_one_pass_steps(const thunk& t, ndarray* values) { one_pass_gemv_node(t, values, false); }

}  // namespace xsym::detail

#endif
