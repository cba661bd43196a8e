// What one aborted transaction knows about why it aborted: the hardware's
// status bits under RTM, and under the emulator the line, the bytes each side
// touched and the operations' keys, from which a conflict is classified true
// (the two transactions touched overlapping bytes) or false (same line,
// disjoint bytes: a layout effect).
#pragma once

#include <cstdint>

namespace memlayout::trees::htm {

enum class AbortCause : uint8_t {
  kConflict = 0, // another transaction or a plain access touched a line of this one
  kCapacity = 1, // the read or write set did not fit the L1 model
  kExplicit = 2, // the region aborted itself (fallback lock held, out of spare records)
  kOther = 3,    // interrupt, fault, unknown status
};
inline constexpr int kAbortCauses = 4;

const char *abort_cause_name(AbortCause c); // "conflict", "capacity", "explicit", "other"

// Explicit abort codes (RTM's 8-bit xabort argument).
inline constexpr uint8_t kAbortLockHeld = 0xff;    // the fallback lock was taken
inline constexpr uint8_t kAbortNeedRecords = 0xfe; // the region ran out of spare records

// What the requester of a conflicting access was.
enum class Requester : uint8_t {
  kTransaction = 0,  // another transaction (requester wins)
  kPlain = 1,        // a non-transactional access: fallback path, lock bits
  kFallbackLock = 2, // the fallback lock being taken (the lemming effect)
};

struct AbortInfo {
  AbortCause cause = AbortCause::kOther;
  uint8_t explicit_code = 0; // kExplicit
  bool retry_hint = false;   // RTM's retry bit
  bool detailed = false;     // the fields below are filled (emulator)

  // kConflict
  uint64_t line = 0;             // address of the 64-byte line
  uint64_t victim_read_mask = 0; // bytes of the line this transaction had read (bit i = byte i)
  uint64_t victim_write_mask = 0;
  uint64_t requester_mask = 0; // bytes the conflicting access touched
  bool requester_writes = false;
  Requester requester = Requester::kTransaction;
  bool overlap = false;    // true conflict: the requester's bytes meet this transaction's
  bool same_key = false;   // both sides were operations on the same key
  bool keys_known = false; // both sides had announced their key

  // kCapacity: the set that overflowed and what the transaction held.
  bool write_capacity = false; // a set held more written lines than ways (else: reads)
  uint32_t set = 0;
  uint32_t lines_in_set = 0; // the transaction's lines in that set
  uint32_t lines = 0;        // all its lines
  uint32_t written_lines = 0;
  uint32_t sets_used = 0;
  // Up to kMaxSetLines lines of the overflowing set, for the layout report.
  static constexpr int kMaxSetLines = 24;
  uint64_t set_lines[kMaxSetLines] = {};
  uint8_t set_lines_count = 0;
};

} // namespace memlayout::trees::htm
