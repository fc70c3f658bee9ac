#ifndef XSYM_CONFIG_LIMITS_HPP
#define XSYM_CONFIG_LIMITS_HPP

// The sizes a fused elementwise program may reach, shared by the fusion rewrites, both
// backends' executors and the JIT (their fixed-size arrays are sized from these).
#include <cstddef>

namespace xsym::limits {

/// Registers of one program: its inputs, then one per instruction. Executors keep fixed
/// arrays of this many pointers, so a node may also have at most this many inputs.
inline constexpr std::size_t max_registers = 64;

/// What fusion may fill: it leaves room for the registers the executor adds when it shares
/// exp(-|u|) between sigmoids and softpluses (up to three; it skips sharing that does not fit).
inline constexpr std::size_t shared_work_registers = 4;
inline constexpr std::size_t max_fusion_registers = max_registers - shared_work_registers;

/// Outputs of one fused node (multi-output fusion stops merging at this many).
inline constexpr std::size_t max_outputs = 8;

}  // namespace xsym::limits

#endif
