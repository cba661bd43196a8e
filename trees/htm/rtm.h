// Intel RTM: whether this CPU really has it, and the three instructions. Each
// function that executes one is compiled with the rtm target attribute, so
// the rest of the program needs no -mrtm and runs on CPUs without TSX.
#pragma once

#include "abort_info.h"

#include <cstdint>
#include <string>

namespace memlayout::trees::htm {

// True when RTM can commit here: CPUID leaf 7 reports RTM (EBX bit 11), not
// RTM_ALWAYS_ABORT (EDX bit 11), and a burst of empty transactions commits at
// least once. Otherwise false, with *why saying which test failed. Probed
// once per process.
bool rtm_usable(std::string *why = nullptr);

inline constexpr unsigned kRtmStarted = ~0u; // what rtm_begin returns inside the transaction

// xbegin: kRtmStarted inside the transaction, else the abort status (after
// the hardware rolled the transaction back and jumped here).
unsigned rtm_begin();
void rtm_end();                             // xend
[[noreturn]] void rtm_abort_lock_held();    // xabort kAbortLockHeld
[[noreturn]] void rtm_abort_need_records(); // xabort kAbortNeedRecords
bool rtm_in_transaction();                  // xtest

// An RTM abort status as the layer counts it.
AbortInfo rtm_abort_info(unsigned status);

} // namespace memlayout::trees::htm
