#ifndef XSYM_XSYM_HPP
#define XSYM_XSYM_HPP

/// @file
/// @brief The one header users include: symbolic tensors, function(), the profiler, config.

#include "version.hpp"
#include "config/config.hpp"
#include "expr/var.hpp"
#include "expr/functions.hpp"
#include "graph/fgraph.hpp"
#include "grad/grad.hpp"
#include "compile/function.hpp"
#include "profile/report.hpp"
#include "profile/registry.hpp"
#include "profile/scope.hpp"
#include "profile/export.hpp"

#endif
