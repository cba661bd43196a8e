// What a trace holds, once decoded: its header, events and table records as
// plain data. Kept apart from the decoder (trace_reader.h) so that the stages
// after it — the heap, the analyses — use the data without reaching into
// the decoding.
#pragma once

#include "trace_format.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::inspector {

// One decoded event. Fields that the kind does not carry are zero.
struct Event {
  trace::EventKind kind = trace::EventKind::kAlloc;
  trace::Api api = trace::Api::kMalloc;
  trace::ExtKind ext = {}; // kExt only
  uint32_t tid = 0;        // thread that produced the block
  uint32_t index = 0;      // position in its record (ticks included)
  uint64_t tsc = 0;        // last TSC sample at or before the event
  uint64_t ptr = 0;        // alloc, free, tag; realloc: the new pointer; free_range: begin
  uint64_t old_ptr = 0;    // realloc
  uint64_t size = 0;       // requested bytes; free_range: length
  uint64_t usable = 0;     // bytes the allocator handed out
  uint64_t alignment = 0;  // aligned entry points only
  uint64_t stack_id = 0;   // alloc, realloc
  uint64_t string_id = 0;  // mark, tag
  uint64_t ext_value = 0;  // fork: child pid; snapshot: id; lost: count
};

struct TraceHeader {
  uint16_t version = 0;
  uint16_t header_bytes = 0;
  std::optional<uint32_t> pid, parent_pid, page_size, stack_depth, timestamp_period, pointer_bits;
  // 1: threads switched out sampled the clock at their next event (rseq);
  // 0: they did not; absent in traces of recorders before the watch.
  std::optional<uint32_t> switch_watch;
  std::optional<uint64_t> start_realtime_ns, start_tsc, start_monotonic_ns;
  std::string allocator, unwind, executable, hostname, kernel;
  trace::UsableModel usable_model = trace::UsableModel::kNone;
  std::vector<std::string> command_line;
  uint32_t unknown_fields = 0; // TLV fields with tags this reader does not know
};

struct ModuleSegment {
  uint64_t vaddr = 0; // in the file; mapped at load_bias + vaddr
  uint64_t memsz = 0;
  uint8_t flags = 0; // PF_X=1, PF_W=2, PF_R=4
};

struct ModuleEntry {
  trace::ModuleEvent what = trace::ModuleEvent::kLoaded;
  uint64_t tsc = 0;
  uint64_t load_bias = 0;
  std::string path;
  std::string build_id; // raw bytes
  std::vector<ModuleSegment> segments;
};

// Raw bytes (a build-id) as lowercase hex, as `file` and `readelf -n` print them.
inline std::string hex_bytes(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

struct ThreadEntry {
  trace::ThreadEvent what = trace::ThreadEvent::kStart;
  uint64_t tsc = 0;
  uint64_t tid = 0;
  uint64_t name_id = 0; // string id, 0 = none
};

// Pages [first_page, first_page + npages) of a region (page indices within
// the region) are resident; frames pfn.. when the map has kMapPfns.
struct PageRun {
  uint64_t first_page = 0;
  uint64_t npages = 0;
  uint64_t pfn = 0;
};

struct MapRegion {
  uint64_t start = 0, end = 0;
  uint8_t prot = 0; // 1 r, 2 w, 4 x
  trace::RegionKind kind = trace::RegionKind::kOther;
  uint64_t anon_huge_kib = 0;
  uint64_t resident_pages = 0;
  uint32_t first_run = 0, nruns = 0; // into MemoryMap::runs
};

struct MemoryMap {
  uint64_t snapshot_id = 0;
  uint64_t tsc = 0;
  uint8_t flags = 0; // trace::MapFlags
  std::vector<MapRegion> regions;
  std::vector<PageRun> runs;

  std::span<const PageRun> runs_of(const MapRegion &r) const {
    return std::span<const PageRun>(runs).subspan(r.first_run, r.nruns);
  }
};

struct EndRecord {
  trace::EndReason reason = trace::EndReason::kExit;
  uint64_t tsc = 0, monotonic_ns = 0;
  std::optional<uint64_t> exit_status; // empty when the recorder did not know it
  uint64_t events = 0, allocs = 0, frees = 0, bytes_allocated = 0, lost_events = 0,
           write_errors = 0;
};

// Why the recorder stopped writing before the process ended (kStop).
struct StopRecord {
  trace::StopCause cause = trace::StopCause::kFileSizeLimit;
  uint64_t limit = 0;  // kFileSizeLimit: RLIMIT_FSIZE in bytes
  uint64_t offset = 0; // the trace's size before the record that did not fit
};

// The cause in words, for messages: "the file size limit (RLIMIT_FSIZE,
// ulimit -f) of 102400 bytes stopped the recorder".
std::string stop_cause_text(const StopRecord &s);

// `message` is complete ("FILE: offset N: ..."), ready to print.
struct Diagnostic {
  uint64_t offset = 0;
  std::string message;
};

enum class ReadStatus : uint8_t {
  kOk,         // read to a clean end after the kEnd record
  kTruncated,  // partial: stopped early, everything yielded is valid
  kCorrupt,    // fatal: the file stops making sense at error().offset
  kUnreadable, // fatal: not opened, not a trace, or a header we cannot read
};

// A kRules record: the segregation rules a trace was recorded under and
// what each routed.
struct RulesRecord {
  struct Rule {
    std::string text; // canonical (rules::format_rule)
    uint64_t allocations = 0, bytes = 0;
  };
  struct Wrapper {
    std::string function;
    bool not_wrapper = false;
  };
  std::vector<Rule> rules;
  std::vector<Wrapper> wrappers;
};

// One aborted transaction of a kHtmAborts record (trace_format.h): a
// conflict's line and bytes, or a capacity abort's overflowing set and its
// lines there (lines_first, lines_count: into TraceReader::htm_lines()).
struct HtmAbort {
  trace::HtmCause cause = trace::HtmCause::kOther;
  uint8_t flags = 0; // trace::HtmFlags
  uint32_t tid = 0;
  uint64_t region_id = 0; // string id, 0 = none
  uint64_t line = 0, read_mask = 0, write_mask = 0, other_mask = 0;
  uint32_t set = 0, l1_sets = 0, l1_ways = 0;
  uint32_t tx_lines = 0, tx_written_lines = 0, tx_sets = 0;
  uint32_t lines_first = 0, lines_count = 0;
};

} // namespace memlayout::inspector
