#ifndef XSYM_BACKEND_GPU_BACKEND_HPP
#define XSYM_BACKEND_GPU_BACKEND_HPP

// The GPU backend's thunks and the hooks that plug it into the runtime. Included by
// <xsym/gpu.hpp> only: a program built without it has no Thrust dependency at all.
#include <algorithm>
#include <limits>
#include <vector>

#include "../../exec/buffers.hpp"
#include "../../exec/cpu_nodes.hpp"
#include "../../exec/nodes.hpp"
#include "../../exec/shapes.hpp"
#include "../../exec/thunk.hpp"
#include "../../rewrite/multi_fusion.hpp"
#include "kernels.hpp"
#include "typed_kernel.hpp"

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace xsym::gpu {

namespace detail {
using xsym::detail::thunk;

// The node's program in device memory, uploaded once when the function is built.
struct elemwise_state {
  std::shared_ptr<std::byte> code;
};

// A device array's elements in C order into `host` (allocated, C-contiguous).
inline void copy_to_host(const ndarray& a, ndarray& host) {
  ndarray src = a;
  if (!a.is_c_contiguous()) {
    src = ndarray::empty_on_device(a.type(), a.shape());
    gather(a, src);
  }
  cuda::detail::copy_bytes(host.data(), src.data(), src.nbytes(), cuda::detail::direction::to_host);
}

inline ndarray to_host(const ndarray& a) {
  if (!a.on_device()) return a;
  ndarray h = ndarray::empty(a.type(), a.shape());
  copy_to_host(a, h);
  return h;
}

inline ndarray to_device(const ndarray& a) {
  if (a.on_device()) return a;
  const ndarray c = a.contiguous();
  ndarray d = ndarray::empty_on_device(c.type(), c.shape());
  cuda::detail::copy_bytes(d.data(), c.data(), d.nbytes(), cuda::detail::direction::to_device);
  return d;
}

inline ndarray copy_on_device(const ndarray& a) {
  ndarray d = ndarray::empty_on_device(a.type(), a.shape());
  if (a.is_c_contiguous()) cuda::detail::copy_bytes(d.data(), a.data(), d.nbytes(), cuda::detail::direction::on_device);
  else gather(a, d);
  return d;
}

inline void run_elemwise_node(const thunk& t, ndarray* values) {
  const auto& state = *static_cast<const elemwise_state*>(t.device_state.get());
  xsym::detail::elemwise_node<true>(t, values, [&](const ndarray* const* ins, ndarray* const* outs) {
    run_elemwise(*t.prog.prog, reinterpret_cast<const device_instruction*>(state.code.get()), ins, outs);
  });
}

// A fused node whose text is a typed tree's: the tree's own kernel (typed_kernel.hpp).
inline void run_typed_node(const thunk& t, ndarray* values) {
  const auto& state = *static_cast<const typed_state*>(t.device_state.get());
  xsym::detail::elemwise_node<true>(t, values, [&](const ndarray* const* ins, ndarray* const* outs) {
    state.run(ins, state.map.data(), *outs[0]);
  });
}

inline void run_reduce_node(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  ndarray& out = values[n.outputs[0]];
  xsym::detail::prepare_output(out, t.out_type, xsym::detail::reduce_shape(in, n.fn->axes), t.pool, true);
  run_reduce(*n.fn, in, out);
}

// y = beta * y0 + alpha * op(A) x (y0 optional); every operand on the device, any strides.
template <class T>
void gemv(const ndarray& a, bool transpose, const ndarray& x, const ndarray* y0, ndarray& out, double alpha,
          double beta = 1.0) {
  const std::int64_t rows = transpose ? a.shape(1) : a.shape(0), cols = transpose ? a.shape(0) : a.shape(1);
  if (x.shape(0) != cols)
    throw shape_error("GpuGemv: the matrix has shape " + to_string(a.shape()) + (transpose ? " (transposed)" : "") +
                      " but the vector has shape " + to_string(x.shape()));
  const std::int64_t a_row = transpose ? a.stride(1) : a.stride(0), a_col = transpose ? a.stride(0) : a.stride(1);
  if (rows == 0) return;
#ifdef __CUDACC__
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // cuBLAS takes a positive vector stride and a leading dimension at least the other
    // extent: reversed or broadcast operands, and views whose rows overlap, take the loop below.
    const bool row_major = a_col == 1 && (a_row >= cols || rows == 1);
    const bool col_major = !row_major && a_row == 1 && (a_col >= rows || cols == 1);
    const std::int64_t most = std::numeric_limits<int>::max();
    if ((row_major || col_major) && cols > 0 && x.stride(0) > 0 && x.stride(0) <= most && rows <= most && cols <= most &&
        std::max(a_row, a_col) <= most) {
      // cuBLAS is column-major: a row-major matrix is its transpose there.
      static cublasHandle_t handle = [] {
        cublasHandle_t h;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("xsym: cublasCreate failed");
        return h;
      }();
      if (y0 && y0->data() != out.data()) {
        if (y0->is_c_contiguous()) cuda::detail::copy_bytes(out.data(), y0->data(), out.nbytes(), cuda::detail::direction::on_device);
        else gather(*y0, out);
      }
      const T al = static_cast<T>(alpha), be = static_cast<T>(y0 ? beta : 0);
      const cublasOperation_t op = row_major ? CUBLAS_OP_T : CUBLAS_OP_N;
      const int m = static_cast<int>(row_major ? cols : rows), n = static_cast<int>(row_major ? rows : cols);
      const int lda = static_cast<int>(row_major ? (rows == 1 ? std::max<std::int64_t>(1, cols) : a_row)
                                                 : (cols == 1 ? std::max<std::int64_t>(1, rows) : a_col));
      cublasStatus_t st;
      if constexpr (std::is_same_v<T, float>)
        st = cublasSgemv(handle, op, m, n, &al, a.data_as<const T>(), lda, x.data_as<const T>(),
                         static_cast<int>(x.stride(0)), &be, out.data_as<T>(), 1);
      else
        st = cublasDgemv(handle, op, m, n, &al, a.data_as<const T>(), lda, x.data_as<const T>(),
                         static_cast<int>(x.stride(0)), &be, out.data_as<T>(), 1);
      if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("xsym: cuBLAS gemv failed");
      return;
    }
  }
#endif
  using Acc = std::conditional_t<std::is_floating_point_v<T>, T, std::int64_t>;
  detail::gemv_functor<T, Acc> f{a.data_as<const T>(), a_row, a_col, cols, x.data_as<const T>(), x.stride(0),
                                 y0 ? y0->data_as<const T>() : nullptr, y0 ? y0->stride(0) : 0, out.data_as<T>(), alpha, beta};
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(rows), f);
}

// out = y0 + alpha * A B (y0 optional), out C-contiguous.
template <class T>
void gemm(const ndarray& a, const ndarray& b, const ndarray* y0, ndarray& out, double alpha) {
  if (a.shape(1) != b.shape(0))
    throw shape_error("GpuDot22: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) + " are not aligned");
  using Acc = std::conditional_t<std::is_floating_point_v<T>, T, std::int64_t>;
  detail::gemm_functor<T, Acc> f{a.data_as<const T>(), a.stride(0), a.stride(1), b.data_as<const T>(), b.stride(0),
                                 b.stride(1), y0 ? y0->data_as<const T>() : nullptr, y0 ? y0->stride(0) : 0,
                                 y0 ? y0->stride(1) : 0, out.data_as<T>(), out.shape(1), a.shape(1), alpha};
  thrust::for_each(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                   thrust::counting_iterator<std::int64_t>(out.size()), f);
}

template <class T>
void vector_dot(const ndarray& a, const ndarray& b, ndarray& out) {
  if (a.shape(0) != b.shape(0))
    throw shape_error("GpuDot: vectors of shapes " + to_string(a.shape()) + " and " + to_string(b.shape()));
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
#ifdef __CUDACC__
  detail::device_reduce(thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                        detail::dot_element<T, Acc>{a.data_as<const T>(), a.stride(0),
                                                                                    b.data_as<const T>(), b.stride(0)}),
                        a.shape(0), Acc(0), thrust::plus<Acc>(), detail::dot_finalize<T, Acc>{out.data_as<T>()});
#else
  const Acc s = thrust::transform_reduce(XSYM_GPU_POLICY, thrust::counting_iterator<std::int64_t>(0),
                                         thrust::counting_iterator<std::int64_t>(a.shape(0)),
                                         detail::dot_element<T, Acc>{a.data_as<const T>(), a.stride(0),
                                                                     b.data_as<const T>(), b.stride(0)},
                                         Acc(0), thrust::plus<Acc>());
  const T v = static_cast<T>(s);
  cuda::detail::copy_bytes(out.data(), &v, sizeof(T), cuda::detail::direction::to_device);
#endif
}

inline void run_dot_node(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const op& o = *n.fn;
  ndarray& out = values[n.outputs[0]];
  auto typed = [&](dtype type, auto&& f) {
    switch (type) {
      case dtype::float32: f(float{}); break;
      case dtype::float64: f(double{}); break;
      case dtype::int32: f(std::int32_t{}); break;
      case dtype::int64: f(std::int64_t{}); break;
      default: throw std::invalid_argument("xsym: GPU products of bool arrays are not supported");
    }
  };
  if (o.accumulate) {
    // out = beta * y0 + alpha * A x, or y0 + alpha * A B, in y0's buffer when it dies here.
    ndarray& y0_slot = values[n.inputs[0]];
    const bool in_place =
        o.is_inplace() && y0_slot.is_c_contiguous() && y0_slot.owner() && y0_slot.owner().use_count() == 1;
    const ndarray y0 = y0_slot;  // the same buffer as out when in place: each element is read, then written
    const ndarray& a = values[n.inputs[1]];
    const ndarray& b = values[n.inputs[2]];
    xsym::detail::check_accumulated(o, y0, a, b, "Gpu");
    if (in_place) {
      out = std::move(y0_slot);
    } else {
      xsym::detail::prepare_output(out, y0.type(), y0.shape(), t.pool, true);
    }
    if (o.kind == op_kind::gemv)
      typed(y0.type(), [&](auto z) { gemv<decltype(z)>(a, o.transpose_a, b, &y0, out, o.alpha, o.beta); });
    else
      typed(y0.type(), [&](auto z) { gemm<decltype(z)>(a, b, &y0, out, o.alpha); });
    return;
  }
  const ndarray& a = values[n.inputs[0]];
  const ndarray& b = values[n.inputs[1]];
  xsym::detail::prepare_output(out, a.type(), xsym::detail::product_shape(o, a, b), t.pool, true);
  const bool tr = o.kind == op_kind::gemv && o.transpose_a;
  if (o.kind == op_kind::gemv || (a.rank() == 2 && b.rank() == 1))
    typed(a.type(), [&](auto z) { gemv<decltype(z)>(a, tr, b, nullptr, out, 1.0); });
  else if (a.rank() == 1 && b.rank() == 1)
    typed(a.type(), [&](auto z) { vector_dot<decltype(z)>(a, b, out); });
  else if (a.rank() == 1 && b.rank() == 2)
    typed(a.type(), [&](auto z) { gemv<decltype(z)>(b, true, a, nullptr, out, 1.0); });
  else
    typed(a.type(), [&](auto z) { gemm<decltype(z)>(a, b, nullptr, out, 1.0); });
}

inline void run_shape_node(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  std::int64_t count = 1;
  for (int a : n.fn->axes) count *= in.shape(a);
  ndarray& out = values[n.outputs[0]];
  xsym::detail::prepare_output(out, t.out_type, shape_t{}, t.pool, true);
  xsym::detail::visit_dtype(out.type(), [&](auto z) {
    const auto v = static_cast<decltype(z)>(count);
    cuda::detail::copy_bytes(out.data(), &v, sizeof v, cuda::detail::direction::to_device);
  });
}

// GpuFromHost: a contiguous host array into a device buffer kept between calls.
inline void run_to_device(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray in = values[n.inputs[0]].contiguous();
  ndarray& out = values[n.outputs[0]];
  xsym::detail::prepare_output(out, in.type(), in.shape(), t.pool, true);
  cuda::detail::copy_bytes(out.data(), in.data(), in.nbytes(), cuda::detail::direction::to_device);
}

// HostFromGpu: the result back in host memory (waits for the device).
inline void run_to_host(const thunk& t, ndarray* values) {
  const apply_node& n = *t.node;
  const ndarray& in = values[n.inputs[0]];
  ndarray& out = values[n.outputs[0]];
  xsym::detail::prepare_output(out, in.type(), in.shape(), t.pool, false);
  copy_to_host(in, out);
}

inline void bind(thunk& t, const function_graph& g, const apply_node& n) {
  switch (n.fn->kind) {
    case op_kind::elemwise:
    case op_kind::composite: {
      auto prog = xsym::detail::node_program(g, n);
      if (auto typed = find_typed_kernel(*prog)) {
        t.device_state = std::move(typed);
        t.device_typed = true;
        t.prog.prog = std::move(prog);
        t.run = &run_typed_node;
        break;
      }
      std::vector<device_instruction> code;
      for (const auto& ins : prog->code)
        code.push_back({static_cast<std::uint8_t>(ins.op), static_cast<std::uint8_t>(ins.in_type),
                        static_cast<std::uint8_t>(ins.out_type), static_cast<std::uint8_t>(info(ins.op).arity),
                        ins.args[0], ins.args[1], ins.args[2], ins.dst});
      auto state = std::make_shared<elemwise_state>();
      const std::size_t bytes = code.size() * sizeof(device_instruction);
      state->code = cuda::detail::allocate(bytes);
      cuda::detail::copy_bytes(state->code.get(), code.data(), bytes, cuda::detail::direction::to_device);
      t.device_state = std::move(state);
      t.prog.prog = std::move(prog);
      t.run = &run_elemwise_node;
      break;
    }
    case op_kind::dimshuffle: t.run = &xsym::detail::run_dimshuffle; break;  // a view: no data moves
    case op_kind::reduce: t.run = &run_reduce_node; break;
    case op_kind::dot:
    case op_kind::gemv:
    case op_kind::dot22: t.run = &run_dot_node; break;
    case op_kind::shape_prod: t.run = &run_shape_node; break;
    case op_kind::transfer: t.run = n.fn->to_device ? &run_to_device : &run_to_host; break;
    // Views: the same arithmetic on a device pointer (a reshape of a strided array copies on the device).
    case op_kind::subtensor: t.run = &xsym::detail::run_subtensor; break;
    case op_kind::reshape: t.run = &xsym::detail::run_reshape; break;
    case op_kind::join_part: t.run = &xsym::detail::run_join_part; break;
    case op_kind::one_pass_gemv:  // one_pass_gemv does not run with device=cuda
    default:  // gpu_placement keeps the ops without a device kernel on the CPU (runs_on_host)
      throw std::logic_error("xsym: " + n.fn->name() + " has no GPU kernel");
  }
}

#ifdef __CUDACC__
// Per-node device times from CUDA events, and an NVTX range per Apply node for Nsight Systems.
class cuda_event_timer final : public xsym::detail::device_timer {
 public:
  explicit cuda_event_timer(const function_graph& g) : m_graph(&g), m_events(2 * g.nodes.size()) {
    for (auto& e : m_events) cuda::detail::check(cudaEventCreate(&e), "cudaEventCreate");
    for (const auto& n : g.nodes) m_names.push_back(g.node_text(n));
  }
  ~cuda_event_timer() override {
    for (auto& e : m_events) cudaEventDestroy(e);
  }
  void node_begin(std::size_t i) override {
    nvtxRangePushA(m_names[i].c_str());
    cudaEventRecord(m_events[2 * i]);
  }
  void node_end(std::size_t i) override {
    cudaEventRecord(m_events[2 * i + 1]);
    nvtxRangePop();
  }
  void collect(std::uint64_t* node_ticks) override {
    cuda::detail::check(cudaEventSynchronize(m_events.back()), "cudaEventSynchronize");
    for (std::size_t i = 0; i < m_graph->nodes.size(); ++i) {
      const op& o = *m_graph->nodes[i].fn;
      if (!o.on_gpu) continue;  // transfers: the host timer already waited for them
      float ms = 0;
      cudaEventElapsedTime(&ms, m_events[2 * i], m_events[2 * i + 1]);
      node_ticks[i] = static_cast<std::uint64_t>(ms * 1e-3 / xsym::detail::seconds_per_tick());
    }
  }

 private:
  const function_graph* m_graph;
  std::vector<cudaEvent_t> m_events;
  std::vector<std::string> m_names;
};
#endif

inline bool install() {
  auto& h = xsym::detail::device_hooks();
  h.allocate = &cuda::detail::allocate;
  h.to_host = &to_host;
  h.to_device = &to_device;
  h.copy_on_device = &copy_on_device;
  h.allocated = XSYM_COMPUTE_GPU_MEM_USED ? &cuda::detail::read_counters : nullptr;
  h.thread_allocated = XSYM_COMPUTE_GPU_MEM_USED ? &cuda::detail::thread_counters_ref : nullptr;
#ifdef __CUDACC__
  h.implementation = "cuda";
  xsym::detail::gpu_runtime().make_timer = [](const function_graph& g) -> std::unique_ptr<xsym::detail::device_timer> {
    return std::make_unique<cuda_event_timer>(g);
  };
#else
  h.implementation = "thrust-omp";
#endif
  xsym::detail::gpu_runtime().bind = &bind;
  return true;
}
}  // namespace detail

/// Set when the program is loaded: including <xsym/gpu.hpp> is what makes device=cuda available.
inline const bool backend_installed = detail::install();

}  // namespace xsym::gpu

#endif
