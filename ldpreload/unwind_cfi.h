// .eh_frame interpretation for the kCfi unwinder: from a module's unwind
// tables to the one rule that unwinds a frame at a given pc.
//
// Nothing here allocates, locks or calls out; every byte read is checked
// against the module's loaded segments, so a corrupt table yields "stop",
// never a fault. The caller guarantees the module stays mapped meanwhile (it
// runs this inside dl_iterate_phdr, which holds off dlclose).
#pragma once

#include "unwind.h"

#include <cstddef>
#include <cstdint>

namespace memlayout::preload::cfi {

// How to get from a frame to its caller on x86-64, reduced to what the unwinder
// tracks (rsp, rbp, return address). The return address is always at CFA - 8
// and the caller's rsp is the CFA; a frame that breaks either convention gets
// kEnd.
struct Rule {
  enum Kind : uint8_t {
    kEmpty = 0,   // no rule cached (only meaningful inside the cache)
    kStep = 1,    // unwindable with the fields below
    kEnd = 2,     // pc is code but the frame cannot (or must not) be unwound
    kNotCode = 3, // pc lies in no executable segment of any loaded module
  };
  enum CfaBase : uint8_t { kCfaRsp = 0, kCfaRbp = 1 };
  enum RbpRule : uint8_t {
    kRbpSame = 0,  // caller's rbp == this frame's rbp
    kRbpSaved = 1, // caller's rbp is stored at CFA + rbp_off
    kRbpLost = 2,  // not recoverable: later rbp-based frames must stop
  };
  Kind kind = kEmpty;
  CfaBase cfa_base = kCfaRsp;
  RbpRule rbp = kRbpSame;
  int32_t cfa_off = 0;
  int32_t rbp_off = 0;
};

// Packing into one word lets the rule cache publish a rule with a single
// atomic store. `tag` is carried along for the cache's own validation.
// Layout: kind 0-1, cfa_base 2, rbp 3-4, rbp_off/8 8-15, tag 16-31, cfa_off 32-63.
inline uint64_t pack(const Rule &r, uint16_t tag) {
  return static_cast<uint64_t>(r.kind) | static_cast<uint64_t>(r.cfa_base) << 2 |
         static_cast<uint64_t>(r.rbp) << 3 |
         static_cast<uint64_t>(static_cast<uint8_t>(static_cast<int8_t>(r.rbp_off / 8))) << 8 |
         static_cast<uint64_t>(tag) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(r.cfa_off)) << 32;
}
inline Rule unpack(uint64_t v) {
  Rule r;
  r.kind = static_cast<Rule::Kind>(v & 3);
  r.cfa_base = static_cast<Rule::CfaBase>((v >> 2) & 1);
  r.rbp = static_cast<Rule::RbpRule>((v >> 3) & 3);
  r.rbp_off = static_cast<int32_t>(static_cast<int8_t>(static_cast<uint8_t>(v >> 8))) * 8;
  r.cfa_off = static_cast<int32_t>(static_cast<uint32_t>(v >> 32));
  return r;
}
inline uint16_t packed_tag(uint64_t v) { return static_cast<uint16_t>(v >> 16); }
inline Rule::Kind packed_kind(uint64_t v) { return static_cast<Rule::Kind>(v & 3); }

// The loaded image of one module as dl_iterate_phdr describes it: reads are
// allowed only inside its PT_LOAD segments.
struct Segment {
  uintptr_t lo, hi;
};
struct ModuleImage {
  static constexpr int kMaxSegments = 16;
  Segment loads[kMaxSegments];
  int nloads = 0;
  uintptr_t eh_frame_hdr = 0; // 0 when the module has no PT_GNU_EH_FRAME
  size_t eh_frame_hdr_size = 0;

  // True if [addr, addr + n) lies inside one loaded segment.
  bool readable(uintptr_t addr, size_t n) const;
};

// The rule for the frame whose return address (or, for a signal-free
// innermost frame, current pc + 1) is `ra`: it describes the instruction at
// ra - 1, the call. Returns kStep or kEnd.
Rule rule_for(const ModuleImage &m, uintptr_t ra);

// Exposed for tests: interprets a CIE's and an FDE's CFA programs (given as
// raw bytes) up to `target`, with x86-64 alignment factors.
Rule rule_from_programs(const uint8_t *cie_insns, size_t cie_len, const uint8_t *fde_insns,
                        size_t fde_len, uintptr_t pc_begin, uintptr_t target);

// kCfi without the per-thread whole-stack cache (rule cache only): for tests
// and unwind-bench, to check and time the path every new stack takes.
size_t unwind_rules_only(const UnwindStart &start, uintptr_t *frames, size_t max_depth);

} // namespace memlayout::preload::cfi
