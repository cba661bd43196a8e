// Streaming decoder for memlayout traces (format: ldpreload/trace_format.h,
// docs/trace-format.md). One record is held in memory at a time; the stack,
// string, module and thread tables are kept because events refer to them.
//
//   TraceReader r;
//   if (!r.open(path)) fail(r.error().message);
//   for (Item it; (it = r.next()) != Item::kDone;)
//     if (it == Item::kEvent) use(r.event());
//   if (r.status() != ReadStatus::kOk) report(r.error().message);
//
// next() costs one non-virtual call per event and never allocates on the
// event path, so a consumer can stream >10 M events/s on one core.
#pragma once

#include "trace_format.h"
#include "trace_records.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

struct ZSTD_DCtx_s;

namespace memlayout::inspector {

// What skim_block() counts in the rest of an events block.
struct BlockSkim {
  uint32_t events = 0;             // events yielded (ticks folded, as next() does)
  int32_t net = 0, max_prefix = 0; // carried in: objects created less those ended, its most
  bool tags = false, lost = false; // a kTag; an ext kLost
  std::vector<std::pair<uint64_t, uint64_t>> marks; // (string id, tsc) in order
};

// What next() produced. Table records are yielded whole; stacks and strings
// are also folded into the reader's tables.
enum class Item : uint8_t {
  kEvent,
  kStacks,
  kStrings,
  kModules,
  kThreads,
  kMemoryMap,
  kEnd,
  kRules,
  kHtmAborts, // record_htm_aborts(); also gathered whole-file in htm_aborts()
  kStop,      // stopped(): the recorder stopped writing here
  kDone,      // check status()
};

class TraceReader {
public:
  struct Options {
    // Read every table record (and the clock pairs) before the first next(),
    // skipping event payloads without decompressing them. Without it, tables
    // and the clock fill in as next() reaches them.
    bool prescan = true;
  };

  TraceReader();
  ~TraceReader();
  TraceReader(const TraceReader &) = delete;
  TraceReader &operator=(const TraceReader &) = delete;

  // Both return false with status() kUnreadable and error() set when the
  // file is not a trace this reader can decode.
  bool open(const std::string &path, Options opts);
  bool open(const std::string &path) { return open(path, Options{}); }
  // The buffer must outlive the reader.
  bool open_buffer(const void *data, size_t size, std::string name, Options opts);
  bool open_buffer(const void *data, size_t size, std::string name = "<buffer>") {
    return open_buffer(data, size, std::move(name), Options{});
  }

  Item next() {
    if (in_block_ && cur_.p < cur_.end && decode_event())
      return Item::kEvent;
    return next_record();
  }

  // After next() yielded an event: steps over the rest of its block, counting
  // into `s` what an index needs instead of building each event (validated
  // as next() would). next() then goes on with the next record. False when
  // the block is malformed (status() and error() say where).
  bool skim_block(BlockSkim &s);

  // From here on, next() passes over events records unread (no
  // decompression, no checks of their contents) and appends each one's
  // offset to `offsets`; nullptr reads them again. For an index pass that
  // decodes the blocks elsewhere (on other threads): on a reader opened
  // with prescan, whose tables and clock are complete before the first
  // next(), the reader then ends as next() would leave it if every block
  // passed over is well formed. Where one is not, restart() and read again.
  void skip_events(std::vector<uint64_t> *offsets) { skipped_events_ = offsets; }
  bool prescanned() const { return prescanned_; }

  // Opens the same file (or buffer) again with the same options: the reader
  // is as it was right after the first open.
  bool restart();

  // The current item; valid until the next call to next().
  const Event &event() const { return ev_; }
  std::span<const ModuleEntry> record_modules() const { return rec_modules_; }
  std::span<const ThreadEntry> record_threads() const { return rec_threads_; }
  const MemoryMap &memory_map() const { return map_; }
  const EndRecord &end() const { return end_; }
  uint64_t record_offset() const { return rec_offset_; }
  uint32_t record_tid() const { return rec_tid_; }

  const std::string &name() const { return name_; }
  uint64_t file_size() const { return size_; }
  const TraceHeader &header() const { return header_; }
  bool has_end() const { return have_end_; }
  // From the prescan, before any next(): the file's last end record (the one
  // that counts) and the events its blocks hold by their headers (kTick
  // included), which is all a truncated trace can say without decoding.
  const std::optional<EndRecord> &final_end() const { return final_end_; }
  // Why the recorder stopped writing the trace before the process ended
  // (prescan, or once next() reached it); a trace without one that has no
  // end record was cut short for a reason it does not tell.
  const std::optional<StopRecord> &stopped() const { return stop_; }
  // The rules record, when the trace was recorded under rules (prescan).
  const std::optional<RulesRecord> &rules() const { return rules_; }
  // Every aborted transaction the trace records (prescan), and the lines
  // capacity aborts list; the current kHtmAborts record's entries.
  const std::vector<HtmAbort> &htm_aborts() const { return htm_aborts_; }
  std::span<const uint64_t> htm_lines(const HtmAbort &a) const {
    return std::span<const uint64_t>(htm_lines_).subspan(a.lines_first, a.lines_count);
  }
  std::span<const HtmAbort> record_htm_aborts() const {
    return std::span<const HtmAbort>(htm_aborts_)
        .subspan(rec_htm_first_, rec_htm_end_ - rec_htm_first_);
  }
  uint64_t block_event_count() const { return block_events_; }

  // Tables (the whole file's after a prescan).
  std::span<const uint64_t> stack(uint64_t id) const; // empty when unknown
  bool has_stack(uint64_t id) const { return stacks_.count(id) != 0; }
  const std::string *string(uint64_t id) const; // nullptr when unknown
  const std::string *thread_name(uint64_t tid) const;
  const std::vector<ModuleEntry> &modules() const { return modules_; }

  // Nanoseconds since the header's start pair (or the earliest clock pair).
  int64_t ns_since_start(uint64_t tsc) const {
    double ns = static_cast<double>(static_cast<int64_t>(tsc - origin_tsc_)) * ns_per_tick_;
    // Garbage TSCs must not make the conversion undefined behaviour.
    if (!(ns > -9.2e18 && ns < 9.2e18))
      return ns > 0 ? INT64_MAX : INT64_MIN;
    return static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(ns)) +
                                static_cast<uint64_t>(origin_ns_offset_));
  }
  double ticks_per_ns() const { return 1.0 / ns_per_tick_; }
  // False when no two clock pairs were >50 us apart and 1 tick = 1 ns is assumed.
  bool clock_calibrated() const { return calibrated_; }

  ReadStatus status() const { return status_; }
  bool fatal() const {
    return status_ == ReadStatus::kCorrupt || status_ == ReadStatus::kUnreadable;
  }
  bool partial() const { return status_ == ReadStatus::kTruncated; }
  const Diagnostic &error() const { return error_; } // why reading stopped early
  const std::vector<Diagnostic> &warnings() const { return warnings_; }
  uint64_t suppressed_warnings() const { return suppressed_warnings_; }

private:
  struct ClockPair {
    uint64_t tsc, ns;
  };
  struct StackSpan {
    uint64_t first, depth;
  };
  enum class Load : uint8_t { kOk, kEof, kStop };

  void reset();
  bool parse_header();
  const uint8_t *fetch(uint64_t offset, size_t n, std::vector<uint8_t> &scratch);
  uint64_t whole_record_after(uint64_t from, uint64_t n);
  Load read_record_header(uint64_t offset, trace::RecordHeader &h);
  bool load_payload(uint64_t offset, const trace::RecordHeader &h, trace::Cursor &out);
  Item next_record();
  bool decode_event();
  [[gnu::always_inline]] void decode_sizes(trace::Cursor &c, Event &e) const {
    uint64_t v = c.varint();
    e.size = v >> 1;
    e.usable =
        (v & 1) ? e.size + c.varint() : trace::predicted_usable(header_.usable_model, e.size);
  }
  bool decode_record(uint64_t offset, const trace::RecordHeader &h, trace::Cursor c,
                     bool add_to_tables, Item &item);
  bool decode_stacks(trace::Cursor c, bool add);
  bool decode_strings(trace::Cursor c, bool add);
  bool decode_modules(trace::Cursor c);
  bool decode_threads(trace::Cursor c);
  bool decode_memory_map(trace::Cursor c);
  bool decode_end(trace::Cursor c);
  bool decode_stop(trace::Cursor c);
  bool decode_rules(trace::Cursor c, bool add);
  bool decode_htm_aborts(trace::Cursor c, uint64_t offset, uint32_t tid, bool add);
  void prescan();
  void add_clock_pair(uint64_t tsc, uint64_t ns);
  void calibrate(bool final);

  void stop(ReadStatus s, uint64_t offset, std::string what);
  void truncated(uint64_t offset, std::string_view what, uint64_t need, uint64_t have);
  void warn(uint64_t offset, std::string what);
  bool event_error(std::string what);
  bool end_block();
  bool check_raw_block();

  // Source: a file read with pread, or a caller's buffer.
  int fd_ = -1;
  const uint8_t *mem_ = nullptr;
  uint64_t size_ = 0;
  std::string name_;
  std::vector<uint8_t> payload_scratch_, raw_scratch_;
  ZSTD_DCtx_s *dctx_ = nullptr;

  TraceHeader header_;
  uint64_t offset_ = 0;       // next record
  uint64_t tables_until_ = 0; // records before this offset are already in the tables
  bool done_ = false;
  bool have_end_ = false;

  // Current events block.
  bool in_block_ = false;
  trace::Cursor cur_{nullptr, nullptr};
  const uint8_t *block_begin_ = nullptr;
  uint64_t prev_ptr_ = 0;
  uint64_t tsc_ = 0;
  uint32_t event_index_ = 0;
  uint32_t block_count_ = 0; // events the block's header counts
  Event ev_;

  uint64_t rec_offset_ = 0;
  uint32_t rec_tid_ = 0;
  std::vector<ModuleEntry> rec_modules_;
  std::vector<ThreadEntry> rec_threads_;
  MemoryMap map_;
  EndRecord end_;
  std::optional<EndRecord> final_end_;
  std::optional<StopRecord> stop_;
  Options opts_;
  bool prescanned_ = false, from_buffer_ = false;
  std::vector<uint64_t> *skipped_events_ = nullptr;
  std::optional<RulesRecord> rules_;
  std::vector<HtmAbort> htm_aborts_;
  std::vector<uint64_t> htm_lines_;
  // Each kHtmAborts record's offset and its first entry in htm_aborts_; the
  // current record's entries.
  std::vector<std::pair<uint64_t, size_t>> htm_record_offsets_;
  size_t rec_htm_first_ = 0, rec_htm_end_ = 0;
  uint64_t block_events_ = 0;

  std::vector<uint64_t> frames_;
  std::unordered_map<uint64_t, StackSpan> stacks_;
  std::unordered_map<uint64_t, std::string> strings_;
  std::unordered_map<uint64_t, uint64_t> thread_names_; // tid -> string id
  std::vector<ModuleEntry> modules_;

  // Clock: the earliest and latest (tsc, ns) pairs seen.
  std::optional<ClockPair> clock_lo_, clock_hi_;
  uint64_t origin_tsc_ = 0;
  int64_t origin_ns_offset_ = 0;
  double ns_per_tick_ = 1.0;
  bool calibrated_ = false;
  bool clock_warned_ = false;

  ReadStatus status_ = ReadStatus::kOk;
  Diagnostic error_;
  std::vector<Diagnostic> warnings_;
  uint64_t suppressed_warnings_ = 0;
};

const char *event_name(const Event &e); // "alloc", "free", ..., "fork", "lost", "snapshot"

} // namespace memlayout::inspector
