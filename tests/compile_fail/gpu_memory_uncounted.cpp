// expect: xsym::cuda::allocated() needs device memory counting
#include <xsym/backend/gpu/memory.hpp>
int main() {
  auto counters = xsym::cuda::allocated();  // XSYM_COMPUTE_GPU_MEM_USED is off
  (void)counters;
}
