// The data the analyses share: the live heap at one moment of a trace, and
// the allocation groups it is divided into. Produced by heap_snapshot.cpp and
// grouping.cpp, read by every analysis and renderer.
#pragma once

#include "trace_format.h"
#include "trace_records.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace memlayout::inspector {

// One object alive at the snapshot point.
struct LiveObject {
  uint64_t addr = 0;   // virtual address
  uint64_t size = 0;   // requested bytes
  uint64_t usable = 0; // bytes the allocator reserved for it
  uint64_t stack_id = 0;
  uint32_t tid = 0;    // thread that allocated it
  uint32_t tag_id = 0; // memlayout_tag string id, 0 = untagged
  trace::Api api = trace::Api::kMalloc;
  uint64_t seq = 0; // position of its allocation in the merged event order
};

enum class SnapshotPoint : uint8_t { kPeak, kEnd, kMark };

// An event as the replay applied it: the merged order of all threads, which
// is what `memlayout replay` re-executes.
struct AppliedEvent {
  trace::EventKind kind;
  trace::Api api;
  uint32_t tid;
  uint64_t seq; // its position in the merged order (LiveObject::seq of an allocation)
  uint64_t ptr, old_ptr, size, usable, stack_id;
  uint64_t alignment; // of an aligned API (posix_memalign, aligned_alloc, ...), else 0
  // The stamp the event carries in the trace (a free applied after the
  // allocation it preceded: the free's own).
  uint64_t tsc = 0;
  bool range_end = false; // a free that is the end of a destroyed pool's range (kFreeRange)
};

struct SnapshotSpec {
  SnapshotPoint point = SnapshotPoint::kPeak;
  std::string mark; // kMark: the memlayout_mark name (its first occurrence)
  // Given every event up to the point, in order, as the final replay applies
  // it (pulled-forward frees included where they are applied).
  std::function<void(const AppliedEvent &)> observer;
  // Index and decode the trace on a second thread where the machine has a
  // second CPU (decoding: where the trace has few threads). The snapshot is
  // the same either way.
  bool decode_thread = true;
};

struct HeapSnapshot {
  SnapshotSpec at;
  int64_t ts_ns = 0;               // when (ns since trace start)
  std::vector<LiveObject> objects; // sorted by addr
  uint64_t live_bytes = 0;         // requested
  uint64_t live_usable_bytes = 0;
  // The memory-map snapshot that describes pages at that moment best (the
  // first taken at or after it, else the last before), if the trace has any.
  std::optional<MemoryMap> memory_map;
  uint64_t events = 0;        // allocation events replayed up to the point
  uint64_t unknown_frees = 0; // frees of addresses the trace never allocated
  // Allocations of an address still live with no pending free of it nearby
  // (a lost free event): the older object was dropped, counted here.
  uint64_t double_allocs = 0;
  bool partial = false; // the trace was truncated: a prefix was analysed
};

// A group: the objects of one call site (stack) and one size class.
// How a frame between the allocator and a group's site came to be looked
// through (alloc_site.h).
enum class WrapperReason : uint8_t {
  kBuiltin,        // the built-in list
  kOption,         // --wrapper
  kRulesFile,      // a `wrapper=` line of a rules file
  kDetectedBinary, // detected from the module's debug info (call sites)
  kDetectedTrace,  // detected from the recorded stacks
};

struct LookedThrough {
  std::string function;
  WrapperReason reason;
  std::string evidence; // for a detected wrapper: what showed it
  bool operator==(const LookedThrough &) const = default;
};

struct Group {
  uint32_t id = 0;
  std::string name; // tag, pool or type when known, else "function (file:line)"
  struct Site {
    std::string function, file; // unresolved: "??" and "module+0xoffset"
    uint32_t line = 0;
    // For an unresolved site, the nearest caller that has a name: what a
    // user can recognise a stripped library's call site by.
    std::string caller;
    // Wrapper frames between the allocator and the site, innermost first.
    std::vector<LookedThrough> looked_through;
    // Of the allocating call, where the debug info has columns (0 when not):
    // two allocations on one line are two sites.
    uint32_t column = 0;
    // Every frame of the stack was allocator code or a wrapper (stacks
    // recorded too shallow to reach a caller): the site is the outermost of
    // them, standing for callers the trace does not show. No rule can name
    // it by function: the interposer looks through it.
    bool every_frame_looked_through = false;
  } site;
  uint64_t size_class = 0;     // usable size most of its objects got
  uint64_t requested_size = 0; // the most common requested size
  // The smallest and largest requested sizes of its objects: what a rule's
  // size key can tell it from another group by, where classes cannot (a
  // reused chunk holds a smaller request). 0 when unknown (an older report).
  uint64_t requested_min = 0, requested_max = 0;
  std::vector<uint32_t> objects; // indices into HeapSnapshot::objects, by address
  std::vector<uint32_t> threads; // allocating threads, ascending
  uint64_t bytes = 0;            // requested bytes of its objects
  std::string type;         // the record its call site allocates, from a type map; "" when unknown
  uint64_t type_offset = 0; // where that record starts in each object (make_shared: 16)
  // Which of the record's layouts (RecordLayout::variant) the site's
  // translation unit gave it: 0 when it has one.
  uint32_t type_variant = 0;
  // Where `type` came from the type map's site at a call of the site's
  // function, not at the site (GroupingOptions::type_from_caller): which,
  // for people ("the type map's site at its call in createClient
  // (zm.c:13)"); empty otherwise.
  std::string type_caller;
  // Most of its objects came from the program's own pool (seg_malloc and
  // kin): rules do not reroute them, the pool's options place them.
  bool program_pool = false;
  // Most of its objects were last grown by realloc: each began as a smaller
  // allocation of the same site (realloc(NULL, n) or malloc), whose size is
  // what a rule's size key was tested against, not the size it grew to.
  bool grown_by_realloc = false;
  // Most of its objects came from an aligned entry point (posix_memalign,
  // aligned_alloc, new of an over-aligned type): a rule keeps the alignment
  // the program asked for, so no rule moves them off it.
  bool aligned_api = false;
};

// One call site: the same function, file, line and (for an unresolved site)
// named caller. Its size classes are several groups, and a rule for one of
// them is meant for all; so are two calls on one line (columns apart), which
// no rule tells apart.
bool same_site(const Group::Site &a, const Group::Site &b);

// A group's object indices in address order. Group::objects is documented as
// address-ordered; a hand-built group may not be, and analyses that walk
// neighbours are meaningless unless it is. Out-of-range indices are dropped.
std::vector<uint32_t> objects_by_address(const HeapSnapshot &snapshot, const Group &group);

} // namespace memlayout::inspector
