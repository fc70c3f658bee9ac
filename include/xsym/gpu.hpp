#ifndef XSYM_GPU_HPP
#define XSYM_GPU_HPP

/// @file
/// @brief xsym with the GPU backend: include this instead of <xsym/xsym.hpp> to make
/// device=cuda available. Compile with nvcc (CUDA), or with g++ -fopenmp
/// -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP -I<cuda>/include/cccl to run the same
/// kernels on the CPU's threads through Thrust's OpenMP system.

#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM)
#error "xsym/gpu.hpp: compile with nvcc, or define THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP (with -fopenmp and -I<cuda>/include/cccl) to run the GPU backend on the CPU"
#endif

#include "xsym.hpp"
#include "backend/gpu/backend.hpp"

#endif
