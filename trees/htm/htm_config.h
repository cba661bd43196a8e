// How an HTM tree runs its transactions: which backend, the emulator's model
// of the L1 that bounds a transaction, and the retry-and-fallback policy.
// docs/htm.md states the model and the policy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memlayout::trees::htm {

enum class Backend : uint8_t {
  kAuto,    // RTM when this CPU has usable RTM, else the emulator
  kRtm,     // Intel RTM (xbegin/xend); trees refuse to start without it
  kEmulate, // the software emulator (tx_emulator.h)
  kLock,    // no transactions: every region takes the fallback lock (the
            // spin-lock baseline of the studies, and the emulator's cost)
};

// The cache that tracks a transaction's lines, as Haswell-to-Sapphire-Rapids
// parts do it: written lines must stay in the L1 (a set holds `ways` of them,
// one more is a capacity abort); lines only read may leave the L1 for a
// secondary tracker holding `read_overflow_lines` of them, one more aborts.
// The default is the L1 of all three HTM studies (32 KiB, 8-way, 64 sets),
// with no secondary tracker: the model of Karnagel et al.'s capacity analysis.
struct L1Model {
  uint32_t sets = 64;
  uint32_t ways = 8;
  uint32_t read_overflow_lines = 0;

  uint32_t set_of(uint64_t line_addr) const {
    return static_cast<uint32_t>((line_addr >> 6) & (sets - 1));
  }
};

// Aborts of each kind a region tolerates before it takes the fallback lock
// (Eunomia's and DBX's thresholds: 128 conflict, 16 capacity, 3 other).
struct RetryPolicy {
  uint32_t conflict = 128;
  uint32_t capacity = 16;
  uint32_t other = 3;
};

struct HtmConfig {
  Backend backend = Backend::kAuto;
  L1Model l1;
  RetryPolicy retries;
  // Under the emulator, a gap this long between two accesses of a
  // transaction means its thread lost the CPU (preempted, or a page fault):
  // an interrupt, which ends a hardware transaction. It aborts as "other",
  // whatever conflicts other threads found with it meanwhile. 0: off.
  uint64_t descheduled_ns = 50'000;
  // memlayout-bench runs the measured operations in lockstep (lockstep.h):
  // threads take turns access by access, as on cores of their own.
  bool lockstep = false;
};

// What the HTM trees take besides the layout and allocation policy.
struct HtmTreeOptions {
  HtmConfig htm;
  // Bytes of keys and payloads (leaves) or keys and children (inner nodes)
  // per node: the fanout follows from it and the key and payload sizes.
  uint32_t node_bytes = 256;
  uint32_t key_bytes = 8;   // a multiple of 8, from 8 to 1024
  uint32_t value_bytes = 8; // a multiple of 8, from 8 to 4096
  // euno-bptree's conflict control (lock and mark bits): per leaf when its
  // contention detector says so (Eunomia's adaptive control), always, or never.
  enum class ConflictControl : uint8_t { kAdaptive, kAlways, kNever };
  ConflictControl conflict_control = ConflictControl::kAdaptive;
};

const char *backend_name(Backend b); // "auto", "rtm", "emulate"
bool parse_backend(std::string_view text, Backend *out);
// "64x8" or "64x8+256" (sets x ways + lines the secondary read tracker holds).
bool parse_l1_model(std::string_view text, L1Model *out, std::string *why);
std::string l1_model_text(const L1Model &m);
// "128/16/3": conflict/capacity/other aborts tolerated before falling back.
bool parse_retry_policy(std::string_view text, RetryPolicy *out);

} // namespace memlayout::trees::htm
