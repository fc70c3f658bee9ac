#ifndef XSYM_TESTS_COMPILE_REPLICAS_HPP
#define XSYM_TESTS_COMPILE_REPLICAS_HPP

// A communicator without MPI for the AllReduce node's tests: `size` ranks that all hold this
// process's array, so the reduction is known without them (sum: size x, prod: x^size, max and
// min: x). Each call reports a fixed wait, so the profile's sum of waits can be checked.
#include <cmath>

#include <xsym/xsym.hpp>

namespace xsym_test {

class replicas final : public xsym::communicator {
 public:
  static constexpr std::uint64_t wait_per_call = 1000;  // ticks
  explicit replicas(int size) : m_size(size) {}
  int size() const override { return m_size; }
  int rank() const override { return 0; }
  std::string name() const override { return "replicas"; }
  void allreduce(const xsym::ndarray& in, xsym::ndarray& out, xsym::reduce_op r, std::uint64_t& wait) const override {
    ++calls;
    wait = wait_per_call;
    const xsym::ndarray src = in.contiguous();
    xsym::detail::visit_dtype(in.type(), [&](auto z) {
      using T = decltype(z);
      const T* a = src.data_as<T>();
      T* b = out.data_as<T>();
      for (std::int64_t i = 0; i < src.size(); ++i) {
        if (r == xsym::reduce_op::sum) b[i] = static_cast<T>(a[i] * m_size);
        else if (r == xsym::reduce_op::prod) b[i] = static_cast<T>(std::pow(a[i], m_size));
        else b[i] = a[i];
      }
    });
  }
  mutable int calls = 0;

 private:
  int m_size;
};

}  // namespace xsym_test

#endif
