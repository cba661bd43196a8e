// The memlayout trace format: the one definition shared by the recorder
// (ldpreload/) and the decoder (inspector/). docs/trace-format.md describes it
// for users; change both together and bump kTraceVersion on any change a v1
// reader could misread.
//
// Header-only, allocation-free and exception-free so the preload can use it on
// its hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "size_class.h"

namespace memlayout::trace {

using memlayout::glibc_usable_size;
using memlayout::jemalloc_size_class;

inline constexpr char kFileMagic[8] = {'M', 'L', 'T', 'R', 'A', 'C', 'E', '\0'};
inline constexpr uint16_t kTraceVersion = 1;
// Every record starts with this word so a reader can tell a record boundary
// from garbage and name the offset where the file stops making sense.
inline constexpr uint32_t kRecordMagic = 0x43524C4D; // "MLRC" little-endian

// File header: fixed part, then TLV fields up to header_bytes.
struct FileHeader {
  char magic[8];
  uint16_t version;
  uint16_t header_bytes; // fixed part + all TLV fields
  uint32_t reserved;
};
static_assert(sizeof(FileHeader) == 16);

// TLV tags of the file header. Unknown tags are skipped by readers. Strings
// are not NUL-terminated (length is the field's), except kCommandLine whose
// arguments are each followed by a NUL, as in /proc/self/cmdline.
enum class HeaderTag : uint16_t {
  kPid = 1,              // u32
  kParentPid = 2,        // u32
  kStartRealtimeNs = 3,  // u64, CLOCK_REALTIME at trace start
  kStartTsc = 4,         // u64, TSC at trace start (pairs with kStartMonotonicNs)
  kStartMonotonicNs = 5, // u64
  kPageSize = 6,         // u32
  kAllocator = 7,        // string: "native" or "jemalloc"
  kUnwind = 8,           // string: unwinder name
  kStackDepth = 9,       // u32: frames asked per stack, 1 to kMaxStackDepth
  kExecutable = 10,      // string: /proc/self/exe
  kCommandLine = 11,     // NUL-separated argv
  kHostname = 12,        // string
  kKernel = 13,          // string: uname release
  kTimestampPeriod = 14, // u32: a TSC sample is taken at least every N events per thread
  kPointerBits = 15,     // u32 (64)
  kUsableModel = 16,     // u32 (UsableModel): how usable sizes are predicted
  kSwitchWatch = 17,     // u32: 1 when a thread switched out samples the TSC at its next event
};

inline constexpr uint32_t kMaxStackDepth = 64; // MEMLAYOUT_STACK_DEPTH's bound

// Usable sizes are stored as a difference from what the allocator's size
// classes predict, so the common case costs no byte. kNone: no prediction,
// every event carries its usable size.
enum class UsableModel : uint8_t { kNone = 0, kGlibc = 1, kJemalloc = 2 };

inline constexpr uint64_t predicted_usable(UsableModel m, uint64_t size) {
  switch (m) {
  case UsableModel::kGlibc:
    return glibc_usable_size(size);
  case UsableModel::kJemalloc:
    return jemalloc_size_class(size);
  default:
    return size;
  }
}

struct HeaderField {
  uint16_t tag;
  uint16_t length; // bytes of value that follow
};
static_assert(sizeof(HeaderField) == 4);

enum class RecordType : uint8_t {
  kEvents = 1,    // one thread's event block (tid set)
  kStacks = 2,    // stack table entries
  kStrings = 3,   // string table entries (tags, marks, thread names)
  kModules = 4,   // loaded / unloaded modules
  kMemoryMap = 5, // a snapshot of the heap's regions and page frames
  kThread = 6,    // thread start / exit / name
  kEnd = 7,       // the process ended cleanly; totals
  kRules = 8,     // segregation rules in force and what each routed (below)
  kHtmAborts = 9, // aborted hardware (or emulated) transactions (below)
  kStop = 10,     // the recorder stopped writing before the process ended (below)
};

// ---- Stop (payload of kStop) ---------------------------------------------
//
// payload := u8 cause (StopCause), varint limit, varint offset
// Written once, when the recorder stops writing a trace because the next
// record would not fit (kFileSizeLimit: `limit` is RLIMIT_FSIZE in bytes,
// `offset` the trace's size before the record that did not fit). After it
// come at most the records other threads were writing then: no end record
// follows, and a reader reports the trace truncated, for this cause. The
// writer keeps room for it under the limit. A v1 reader that predates it
// skips it with a warning.
enum class StopCause : uint8_t { kFileSizeLimit = 1 };
inline constexpr size_t kMaxStopPayload = 1 + 10 + 10;

// ---- Rules (payload of kRules, written once before kEnd) --------------------
//
// payload := varint rule_count, rule*, varint wrapper_count, wrapper*
// rule    := varint length, canonical rule text (rules::format_rule),
//            varint allocations routed, varint bytes routed (requested)
// wrapper := u8 not_wrapper, varint length, function name
// A process that forks writes its own counts (the child starts from zero).

// ---- HTM aborts (payload of kHtmAborts) -------------------------------------
//
// Written by memlayout_htm_aborts (<memlayout/memlayout.h>) in batches; tid is
// the thread whose transactions aborted.
// payload := entry*
// entry   := u8 cause (HtmCause), u8 flags (HtmFlags), varint region string id
//            (0: none), varint line, varint read_mask, varint write_mask,
//            varint other_mask, varint set, varint l1_sets, varint l1_ways,
//            varint tx_lines, varint tx_written_lines, varint tx_sets,
//            varint nlines, nlines x varint line
// A conflict names its line and the bytes of it (bit i = byte i) the aborted
// transaction read and wrote and the conflicting access touched; a capacity
// abort names the L1 set that overflowed, the transaction's footprint and its
// lines in that set. Fields a cause does not use are 0. A kCommits entry is
// not an abort: its `line` field counts the region's transactions that
// completed (committed, or ran on the fallback path) since the last one.
enum class HtmCause : uint8_t {
  kConflict = 0,
  kCapacity = 1,
  kExplicit = 2,
  kOther = 3,
  kCommits = 4
};
enum HtmFlags : uint8_t {
  kHtmOverlap = 1,       // true conflict: the two sides' bytes overlap
  kHtmOtherWrites = 2,   // the conflicting access wrote
  kHtmSameKey = 4,       // both sides were operations on the same key
  kHtmKeysKnown = 8,     // both announced their key
  kHtmByPlain = 16,      // the other side was a plain (non-transactional) access
  kHtmByLock = 32,       // ... taking the fallback lock
  kHtmWriteCapacity = 64 // capacity: written lines overflowed their set
};
inline constexpr uint32_t kMaxHtmSetLines = 64; // lines a capacity entry may list

inline constexpr uint8_t kRecordCompressed = 1; // payload is one zstd frame

// Every record: header, then payload_bytes of payload. raw_bytes is the
// payload's size once decompressed (== payload_bytes when not compressed).
struct RecordHeader {
  uint32_t magic;
  uint8_t type;
  uint8_t flags;
  uint16_t reserved;
  uint32_t tid; // producing thread (kernel tid), 0 for process-wide
  uint32_t payload_bytes;
  uint32_t raw_bytes;
  uint32_t count; // events or entries in the payload
};
static_assert(sizeof(RecordHeader) == 24);

// Upper bound a reader accepts for one record (the writer stays far below).
inline constexpr uint32_t kMaxRecordBytes = 64u << 20;

// ---- Events (payload of kEvents, after decompression) ----------------------
//
// payload := varint first_tsc, varint clock_tsc, varint clock_monotonic_ns,
//            event*
// (clock_tsc, clock_monotonic_ns) is a pair read together when the block was
// written: with the header's start pair it converts TSC ticks to nanoseconds
// even in a truncated trace.
// event   := u8 head, fields by kind
// head: bits 0-2 kind, bits 3-7 api (the entry point that made the event).
//
// Per block state starts at tsc = first_tsc and prev_ptr = 0; pointers are
// zigzag deltas against prev_ptr, which every event carrying a pointer updates.
//
//   kAlloc   : zz(ptr - prev), sizes, stack_id
//              [+ log2(alignment) when api is an aligned form]
//   kFree    : zz(ptr - prev)
//   kRealloc : zz(old - prev), zz(new - old), sizes, stack_id
//   sizes    : varint (size << 1 | explicit) [+ varint usable - size if explicit]
//              explicit == 0: usable == predicted_usable(header's model, size)
//              (sizes are below 2^63: no allocator can return more)
//   kTick    : tsc - previous tsc (events after it happened at about that time)
//   kMark    : string_id               (memlayout_mark)
//   kTag     : zz(ptr - prev), string_id (memlayout_tag)
//   kExt     : varint ext kind, fields (see ExtKind)
//
// Events without a kTick since the block start carry first_tsc. The recorder
// samples the TSC at least every HeaderTag::kTimestampPeriod events (less
// often than that only while samples come within about a microsecond of
// each other) because reading it costs as much as a malloc here (see
// docs/recording.md).
//
// RecordHeader::count of a kEvents record counts every event in the payload,
// kTick included. After a kRealloc prev_ptr is the new pointer. Whether a
// kAlloc carries the alignment field depends on api_is_aligned(api): adding
// an aligned Api therefore bumps kTraceVersion.
enum class EventKind : uint8_t {
  kAlloc = 0,
  kFree = 1,
  kRealloc = 2,
  kTick = 3,
  kMark = 4,
  kTag = 5,
  kExt = 7,
};

enum class ExtKind : uint8_t {
  kFork = 1,      // varint child pid
  kSnapshot = 2,  // varint snapshot id (a kMemoryMap record with that id)
  kLost = 3,      // varint count: events dropped (e.g. allocations made
                  // from inside the recorder, or from signal handlers)
  kFreeRange = 4, // varint begin, varint length: every object live in
                  // [begin, begin + length) ends (a pool destroyed with
                  // its objects). begin is absolute and leaves prev_ptr be.
                  // A reader that predates it stops there with an error.
};

// Whether a reader knows ext kind `v`, and how many varints follow it.
inline constexpr bool is_known_ext(uint64_t v) {
  return v >= static_cast<uint64_t>(ExtKind::kFork) &&
         v <= static_cast<uint64_t>(ExtKind::kFreeRange);
}
inline constexpr unsigned ext_fields(ExtKind k) { return k == ExtKind::kFreeRange ? 2 : 1; }

// Entry points. Values are stored in traces: append only.
enum class Api : uint8_t {
  kMalloc = 0,
  kCalloc,
  kRealloc,
  kReallocArray,
  kPosixMemalign,
  kAlignedAlloc,
  kMemalign,
  kValloc,
  kPvalloc,
  kNew,
  kNewArray,
  kNewNothrow,
  kNewArrayNothrow,
  kNewAligned,
  kNewArrayAligned,
  kNewAlignedNothrow,
  kNewArrayAlignedNothrow,
  kFree,
  kCfree,
  kDelete,
  kDeleteArray,
  kDeleteSized,
  kDeleteArraySized,
  kDeleteAligned,
  kDeleteArrayAligned,
  kDeleteSizedAligned,
  kDeleteArraySizedAligned,
  kSegPool, // allocations of memlayout pools (alloc/)
  kCount
};
static_assert(static_cast<int>(Api::kCount) <= 32, "api must fit in 5 bits");

inline constexpr bool api_is_aligned(Api a) {
  switch (a) {
  case Api::kPosixMemalign:
  case Api::kAlignedAlloc:
  case Api::kMemalign:
  case Api::kValloc:
  case Api::kPvalloc:
  case Api::kNewAligned:
  case Api::kNewArrayAligned:
  case Api::kNewAlignedNothrow:
  case Api::kNewArrayAlignedNothrow:
    return true;
  default:
    return false;
  }
}

inline constexpr const char *api_name(Api a) {
  constexpr const char *names[] = {"malloc",
                                   "calloc",
                                   "realloc",
                                   "reallocarray",
                                   "posix_memalign",
                                   "aligned_alloc",
                                   "memalign",
                                   "valloc",
                                   "pvalloc",
                                   "new",
                                   "new[]",
                                   "new(nothrow)",
                                   "new[](nothrow)",
                                   "new(align)",
                                   "new[](align)",
                                   "new(align,nothrow)",
                                   "new[](align,nothrow)",
                                   "free",
                                   "cfree",
                                   "delete",
                                   "delete[]",
                                   "delete(sized)",
                                   "delete[](sized)",
                                   "delete(align)",
                                   "delete[](align)",
                                   "delete(sized,align)",
                                   "delete[](sized,align)",
                                   "seg_pool"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(Api::kCount));
  auto i = static_cast<unsigned>(a);
  return i < static_cast<unsigned>(Api::kCount) ? names[i] : "?";
}

inline constexpr uint8_t event_head(EventKind k, Api a) {
  return static_cast<uint8_t>(static_cast<uint8_t>(k) | (static_cast<uint8_t>(a) << 3));
}
inline constexpr EventKind head_kind(uint8_t head) { return static_cast<EventKind>(head & 7); }
inline constexpr Api head_api(uint8_t head) { return static_cast<Api>(head >> 3); }

// ---- Tables (payloads of kStacks / kStrings / kThread / kModules) ----------
//
// kStacks  : { varint id, varint depth, depth x varint frame_address }*
//            frame 0 is the return address into the caller of the entry point.
//            Ids start at 1; an event with stack id 0 has no stack (the table
//            could not grow).
// kStrings : { varint id, varint length, bytes }*
// kThread  : { u8 what (ThreadEvent), varint tsc, varint tid,
//              varint name_string_id (0 = none) }*
// kModules : { u8 what (ModuleEvent), varint tsc, varint load_bias,
//              varint path_len, path, varint build_id_len, build_id,
//              varint nsegments, { varint vaddr, varint memsz, u8 flags }* }*
//            vaddr is the segment's address in the file; the mapped address is
//            load_bias + vaddr. flags: PF_X=1, PF_W=2, PF_R=4 as in ELF. The
//            main program's path is /proc/self/exe's target; a kUnloaded entry
//            has an empty path and no segments and names the module by
//            load_bias.
// kMemoryMap: varint snapshot_id, varint tsc, u8 flags (MapFlags),
//            varint nregions, region*
//   region := varint start, varint end, u8 prot (1 r, 2 w, 4 x),
//             u8 kind (RegionKind), varint anon_huge_kib,
//             varint nruns, { varint page_delta, varint npages, varint pfn }*
//   runs describe pages resident in RAM: page_delta is the page index (within
//   the region) minus the end of the previous run; pages npages..+npages map to
//   frames pfn..pfn+npages. Frames are present only when MapFlags::kPfns is set
//   (root can read /proc/self/pagemap); otherwise nruns is 0. kMapPartial:
//   the snapshot hit its size bound and lists only part of the runs.
// kEnd     : u8 reason (EndReason), varint tsc, varint monotonic_ns,
//            varint exit_status (UINT64_MAX when unknown), varint events (not
//            counting kTick), varint allocs,
//            varint frees, varint bytes_allocated, varint lost_events,
//            varint write_errors
//            Totals count this process image from its start. A process whose
//            exec failed goes on recording after a kEnd of reason kExec: the
//            last kEnd of a file is the one that counts.

enum class ThreadEvent : uint8_t { kStart = 1, kExit = 2, kName = 3 };
// kSignal: killed by a signal whose action was the default (exit_status holds
// the signal number); what was complete when it arrived was written.
enum class EndReason : uint8_t { kExit = 1, kExec = 2, kAbort = 3, kSignal = 4 };
inline constexpr const char *end_reason_name(EndReason r) {
  switch (r) {
  case EndReason::kExit:
    return "exit";
  case EndReason::kExec:
    return "exec";
  case EndReason::kAbort:
    return "abort";
  case EndReason::kSignal:
    return "signal";
  }
  return "?";
}

// Where a process other than the root process's first image records: `base`
// (the trace of the root process) with ".PID" inserted before the extension
// of its last path component, and ".N" after it for a process's Nth image
// since it was forked or spawned (the root process's images after exec
// included). The interposer names its files by this and the CLI finds them
// by it. False if it does not fit in `cap` bytes with its terminating NUL.
// Where the insertion goes: before the extension of the last path component
// (a leading dot starts no extension), else at the end.
inline size_t process_trace_path_cut(const char *base) {
  const char *slash = strrchr(base, '/');
  const char *dot = strrchr(base, '.');
  return (dot && (!slash || dot > slash + 1) && dot != base) ? static_cast<size_t>(dot - base)
                                                             : strlen(base);
}
inline bool process_trace_path(const char *base, uint32_t pid, uint32_t exec_generation, char *buf,
                               size_t cap) {
  char suffix[2 * (1 + 10)];
  size_t n = 0;
  auto put = [&](uint32_t v) {
    char digits[10];
    size_t d = 0;
    do
      digits[d++] = static_cast<char>('0' + v % 10);
    while (v /= 10);
    suffix[n++] = '.';
    while (d)
      suffix[n++] = digits[--d];
  };
  put(pid);
  if (exec_generation)
    put(exec_generation);
  size_t len = strlen(base);
  size_t cut = process_trace_path_cut(base);
  if (len + n + 1 > cap)
    return false;
  memcpy(buf, base, cut);
  memcpy(buf + cut, suffix, n);
  memcpy(buf + cut + n, base + cut, len - cut + 1);
  return true;
}

enum class ModuleEvent : uint8_t { kLoaded = 1, kUnloaded = 2 };
enum class RegionKind : uint8_t { kHeap = 1, kAnonymous = 2, kStack = 3, kOther = 4 };
enum MapFlags : uint8_t { kMapPfns = 1, kMapKpageflags = 2, kMapPartial = 4 };

// ---- Varint coding ----------------------------------------------------------

inline constexpr size_t kMaxVarintBytes = 10;

inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// The same bytes as put_varint without a loop: the lengths of pointer deltas
// and sizes vary at random from one event to the next, and a mispredicted
// loop exit costs the recorder more than the rest of the event. Writes 8 bytes
// (the caller leaves room), keeps those that belong to the varint.
inline uint8_t *put_varint_branchless(uint8_t *p, uint64_t v) {
  if (__builtin_expect(v >> 56, 0))
    return put_varint(p, v);
  unsigned len = (64 - static_cast<unsigned>(__builtin_clzll(v | 1)) + 6) / 7; // 1..8
  uint64_t x = (v & 0x7f) | ((v << 1) & 0x7f00) | ((v << 2) & 0x7f0000) | ((v << 3) & 0x7f000000) |
               ((v << 4) & 0x7f00000000) | ((v << 5) & 0x7f0000000000) |
               ((v << 6) & 0x7f000000000000) | ((v << 7) & 0x7f00000000000000);
  x |= 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1); // continuation bits
  std::memcpy(p, &x, sizeof x); // little-endian: byte 0 is the lowest group
  return p + len;
}

// What a varint of a value with `clz` leading zero bits (clz of v | 1, so
// 0..63) takes: its length and the continuation bits of its bytes, by table
// instead of a division and a variable shift on the recorder's hot path.
struct VarintShape {
  uint8_t len;
  uint64_t continuation;
};
inline constexpr struct VarintShapes {
  VarintShape by_clz[64];
  constexpr VarintShapes() : by_clz{} {
    for (unsigned clz = 0; clz < 64; ++clz) {
      unsigned len = (64 - clz + 6) / 7;
      by_clz[clz].len = static_cast<uint8_t>(len);
      by_clz[clz].continuation =
          len >= 8 ? 0x0080808080808080ull
                   : 0x8080808080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);
    }
  }
} kVarintShapes;

// put_varint_branchless with the 7-bit groups spread by one PDEP: ~6
// instructions instead of ~40. Only for CPUs where PDEP is fast (Intel since
// Haswell, AMD since Zen 3: on Zen 1 and 2 it is microcoded, hundreds of
// cycles); the caller decides (inline asm, so no -mbmi2 is needed to build).
inline uint8_t *put_varint_pdep(uint8_t *p, uint64_t v) {
#if defined(__x86_64__)
  if (__builtin_expect(v >> 56, 0))
    return put_varint(p, v);
  uint64_t x;
  // Not the lzcnt instruction: a VM may report BMI2 without LZCNT, and there
  // lzcnt runs as bsr and gives another count (a wrong length, a corrupt trace).
  const VarintShape &shape = kVarintShapes.by_clz[__builtin_clzll(v | 1)];
  asm("pdep %2, %1, %0" : "=r"(x) : "r"(v), "r"(0x7f7f7f7f7f7f7f7full));
  x |= shape.continuation;
  std::memcpy(p, &x, sizeof x);
  return p + shape.len;
#else
  return put_varint_branchless(p, v);
#endif
}

inline constexpr uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline constexpr int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Bounds-checked reading for decoders. A Cursor that runs past its end sets
// `bad` and returns zeros, so decoders check once per record, not per field.
struct Cursor {
  const uint8_t *p;
  const uint8_t *end;
  bool bad = false;

  bool at_end() const { return p >= end; }
  size_t left() const { return p < end ? static_cast<size_t>(end - p) : 0; }

  [[gnu::always_inline]] uint64_t varint() {
    // With 8 bytes readable, a varint of up to 8 bytes (56 bits: every
    // pointer delta, size and id in practice) is decoded without a branch per
    // byte: the lengths vary at random from one field to the next, and the
    // mispredicted loop exits cost the decoder more than the rest.
    if (end - p >= 8) {
      uint64_t x;
      std::memcpy(&x, p, sizeof x); // little-endian: byte 0 is the lowest group
      if (uint64_t stops = ~x & 0x8080808080808080ull) {
        unsigned bits = static_cast<unsigned>(__builtin_ctzll(stops)) + 1; // 8 per byte
        p += bits / 8;
        x &= ~uint64_t{0} >> (64 - bits) & 0x7f7f7f7f7f7f7f7full;
        x = (x & 0x007f007f007f007full) | (x & 0x7f007f007f007f00ull) >> 1;
        x = (x & 0x00003fff00003fffull) | (x & 0x3fff00003fff0000ull) >> 2;
        return (x & 0x000000000fffffffull) | (x & 0x0fffffff00000000ull) >> 4;
      }
    }
    return varint_bytewise();
  }
  // The rest: near the end, and 9- or 10-byte varints. Out of line, so the
  // path above inlines into decoders.
  [[gnu::noinline]] uint64_t varint_bytewise() {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (p >= end) {
        bad = true;
        return 0;
      }
      uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    bad = true; // more than 10 bytes: not a varint we wrote
    return 0;
  }
  [[gnu::always_inline]] int64_t svarint() { return unzigzag(varint()); }
  // Steps over a varint without assembling its value.
  [[gnu::always_inline]] void skip_varint() {
    if (end - p >= 8) {
      uint64_t x;
      std::memcpy(&x, p, sizeof x);
      if (uint64_t stops = ~x & 0x8080808080808080ull) {
        p += static_cast<unsigned>(__builtin_ctzll(stops)) / 8 + 1;
        return;
      }
    }
    varint_bytewise();
  }
  uint8_t u8() {
    if (p >= end) {
      bad = true;
      return 0;
    }
    return *p++;
  }
  // Returns a pointer to n bytes in the buffer, or nullptr if fewer remain.
  const uint8_t *bytes(size_t n) {
    if (left() < n) {
      bad = true;
      p = end;
      return nullptr;
    }
    const uint8_t *q = p;
    p += n;
    return q;
  }
};

} // namespace memlayout::trace
