#ifndef XSYM_COMPILE_RUNTIME_HPP
#define XSYM_COMPILE_RUNTIME_HPP

// The runtime of a compiled function, job by job (see function_runtime.hpp).
#include "build.hpp"
#include "call.hpp"
#include "debug_modes.hpp"
#include "function_runtime.hpp"
#include "into.hpp"
#include "link.hpp"
#include "pipeline.hpp"
#include "profile_wiring.hpp"
#include "test_values.hpp"

#endif
