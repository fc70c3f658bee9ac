#ifndef XSYM_EXPR_NDARRAY_HPP
#define XSYM_EXPR_NDARRAY_HPP

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"

namespace xsym {

/// @brief Largest rank a runtime value may have (dimshuffle can add broadcast axes).
inline constexpr int max_rank = 8;

/// @brief Raised when array shapes do not fit an operation (at call time).
class shape_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// @brief Raised when an index is out of range (at call time): take, add_at.
class index_error : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

/// @brief Raised when an Assert node's condition is false at call time (its message says which).
class assertion_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief Bytes the library holds in array buffers, now and at most (process-wide).
struct memory_counters {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocations = 0;
};

namespace detail {
struct memory_state {
  std::atomic<std::int64_t> current{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> allocations{0};
};
inline memory_state& memory() {
  static memory_state s;
  return s;
}
// The bytes a thread's allocations hold, whichever thread frees them, and their peak: what a
// profiled call measures, so that other threads' calls neither show up in it nor reset it.
// A buffer from before the measured call that is freed during it (by another thread, a
// callback, a value moved to the device) is counted back in `earlier`: the call's peak is of
// its own buffers, as the simulated peak is.
struct thread_memory_state {
  std::atomic<std::int64_t> current{0};
  std::atomic<std::int64_t> earlier{0};  // bytes from before the measured call, freed during it
  std::atomic<std::uint64_t> call{0};    // the measured call's number; older buffers have a smaller one
  std::int64_t peak = 0;                 // written and read by the owning thread only
  int depth = 0;                         // measured calls running on the owning thread
};
inline const std::shared_ptr<thread_memory_state>& thread_memory() {
  thread_local const auto s = std::make_shared<thread_memory_state>();
  return s;
}

// One buffer's bytes in the process's and its allocating thread's counters (host or device
// alike); release() takes them out of both, whichever thread frees the buffer.
struct counted_bytes {
  memory_state* process;
  std::shared_ptr<thread_memory_state> thread;
  std::int64_t bytes;
  std::uint64_t call;  // the thread's measured call when the buffer was made
  void release() const {
    process->current.fetch_sub(bytes);
    thread->current.fetch_sub(bytes);
    if (call < thread->call.load(std::memory_order_relaxed)) thread->earlier.fetch_add(bytes);
  }
};
inline counted_bytes count_bytes(memory_state& process, const std::shared_ptr<thread_memory_state>& thread, std::int64_t bytes) {
  const auto now = process.current.fetch_add(bytes) + bytes;
  process.allocations.fetch_add(1, std::memory_order_relaxed);
  auto prev = process.peak.load(std::memory_order_relaxed);
  while (now > prev && !process.peak.compare_exchange_weak(prev, now)) {
  }
  const std::int64_t mine = thread->current.fetch_add(bytes) + bytes;
  thread->peak = std::max(thread->peak, mine + thread->earlier.load(std::memory_order_relaxed));
  return {&process, thread, bytes, thread->call.load(std::memory_order_relaxed)};
}

// The peak of one thread's allocations during a call (host or device counters; none: 0). A
// call inside the measured one (a reference run) leaves the outer peak as it was, and so does
// a call that throws (the destructor): the thread's peak never goes down. The outermost call
// starts a new number, so that what was allocated before it counts as earlier when freed.
class call_peak {
 public:
  explicit call_peak(thread_memory_state* s) : m_s(s) {
    if (!m_s) return;
    if (m_s->depth++ == 0) {
      m_s->call.fetch_add(1, std::memory_order_relaxed);
      m_s->earlier.store(0, std::memory_order_relaxed);
    }
    m_start = m_s->current.load() + m_s->earlier.load(std::memory_order_relaxed);
    m_outer = std::exchange(m_s->peak, m_start);
  }
  call_peak(const call_peak&) = delete;
  call_peak& operator=(const call_peak&) = delete;
  ~call_peak() { restore(); }
  std::int64_t finish() {
    if (!m_s) return 0;
    const std::int64_t p = m_s->peak - m_start;
    restore();
    return p;
  }

 private:
  void restore() {
    if (!m_s) return;
    m_s->peak = std::max(m_s->peak, m_outer);
    --m_s->depth;
    m_s = nullptr;
  }
  thread_memory_state* m_s;
  std::int64_t m_start = 0, m_outer = 0;
};

// Every array buffer the library makes comes from here, so the profiler can report
// measured (not only simulated) memory and tests can prove a call allocates nothing.
inline std::shared_ptr<std::byte> allocate_bytes(std::size_t bytes) {
  constexpr std::size_t align = 64;
  const std::size_t padded = std::max<std::size_t>(align, (bytes + align - 1) / align * align);
  auto* p = static_cast<std::byte*>(::operator new(padded, std::align_val_t{align}));
  return std::shared_ptr<std::byte>(p, [c = count_bytes(memory(), thread_memory(), static_cast<std::int64_t>(padded))](std::byte* q) {
    c.release();
    ::operator delete(q, std::align_val_t{align});
  });
}
}  // namespace detail

namespace detail {
// Whether p is a buffer's only owner, with every access of its earlier owners (other threads
// that read a shared variable's value) ordered before the caller's writes. use_count() is a
// relaxed load, which orders nothing; copying p is an acquire-release increment of the count,
// which reads the last owner's release and so synchronizes with it.
inline bool sole_owner_after_others(const std::shared_ptr<std::byte>& p) {
  if (!p || p.use_count() != 1) return false;
  [[maybe_unused]] const std::shared_ptr<std::byte> synchronize = p;
  return true;
}
}  // namespace detail

/// @brief Current, peak and count of the library's array allocations.
inline memory_counters allocated() {
  auto& m = detail::memory();
  return {m.current.load(), m.peak.load(), m.allocations.load()};
}

/// @brief Resets the peak to the current value (to measure one region).
inline void reset_peak_memory() {
  auto& m = detail::memory();
  m.peak.store(m.current.load());
}

/// @brief The bytes this thread's allocations hold now (whoever frees them), and their most
/// since the thread began; allocations is 0.
inline memory_counters allocated_by_this_thread() {
  const auto& t = *detail::thread_memory();
  return {t.current.load(), t.peak, 0};
}

/// @brief A shape: up to max_rank extents.
struct shape_t {
  std::array<std::int64_t, max_rank> dims{};
  int rank = 0;

  std::int64_t operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t size() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[static_cast<std::size_t>(i)];
    return n;
  }
  friend bool operator==(const shape_t& a, const shape_t& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)  // a loop, not std::equal: that becomes a memcmp call
      if (a.dims[static_cast<std::size_t>(i)] != b.dims[static_cast<std::size_t>(i)]) return false;
    return true;
  }
};

/// @brief "(400, 784)", as numpy prints shapes.
inline std::string to_string(const shape_t& s) {
  std::ostringstream os;
  os << '(';
  for (int i = 0; i < s.rank; ++i) os << (i ? ", " : "") << s[i];
  if (s.rank == 1) os << ',';
  os << ')';
  return os.str();
}

/// @brief A runtime array value: dtype, shape, strides (in elements) and a shared buffer.
///
/// Views share the buffer; arrays passed in by the user are wrapped without a copy.
class ndarray {
 public:
  ndarray() = default;

  /// @brief A new C-contiguous array, uninitialised.
  static ndarray empty(dtype dt, const shape_t& shape) {
    ndarray a;
    a.m_dtype = dt;
    a.m_shape = shape;
    a.set_c_strides();
    const auto bytes = static_cast<std::size_t>(shape.size()) * dtype_size(dt);
    a.m_owner = detail::allocate_bytes(bytes);
    a.m_data = a.m_owner.get();
    a.m_capacity = bytes;
    return a;
  }

  /// @brief A new C-contiguous array in device memory (needs the GPU backend), uninitialised.
  static ndarray empty_on_device(dtype dt, const shape_t& shape);

  /// @brief A C-contiguous array in an existing buffer of `capacity` bytes (buffer reuse).
  static ndarray in_buffer(dtype dt, const shape_t& shape, std::shared_ptr<std::byte> owner, std::size_t capacity,
                           bool on_device = false) {
    ndarray a;
    a.m_dtype = dt;
    a.m_shape = shape;
    a.set_c_strides();
    a.m_owner = std::move(owner);
    a.m_data = a.m_owner.get();
    a.m_capacity = capacity;
    a.m_on_device = on_device;
    return a;
  }

  /// @brief Wraps memory the caller keeps alive (no copy, no ownership).
  static ndarray wrap(dtype dt, const shape_t& shape, const std::int64_t* strides, void* data) {
    ndarray a;
    a.m_dtype = dt;
    a.m_shape = shape;
    for (int i = 0; i < shape.rank; ++i) a.m_strides[static_cast<std::size_t>(i)] = strides[i];
    a.m_data = static_cast<std::byte*>(data);
    return a;
  }

  dtype type() const { return m_dtype; }
  int rank() const { return m_shape.rank; }
  const shape_t& shape() const { return m_shape; }
  std::int64_t shape(int i) const { return m_shape[i]; }
  std::int64_t stride(int i) const { return m_strides[static_cast<std::size_t>(i)]; }
  const std::array<std::int64_t, max_rank>& strides() const { return m_strides; }
  std::int64_t size() const { return m_shape.size(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(size()) * dtype_size(m_dtype); }
  bool has_value() const { return m_data != nullptr; }
  std::byte* data() const { return m_data; }
  template <class T> T* data_as() const { return reinterpret_cast<T*>(m_data); }
  const std::shared_ptr<std::byte>& owner() const { return m_owner; }
  std::size_t capacity() const { return m_capacity; }
  /// @brief True when the buffer is in GPU memory: host code must not read it.
  bool on_device() const { return m_on_device; }

  bool is_c_contiguous() const {
    std::int64_t expected = 1;
    for (int i = m_shape.rank - 1; i >= 0; --i) {
      if (m_shape[i] != 1 && m_strides[static_cast<std::size_t>(i)] != expected) return false;
      expected *= m_shape[i];
    }
    return true;
  }

  /// @brief A view of the same buffer with another shape and strides.
  ndarray view(const shape_t& shape, const std::array<std::int64_t, max_rank>& strides) const {
    ndarray a = *this;
    a.m_shape = shape;
    a.m_strides = strides;
    return a;
  }

  /// @brief A view of the same buffer starting `offset` elements further (a slice).
  ndarray view_at(std::int64_t offset, const shape_t& shape, const std::array<std::int64_t, max_rank>& strides) const {
    ndarray a = view(shape, strides);
    if (shape.size() > 0) a.m_data = m_data + offset * static_cast<std::int64_t>(dtype_size(m_dtype));
    return a;
  }

  /// @brief A C-contiguous copy (or this array when it already is one).
  ndarray contiguous() const;

  /// @brief A C-contiguous copy into `dst`, reusing dst's buffer when it is large enough and unshared.
  void copy_contiguous_into(ndarray& dst) const;

  /// @brief Element i of a C-order traversal, converted to double (tests and printing).
  double flat_as_double(std::int64_t i) const;

  void set_c_strides() {
    std::int64_t s = 1;
    for (int i = m_shape.rank - 1; i >= 0; --i) {
      m_strides[static_cast<std::size_t>(i)] = s;
      s *= m_shape[i];
    }
  }
  /// @brief Drops the buffer: no value (has_value() is false, the shape is rank 0).
  void release() {
    if (m_owner) m_owner.reset();  // a wrapped array has none: no store to the pointer pair
    m_data = nullptr;
    m_capacity = 0;
    m_dtype = dtype::float64;
    m_shape.rank = 0;
    m_on_device = false;
  }

  /// @brief Moves the buffer out and leaves no value, as release does, with one reference-count
  /// update fewer than copying owner() and then releasing.
  std::shared_ptr<std::byte> take_owner() {
    std::shared_ptr<std::byte> owner = std::move(m_owner);
    release();
    return owner;
  }

  /// @brief Makes this array a C-contiguous value of dtype dt and this shape in the buffer it
  /// already owns (buffer reuse without touching the reference count). The caller checked
  /// that the buffer is ours alone and holds shape.size() elements of dt.
  void reuse_buffer(dtype dt, const shape_t& shape) {
    m_dtype = dt;
    // Element by element: a shape just written by the caller is read back without a stall.
    m_shape.rank = shape.rank;
    for (int i = 0; i < max_rank; ++i) m_shape[i] = i < shape.rank ? shape[i] : 0;
    set_c_strides();
    m_data = m_owner.get();
  }

  /// @brief Makes this array a view of memory the caller keeps alive (as wrap does), in place,
  /// from an xtensor-style shape and strides (rank shape.size() <= max_rank); a dimension of
  /// extent 1 gets stride 0.
  template <class Shape, class Strides>
  void rewrap(dtype dt, const Shape& shape, const Strides& strides, void* data) {
    if (m_owner) m_owner.reset();
    m_dtype = dt;
    const int r = static_cast<int>(shape.size());
    m_shape.rank = r;
    m_shape.dims = {};  // a few vector stores, then only the rank's extents
    m_strides = {};
    for (int i = 0; i < r; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const auto extent = static_cast<std::int64_t>(shape[u]);
      m_shape.dims[u] = extent;
      m_strides[u] = extent != 1 ? static_cast<std::int64_t>(strides[u]) : 0;
    }
    m_data = static_cast<std::byte*>(data);
    m_capacity = 0;
    m_on_device = false;  // user memory is host memory
  }

 private:
  dtype m_dtype = dtype::float64;
  shape_t m_shape{};
  std::array<std::int64_t, max_rank> m_strides{};
  std::shared_ptr<std::byte> m_owner;
  std::byte* m_data = nullptr;
  std::size_t m_capacity = 0;
  bool m_on_device = false;

  void require_host(const char* what) const {
    if (m_on_device)
      throw std::logic_error(std::string("xsym: internal error: ") + what + " read an array in device memory on the host");
  }
};

namespace detail {
/// What the GPU backend provides to code that does not include it (set when it is linked in).
struct device_functions {
  std::shared_ptr<std::byte> (*allocate)(std::size_t bytes) = nullptr;
  ndarray (*to_host)(const ndarray&) = nullptr;        // a C-contiguous host copy
  ndarray (*to_device)(const ndarray&) = nullptr;      // a C-contiguous device copy of a host array
  ndarray (*copy_on_device)(const ndarray&) = nullptr; // a C-contiguous device copy of a device array
  memory_counters (*allocated)() = nullptr;            // null unless XSYM_COMPUTE_GPU_MEM_USED=1
  thread_memory_state& (*thread_allocated)() = nullptr;  // this thread's device bytes; the same
  const char* implementation = "";                     // "cuda" or "thrust-omp"
};
inline device_functions& device_hooks() {
  static device_functions f;
  return f;
}
inline const device_functions& require_device(const char* what) {
  const auto& h = device_hooks();
  if (!h.allocate)
    throw std::logic_error(std::string("xsym: ") + what +
                           " needs the GPU backend, which this program was built without (include <xsym/gpu.hpp>)");
  return h;
}
/// The array itself when it is in host memory, else a host copy.
inline ndarray on_host(const ndarray& a) { return a.on_device() ? require_device("reading a device array").to_host(a) : a; }
}  // namespace detail

inline ndarray ndarray::empty_on_device(dtype dt, const shape_t& shape) {
  ndarray a;
  a.m_dtype = dt;
  a.m_shape = shape;
  a.set_c_strides();
  const auto bytes = static_cast<std::size_t>(shape.size()) * dtype_size(dt);
  a.m_owner = detail::require_device("a device array").allocate(bytes);
  a.m_data = a.m_owner.get();
  a.m_capacity = bytes;
  a.m_on_device = true;
  return a;
}

namespace detail {
// Calls f(offset) for every element of shape in C order, with offset in elements for strides.
template <class F>
void for_each_offset(const shape_t& shape, const std::array<std::int64_t, max_rank>& strides, F&& f) {
  if (shape.size() == 0) return;
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t off = 0;
  const int r = shape.rank;
  while (true) {
    f(off);
    int d = r - 1;
    for (; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      if (++idx[du] < shape[d]) {
        off += strides[du];
        break;
      }
      off -= strides[du] * (shape[d] - 1);
      idx[du] = 0;
    }
    if (d < 0) return;
  }
}

// Calls f(offset_a, offset_b, n, step_a, step_b) for every row along the last axis of shape,
// in C order: two arrays walked together (a copy, a region updated from a value), offsets and
// steps in elements for strides a and b. A rank-0 shape is one row of one element.
template <class F>
void for_each_row2(const shape_t& shape, const std::array<std::int64_t, max_rank>& a,
                   const std::array<std::int64_t, max_rank>& b, F&& f) {
  if (shape.size() == 0) return;
  std::array<std::int64_t, max_rank> idx{};
  std::int64_t oa = 0, ob = 0;
  const int r = shape.rank;
  const std::int64_t inner = r ? shape[r - 1] : 1;
  const std::int64_t sa = r ? a[static_cast<std::size_t>(r - 1)] : 0, sb = r ? b[static_cast<std::size_t>(r - 1)] : 0;
  while (true) {
    f(oa, ob, inner, sa, sb);
    int d = r - 2;
    for (; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      if (++idx[du] < shape[d]) {
        oa += a[du];
        ob += b[du];
        break;
      }
      oa -= a[du] * (shape[d] - 1);
      ob -= b[du] * (shape[d] - 1);
      idx[du] = 0;
    }
    if (d < 0) return;
  }
}
// A plane of R rows and C columns of N-byte elements, each side at its own steps (elements;
// each element one fixed-size memcpy, which compiles to one load and one store whatever the
// buffer holds). Where one side's fast axis is the rows' (a transpose), tiles of 16 x 16: the
// 16 lines a tile reads are used whole before they leave L1, where a walk along a whole row
// would read one element a line.
template <std::size_t N>
void copy_plane(std::byte* d, std::int64_t d0, std::int64_t d1, const std::byte* s, std::int64_t s0, std::int64_t s1,
                std::int64_t R, std::int64_t C) {
  constexpr auto n = static_cast<std::int64_t>(N);
  if (d1 == 1 && s1 == 1) {
    for (std::int64_t i = 0; i < R; ++i) std::memcpy(d + i * d0 * n, s + i * s0 * n, static_cast<std::size_t>(C) * N);
    return;
  }
  const auto mag = [](std::int64_t v) { return v < 0 ? -v : v; };
  const std::int64_t tile = R < 2 || (mag(s0) >= mag(s1) && mag(d0) >= mag(d1)) ? std::max(R, C) : 16;
  for (std::int64_t i0 = 0; i0 < R; i0 += tile)
    for (std::int64_t j0 = 0; j0 < C; j0 += tile) {
      const std::int64_t ie = std::min(R, i0 + tile), je = std::min(C, j0 + tile);
      for (std::int64_t i = i0; i < ie; ++i)
        for (std::int64_t j = j0; j < je; ++j) std::memcpy(d + (i * d0 + j * d1) * n, s + (i * s0 + j * s1) * n, N);
    }
}

// dst[shape at dst's strides] = src[shape at src's strides], elements of es bytes, in planes of
// the last two axes. dst and src do not overlap.
inline void copy_strided(std::byte* dst, const std::array<std::int64_t, max_rank>& ds, const std::byte* src,
                         const std::array<std::int64_t, max_rank>& ss, const shape_t& shape, std::size_t es) {
  if (shape.size() == 0) return;
  auto sized = [&]<std::size_t N>() {
    const int r = shape.rank;
    if (r <= 1) return copy_plane<N>(dst, 0, r ? ds[0] : 1, src, 0, r ? ss[0] : 1, 1, r ? shape[0] : 1);
    shape_t lead = shape;
    lead.rank = r - 1;
    const auto last = static_cast<std::size_t>(r - 1);
    constexpr auto n = static_cast<std::int64_t>(N);
    for_each_row2(lead, ds, ss, [&](std::int64_t od, std::int64_t os, std::int64_t rows, std::int64_t d0, std::int64_t s0) {
      copy_plane<N>(dst + od * n, d0, ds[last], src + os * n, s0, ss[last], rows, shape[r - 1]);
    });
  };
  switch (es) {
    case 1: return sized.template operator()<1>();
    case 2: return sized.template operator()<2>();
    case 4: return sized.template operator()<4>();
    case 8: return sized.template operator()<8>();
    default:
      for_each_row2(shape, ds, ss, [&](std::int64_t od, std::int64_t os, std::int64_t count, std::int64_t sd, std::int64_t sr) {
        const auto e = static_cast<std::int64_t>(es);
        for (std::int64_t i = 0; i < count; ++i) std::memcpy(dst + (od + i * sd) * e, src + (os + i * sr) * e, es);
      });
  }
}
}  // namespace detail

inline ndarray ndarray::contiguous() const {
  if (is_c_contiguous()) return *this;
  if (m_on_device) return detail::require_device("a device copy").copy_on_device(*this);
  ndarray out = empty(m_dtype, m_shape);
  detail::copy_strided(out.data(), out.m_strides, m_data, m_strides, m_shape, dtype_size(m_dtype));
  return out;
}

inline void ndarray::copy_contiguous_into(ndarray& dst) const {
  require_host("copy_contiguous_into");
  const std::size_t bytes = nbytes();
  if (dst.m_owner && dst.m_owner.use_count() == 1 && dst.m_capacity >= bytes)
    dst = in_buffer(m_dtype, m_shape, dst.m_owner, dst.m_capacity);
  else
    dst = empty(m_dtype, m_shape);
  detail::copy_strided(dst.data(), dst.m_strides, m_data, m_strides, m_shape, dtype_size(m_dtype));
}

inline double ndarray::flat_as_double(std::int64_t i) const {
  require_host("flat_as_double");
  std::int64_t off = 0;
  for (int d = m_shape.rank - 1; d >= 0; --d) {
    off += (i % m_shape[d]) * m_strides[static_cast<std::size_t>(d)];
    i /= m_shape[d];
  }
  return detail::visit_dtype(m_dtype, [&](auto t) { return static_cast<double>(data_as<decltype(t)>()[off]); });
}

namespace detail {
/// Whether two arrays' memory overlaps.
struct byte_range {
  std::intptr_t lo = 0, hi = 0;  // [lo, hi); empty when lo == hi
  bool overlaps(const byte_range& o) const { return lo < o.hi && o.lo < hi; }
};

// The bytes an array's elements span (a negative stride extends lo); empty without elements.
inline byte_range bytes_of(const ndarray& x) {
  if (!x.has_value()) return {};
  std::int64_t down = 0, up = 0;
  for (int d = 0; d < x.rank(); ++d) {
    const std::int64_t n = x.shape(d);
    if (n == 0) return {};
    const std::int64_t span = (n - 1) * x.stride(d);
    (span < 0 ? down : up) += span;
  }
  const auto es = static_cast<std::int64_t>(dtype_size(x.type()));
  const auto base = reinterpret_cast<std::intptr_t>(x.data());
  return {base + down * es, base + (up + 1) * es};
}

// Whether two of the array's elements may be the same memory (a stride 0 over an extent above
// 1, strides that interleave). By increasing |stride|, each dimension steps past the span of
// the ones before unless they meet; the rare layouts that fail that test are checked offset by
// offset up to 2^22 elements (beyond, they count as overlapping).
inline bool overlaps_itself(const ndarray& x) {
  if (!x.has_value()) return false;
  std::int64_t stride[max_rank], extent[max_rank];
  int r = 0;
  for (int d = 0; d < x.rank(); ++d) {
    if (x.shape(d) == 0) return false;
    if (x.shape(d) == 1) continue;
    stride[r] = x.stride(d) < 0 ? -x.stride(d) : x.stride(d);
    extent[r++] = x.shape(d);
  }
  for (int i = 1; i < r; ++i)  // insertion sort by stride
    for (int j = i; j > 0 && stride[j] < stride[j - 1]; --j) {
      std::swap(stride[j], stride[j - 1]);
      std::swap(extent[j], extent[j - 1]);
    }
  std::int64_t span = 0;
  bool apart = true;
  for (int i = 0; i < r && apart; ++i) {
    apart = stride[i] > span;
    span += stride[i] * (extent[i] - 1);
  }
  if (apart) return false;
  if (stride[0] == 0 || x.size() > (std::int64_t{1} << 22)) return true;
  std::vector<std::int64_t> offsets{0};
  for (int i = 0; i < r; ++i) {
    const std::size_t n = offsets.size();
    for (std::int64_t k = 1; k < extent[i]; ++k)
      for (std::size_t j = 0; j < n; ++j) offsets.push_back(offsets[j] + k * stride[i]);
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}
}  // namespace detail

}  // namespace xsym

#endif
