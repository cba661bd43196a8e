#include "trace_reader.h"

#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

namespace memlayout::inspector {

static_assert(std::endian::native == std::endian::little,
              "traces are little-endian; this reader copies fields as they lie");

namespace {

using trace::Cursor;
using trace::RecordHeader;
using trace::RecordType;

constexpr size_t kMaxWarnings = 64;
// Clock pairs closer than this give a ratio too noisy to trust.
// clock_gettime and rdtsc read together agree to tens of ns: 50 us gives a
// rate good to a fraction of a percent, enough even for short programs.
constexpr uint64_t kMinClockSpanNs = 50'000;

template <class T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string hex(uint64_t v) {
  char buf[24];
  int n = std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return std::string(buf, static_cast<size_t>(n));
}

const char *record_type_name(uint8_t t) {
  switch (static_cast<RecordType>(t)) {
  case RecordType::kEvents:
    return "events";
  case RecordType::kStacks:
    return "stacks";
  case RecordType::kStrings:
    return "strings";
  case RecordType::kModules:
    return "modules";
  case RecordType::kMemoryMap:
    return "memory map";
  case RecordType::kThread:
    return "thread";
  case RecordType::kEnd:
    return "end";
  case RecordType::kRules:
    return "rules";
  case RecordType::kHtmAborts:
    return "htm aborts";
  case RecordType::kStop:
    return "stop";
  }
  return "unknown";
}

bool known_record_type(uint8_t t) {
  return t >= static_cast<uint8_t>(RecordType::kEvents) &&
         t <= static_cast<uint8_t>(RecordType::kStop);
}

std::string cut_nuls(const uint8_t *p, size_t n) {
  while (n > 0 && p[n - 1] == 0)
    --n;
  return std::string(reinterpret_cast<const char *>(p), n);
}

} // namespace

std::string stop_cause_text(const StopRecord &s) {
  switch (s.cause) {
  case trace::StopCause::kFileSizeLimit:
    return "the file size limit (RLIMIT_FSIZE, ulimit -f) of " + std::to_string(s.limit) +
           " bytes stopped the recorder";
  }
  return "the recorder stopped writing (cause " + std::to_string(static_cast<int>(s.cause)) + ")";
}

const char *event_name(const Event &e) {
  switch (e.kind) {
  case trace::EventKind::kAlloc:
    return "alloc";
  case trace::EventKind::kFree:
    return "free";
  case trace::EventKind::kRealloc:
    return "realloc";
  case trace::EventKind::kTick:
    return "tick";
  case trace::EventKind::kMark:
    return "mark";
  case trace::EventKind::kTag:
    return "tag";
  case trace::EventKind::kExt:
    switch (e.ext) {
    case trace::ExtKind::kFork:
      return "fork";
    case trace::ExtKind::kSnapshot:
      return "snapshot";
    case trace::ExtKind::kLost:
      return "lost";
    case trace::ExtKind::kFreeRange:
      return "free_range";
    }
    return "ext";
  }
  return "?";
}

TraceReader::TraceReader() = default;

TraceReader::~TraceReader() {
  if (fd_ >= 0)
    ::close(fd_);
  ZSTD_freeDCtx(dctx_);
}

// Makes the reader reusable for another file; keeps the zstd context and
// the buffers' capacity.
void TraceReader::reset() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  mem_ = nullptr;
  size_ = 0;
  name_.clear();
  header_ = {};
  offset_ = tables_until_ = 0;
  done_ = have_end_ = in_block_ = false;
  cur_ = Cursor{nullptr, nullptr};
  block_begin_ = nullptr;
  prev_ptr_ = tsc_ = 0;
  event_index_ = 0;
  ev_ = {};
  rec_offset_ = 0;
  rec_tid_ = 0;
  rec_modules_.clear();
  rec_threads_.clear();
  map_ = {};
  end_ = {};
  final_end_.reset();
  stop_.reset();
  rules_.reset();
  block_count_ = 0;
  block_events_ = 0;
  frames_.clear();
  stacks_.clear();
  strings_.clear();
  thread_names_.clear();
  modules_.clear();
  htm_aborts_.clear();
  htm_lines_.clear();
  htm_record_offsets_.clear();
  rec_htm_first_ = rec_htm_end_ = 0;
  clock_lo_.reset();
  clock_hi_.reset();
  origin_tsc_ = 0;
  origin_ns_offset_ = 0;
  ns_per_tick_ = 1.0;
  calibrated_ = clock_warned_ = false;
  status_ = ReadStatus::kOk;
  error_ = {};
  warnings_.clear();
  suppressed_warnings_ = 0;
  prescanned_ = from_buffer_ = false;
  skipped_events_ = nullptr;
}

// ---- Diagnostics ------------------------------------------------------------

void TraceReader::stop(ReadStatus s, uint64_t offset, std::string what) {
  if (done_ && status_ != ReadStatus::kOk)
    return; // keep the first reason
  done_ = true;
  in_block_ = false;
  status_ = s;
  error_.offset = offset;
  error_.message = name_ + ": offset " + std::to_string(offset) + ": " + what;
}

void TraceReader::truncated(uint64_t offset, std::string_view what, uint64_t need, uint64_t have) {
  stop(ReadStatus::kTruncated, offset, "");
  error_.message = name_ + ": truncated at offset " + std::to_string(offset) + ": " +
                   std::string(what) + " needs " + std::to_string(need) + " bytes, " +
                   std::to_string(have) + " available";
}

void TraceReader::warn(uint64_t offset, std::string what) {
  if (warnings_.size() >= kMaxWarnings) {
    ++suppressed_warnings_;
    return;
  }
  warnings_.push_back({offset, name_ + ": offset " + std::to_string(offset) + ": " + what});
}

// ---- Opening ----------------------------------------------------------------

bool TraceReader::restart() {
  std::string name = name_;
  if (from_buffer_)
    return open_buffer(mem_, size_, std::move(name), opts_);
  return open(name, opts_);
}

bool TraceReader::open(const std::string &path, Options opts) {
  reset();
  opts_ = opts;
  name_ = path;
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
  // waiting for a writer; it changes nothing for a regular file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    int err = errno;
    stop(ReadStatus::kUnreadable, 0, "");
    error_.message = path + ": cannot open: " + std::strerror(err);
    return false;
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    stop(ReadStatus::kUnreadable, 0, "");
    error_.message = path + ": not a regular file";
    return false;
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (!parse_header())
    return false;
  if (opts.prescan)
    prescan();
  prescanned_ = opts.prescan;
  return true;
}

bool TraceReader::open_buffer(const void *data, size_t size, std::string name, Options opts) {
  reset();
  opts_ = opts;
  from_buffer_ = true;
  name_ = std::move(name);
  mem_ = static_cast<const uint8_t *>(data);
  size_ = size;
  if (!mem_ && size_ > 0) {
    stop(ReadStatus::kUnreadable, 0, "no buffer");
    return false;
  }
  if (!parse_header())
    return false;
  if (opts.prescan)
    prescan();
  prescanned_ = opts.prescan;
  return true;
}

// Returns n bytes at offset (the caller checked they exist), or nullptr after
// stopping on an I/O error.
const uint8_t *TraceReader::fetch(uint64_t offset, size_t n, std::vector<uint8_t> &scratch) {
  if (mem_)
    return mem_ + offset;
  if (scratch.size() < n)
    scratch.resize(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd_, scratch.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      // The file shrank under us or the disk failed; either way the bytes are gone.
      stop(r == 0 ? ReadStatus::kTruncated : ReadStatus::kCorrupt, offset + got,
           std::string("read error: ") +
               (r == 0 ? "file shrank while reading" : std::strerror(errno)));
      return nullptr;
    }
    got += static_cast<size_t>(r);
  }
  return scratch.data();
}

bool TraceReader::parse_header() {
  std::vector<uint8_t> scratch;
  if (size_ == 0) {
    stop(ReadStatus::kUnreadable, 0, "empty file, not a memlayout trace");
    return false;
  }
  size_t probe = static_cast<size_t>(std::min<uint64_t>(size_, sizeof(trace::FileHeader)));
  const uint8_t *p = fetch(0, probe, scratch);
  if (!p) {
    status_ = ReadStatus::kUnreadable;
    return false;
  }
  if (probe < sizeof trace::kFileMagic ||
      std::memcmp(p, trace::kFileMagic, sizeof trace::kFileMagic) != 0) {
    stop(ReadStatus::kUnreadable, 0, "not a memlayout trace (bad magic)");
    return false;
  }
  if (probe < sizeof(trace::FileHeader)) {
    truncated(probe, "file header", sizeof(trace::FileHeader), probe);
    status_ = ReadStatus::kUnreadable;
    return false;
  }
  trace::FileHeader fh;
  std::memcpy(&fh, p, sizeof fh);
  header_.version = fh.version;
  header_.header_bytes = fh.header_bytes;
  if (fh.version != trace::kTraceVersion) {
    stop(ReadStatus::kUnreadable, 8,
         "unsupported trace version " + std::to_string(fh.version) + " (this memlayout reads " +
             std::to_string(trace::kTraceVersion) + ")");
    return false;
  }
  if (fh.header_bytes < sizeof(trace::FileHeader)) {
    stop(ReadStatus::kUnreadable, 10,
         "header_bytes " + std::to_string(fh.header_bytes) + " out of range (at least " +
             std::to_string(sizeof(trace::FileHeader)) + ")");
    return false;
  }
  if (fh.header_bytes > size_) {
    truncated(size_, "file header", fh.header_bytes, size_);
    status_ = ReadStatus::kUnreadable;
    return false;
  }
  p = fetch(0, fh.header_bytes, scratch);
  if (!p) {
    status_ = ReadStatus::kUnreadable;
    return false;
  }
  uint64_t off = sizeof(trace::FileHeader);
  bool has_usable_model = false;
  while (off + sizeof(trace::HeaderField) <= fh.header_bytes) {
    trace::HeaderField f = load<trace::HeaderField>(p + off);
    uint64_t value_off = off + sizeof f;
    if (value_off + f.length > fh.header_bytes) {
      stop(ReadStatus::kUnreadable, off,
           "header field " + std::to_string(f.tag) + " (" + std::to_string(f.length) +
               " bytes) overruns the header (" + std::to_string(fh.header_bytes) + " bytes)");
      return false;
    }
    const uint8_t *v = p + value_off;
    auto u32 = [&](std::optional<uint32_t> &dst) {
      if (f.length == 4)
        dst = load<uint32_t>(v);
      else
        warn(off, "header field " + std::to_string(f.tag) + " has " + std::to_string(f.length) +
                      " bytes, expected 4; ignored");
    };
    auto u64 = [&](std::optional<uint64_t> &dst) {
      if (f.length == 8)
        dst = load<uint64_t>(v);
      else
        warn(off, "header field " + std::to_string(f.tag) + " has " + std::to_string(f.length) +
                      " bytes, expected 8; ignored");
    };
    using trace::HeaderTag;
    switch (static_cast<HeaderTag>(f.tag)) {
    case HeaderTag::kPid:
      u32(header_.pid);
      break;
    case HeaderTag::kParentPid:
      u32(header_.parent_pid);
      break;
    case HeaderTag::kStartRealtimeNs:
      u64(header_.start_realtime_ns);
      break;
    case HeaderTag::kStartTsc:
      u64(header_.start_tsc);
      break;
    case HeaderTag::kStartMonotonicNs:
      u64(header_.start_monotonic_ns);
      break;
    case HeaderTag::kPageSize:
      u32(header_.page_size);
      // Page numbers, the memory map and every page figure rest on it.
      if (header_.page_size && (*header_.page_size < 4096 || *header_.page_size > (1u << 30) ||
                                (*header_.page_size & (*header_.page_size - 1)))) {
        stop(ReadStatus::kUnreadable, off,
             "header field page_size holds " + std::to_string(*header_.page_size) +
                 ", not a page size (a power of two from 4096): damaged");
        return false;
      }
      break;
    case HeaderTag::kAllocator:
      header_.allocator = cut_nuls(v, f.length);
      break;
    case HeaderTag::kUsableModel: {
      std::optional<uint32_t> m;
      u32(m);
      // Usable sizes of every allocation are decoded by this model: one it
      // does not know would give every object a wrong size class.
      if (m && *m > static_cast<uint32_t>(trace::UsableModel::kJemalloc)) {
        stop(ReadStatus::kUnreadable, off,
             "header field usable_model holds " + std::to_string(*m) +
                 ", not a model this version knows (0-2): damaged, or written by a newer "
                 "memlayout");
        return false;
      }
      if (m)
        header_.usable_model = static_cast<trace::UsableModel>(*m);
      has_usable_model = m.has_value();
      break;
    }
    case HeaderTag::kUnwind:
      header_.unwind = cut_nuls(v, f.length);
      break;
    case HeaderTag::kStackDepth:
      u32(header_.stack_depth);
      // Only described (the stacks record holds the frames): kept, doubted.
      if (header_.stack_depth &&
          (*header_.stack_depth < 1 || *header_.stack_depth > trace::kMaxStackDepth))
        warn(off, "header field stack_depth holds " + std::to_string(*header_.stack_depth) +
                      ", not 1 to " + std::to_string(trace::kMaxStackDepth) + ": damaged?");
      break;
    case HeaderTag::kExecutable:
      header_.executable = cut_nuls(v, f.length);
      break;
    case HeaderTag::kCommandLine: {
      std::string all = cut_nuls(v, f.length);
      size_t start = 0;
      for (size_t i = 0; i <= all.size(); ++i)
        if (i == all.size() || all[i] == '\0') {
          header_.command_line.push_back(all.substr(start, i - start));
          start = i + 1;
        }
      break;
    }
    case HeaderTag::kHostname:
      header_.hostname = cut_nuls(v, f.length);
      break;
    case HeaderTag::kKernel:
      header_.kernel = cut_nuls(v, f.length);
      break;
    case HeaderTag::kTimestampPeriod:
      u32(header_.timestamp_period);
      break;
    case HeaderTag::kSwitchWatch:
      u32(header_.switch_watch);
      break;
    case HeaderTag::kPointerBits:
      u32(header_.pointer_bits);
      if (header_.pointer_bits && (*header_.pointer_bits < 32 || *header_.pointer_bits > 64)) {
        stop(ReadStatus::kUnreadable, off,
             "header field pointer_bits holds " + std::to_string(*header_.pointer_bits) +
                 ", not 32 to 64: damaged");
        return false;
      }
      break;
    default:
      ++header_.unknown_fields; // a newer writer's field: skipping it is the versioning rule
      break;
    }
    off = value_off + f.length;
  }
  if (off != fh.header_bytes)
    warn(off, "ignoring " + std::to_string(fh.header_bytes - off) + " trailing header bytes");
  // The recorder always writes it; without it every usable size the events
  // leave to the model reads as the requested size (a damaged field's tag
  // reads as a newer writer's field, which is skipped).
  if (!has_usable_model)
    warn(sizeof(trace::FileHeader),
         "the header has no usable_model field (damaged?): usable sizes the events do not "
         "spell out are taken as the requested sizes, and size classes may be wrong");
  offset_ = fh.header_bytes;
  tables_until_ = offset_;
  if (header_.start_tsc && header_.start_monotonic_ns)
    add_clock_pair(*header_.start_tsc, *header_.start_monotonic_ns);
  calibrate(false);
  return true;
}

// ---- Records ----------------------------------------------------------------

TraceReader::Load TraceReader::read_record_header(uint64_t offset, RecordHeader &h) {
  if (offset >= size_)
    return Load::kEof;
  uint64_t left = size_ - offset;
  if (left < sizeof h) {
    truncated(offset, "record header", sizeof h, left);
    return Load::kStop;
  }
  const uint8_t *p = fetch(offset, sizeof h, payload_scratch_);
  if (!p)
    return Load::kStop;
  std::memcpy(&h, p, sizeof h);
  if (h.magic != trace::kRecordMagic) {
    stop(ReadStatus::kCorrupt, offset,
         "record magic mismatch (found " + hex(h.magic) + ", expected " + hex(trace::kRecordMagic) +
             "): not a record boundary");
    return Load::kStop;
  }
  if (h.payload_bytes > trace::kMaxRecordBytes || h.raw_bytes > trace::kMaxRecordBytes) {
    stop(ReadStatus::kCorrupt, offset,
         std::string(record_type_name(h.type)) + " record claims " +
             std::to_string(std::max(h.payload_bytes, h.raw_bytes)) +
             " bytes, more than the limit of " + std::to_string(trace::kMaxRecordBytes));
    return Load::kStop;
  }
  uint64_t need = sizeof h + uint64_t{h.payload_bytes};
  if (need > left) {
    // Past the end: a trace cut short, or a length field damaged in the
    // middle of a whole one. A whole record close after it tells them apart.
    if (uint64_t next = whole_record_after(offset + sizeof h, left - sizeof h)) {
      stop(ReadStatus::kCorrupt, offset,
           std::string(record_type_name(h.type)) + " record claims " +
               std::to_string(h.payload_bytes) +
               " bytes, past the end of the file, where a whole record begins at offset " +
               std::to_string(next) + ": its length is damaged");
      return Load::kStop;
    }
    truncated(offset, std::string(record_type_name(h.type)) + " record", need, left);
    return Load::kStop;
  }
  return Load::kOk;
}

// The offset of the first record header in [from, from + n) (its first
// MiB) whose record ends within the file, or 0.
uint64_t TraceReader::whole_record_after(uint64_t from, uint64_t n) {
  std::vector<uint8_t> scratch;
  size_t len = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 20));
  const uint8_t *p = len >= sizeof(RecordHeader) ? fetch(from, len, scratch) : nullptr;
  if (!p)
    return 0;
  uint32_t magic = trace::kRecordMagic;
  for (size_t at = 0; at + sizeof(RecordHeader) <= len; ++at) {
    const void *hit = memmem(p + at, len - at, &magic, sizeof magic);
    if (!hit)
      return 0;
    at = static_cast<size_t>(static_cast<const uint8_t *>(hit) - p);
    if (at + sizeof(RecordHeader) > len)
      return 0;
    RecordHeader h;
    std::memcpy(&h, p + at, sizeof h);
    if (known_record_type(h.type) && h.payload_bytes <= trace::kMaxRecordBytes &&
        from + at + sizeof h + h.payload_bytes <= size_)
      return from + at;
  }
  return 0;
}

// Points `out` at the record's decompressed payload.
bool TraceReader::load_payload(uint64_t offset, const RecordHeader &h, Cursor &out) {
  uint64_t at = offset + sizeof h;
  const uint8_t *src = h.payload_bytes ? fetch(at, h.payload_bytes, payload_scratch_) : nullptr;
  if (h.payload_bytes && !src)
    return false;
  if (!(h.flags & trace::kRecordCompressed) || (h.payload_bytes == 0 && h.raw_bytes == 0)) {
    if (h.raw_bytes != h.payload_bytes) {
      stop(ReadStatus::kCorrupt, offset,
           std::string(record_type_name(h.type)) + " record: raw_bytes " +
               std::to_string(h.raw_bytes) + " differs from payload_bytes " +
               std::to_string(h.payload_bytes) + " in an uncompressed record");
      return false;
    }
    out = Cursor{src, src + h.payload_bytes};
    return true;
  }
  std::string where = std::string(record_type_name(h.type)) + " record: zstd: ";
  unsigned long long content = ZSTD_getFrameContentSize(src, h.payload_bytes);
  if (content == ZSTD_CONTENTSIZE_ERROR) {
    stop(ReadStatus::kCorrupt, offset, where + "payload is not a zstd frame");
    return false;
  }
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != h.raw_bytes) {
    stop(ReadStatus::kCorrupt, offset,
         where + "frame holds " + std::to_string(content) + " bytes, record says raw_bytes " +
             std::to_string(h.raw_bytes));
    return false;
  }
  size_t frame = ZSTD_findFrameCompressedSize(src, h.payload_bytes);
  if (ZSTD_isError(frame) || frame != h.payload_bytes) {
    stop(ReadStatus::kCorrupt, offset,
         where + (ZSTD_isError(frame) ? std::string(ZSTD_getErrorName(frame))
                                      : "payload holds more than one frame"));
    return false;
  }
  if (!dctx_ && !(dctx_ = ZSTD_createDCtx())) {
    stop(ReadStatus::kCorrupt, offset, where + "out of memory");
    return false;
  }
  if (raw_scratch_.size() < h.raw_bytes)
    raw_scratch_.resize(h.raw_bytes);
  size_t n = ZSTD_decompressDCtx(dctx_, raw_scratch_.data(), h.raw_bytes, src, h.payload_bytes);
  if (ZSTD_isError(n) || n != h.raw_bytes) {
    stop(ReadStatus::kCorrupt, offset,
         where + (ZSTD_isError(n) ? std::string(ZSTD_getErrorName(n))
                                  : "decompressed to " + std::to_string(n) + " bytes, expected " +
                                        std::to_string(h.raw_bytes)));
    return false;
  }
  out = Cursor{raw_scratch_.data(), raw_scratch_.data() + n};
  return true;
}

Item TraceReader::next_record() {
  if (in_block_ && cur_.p >= cur_.end && !end_block()) // next() read the block to its end
    return Item::kDone;
  in_block_ = false;
  while (!done_) {
    RecordHeader h;
    uint64_t offset = offset_;
    Load l = read_record_header(offset, h);
    if (l == Load::kStop)
      return Item::kDone;
    if (l == Load::kEof) {
      if (!have_end_) {
        stop(ReadStatus::kTruncated, offset, "");
        error_.message =
            name_ + ": truncated at offset " + std::to_string(offset) + ": no end record; " +
            (stop_ ? stop_cause_text(*stop_) + ": what the program did after it is not in the trace"
                   : std::string("the process did not finish writing the trace (killed?, or it "
                                 "ended by the exit_group system call itself, as Go's os.Exit "
                                 "does: its last unwritten events are lost)"));
      }
      done_ = true;
      return Item::kDone;
    }
    offset_ = offset + sizeof h + h.payload_bytes;
    if (!known_record_type(h.type)) {
      warn(offset, "skipping record of unknown type " + std::to_string(h.type));
      continue;
    }
    if (skipped_events_ && h.type == static_cast<uint8_t>(RecordType::kEvents)) {
      skipped_events_->push_back(offset);
      continue;
    }
    Cursor c{nullptr, nullptr};
    if (!load_payload(offset, h, c))
      return Item::kDone;
    rec_offset_ = offset;
    rec_tid_ = h.tid;
    Item item = Item::kDone;
    if (!decode_record(offset, h, c, offset >= tables_until_, item))
      return Item::kDone;
    if (item == Item::kEvent) {
      if (in_block_ && decode_event())
        return Item::kEvent;
      if (done_)
        return Item::kDone;
      continue; // an empty block, or one with only ticks
    }
    return item;
  }
  return Item::kDone;
}

// Decodes a non-event record into the current-item fields (and the tables
// when `add`); for kEvents sets up the block for decode_event().
bool TraceReader::decode_record(uint64_t offset, const RecordHeader &h, Cursor c, bool add,
                                Item &item) {
  bool ok = true;
  switch (static_cast<RecordType>(h.type)) {
  case RecordType::kEvents: {
    item = Item::kEvent;
    block_count_ = h.count;
    event_index_ = 0;
    if (c.at_end()) { // an empty block carries no clock either
      rec_offset_ = offset;
      return end_block();
    }
    uint64_t first_tsc = c.varint();
    uint64_t clock_tsc = c.varint();
    uint64_t clock_ns = c.varint();
    if (c.bad) {
      stop(ReadStatus::kCorrupt, offset, "events record: block preamble overruns the payload");
      return false;
    }
    if (add) {
      add_clock_pair(clock_tsc, clock_ns);
      calibrate(false);
    }
    cur_ = c;
    block_begin_ = c.p;
    prev_ptr_ = 0;
    tsc_ = first_tsc;
    event_index_ = 0;
    ev_.tid = h.tid;
    in_block_ = true;
    return (h.flags & trace::kRecordCompressed) || check_raw_block();
  }
  case RecordType::kStacks:
    item = Item::kStacks;
    ok = decode_stacks(c, add);
    break;
  case RecordType::kStrings:
    item = Item::kStrings;
    ok = decode_strings(c, add);
    break;
  case RecordType::kModules:
    item = Item::kModules;
    ok = decode_modules(c);
    if (ok && add)
      modules_.insert(modules_.end(), rec_modules_.begin(), rec_modules_.end());
    break;
  case RecordType::kThread:
    item = Item::kThreads;
    ok = decode_threads(c);
    if (ok && add)
      for (const ThreadEntry &t : rec_threads_) {
        if (t.name_id != 0)
          thread_names_[t.tid] = t.name_id;
        if (t.what < trace::ThreadEvent::kStart || t.what > trace::ThreadEvent::kName)
          warn(offset, "thread record of unknown kind " + std::to_string(static_cast<int>(t.what)) +
                           " (thread " + std::to_string(t.tid) + "): damaged?");
      }
    break;
  case RecordType::kMemoryMap:
    item = Item::kMemoryMap;
    ok = decode_memory_map(c);
    break;
  case RecordType::kRules:
    item = Item::kRules;
    ok = decode_rules(c, add);
    break;
  case RecordType::kHtmAborts:
    item = Item::kHtmAborts;
    ok = decode_htm_aborts(c, offset, h.tid, add);
    break;
  case RecordType::kStop:
    item = Item::kStop;
    ok = decode_stop(c);
    break;
  case RecordType::kEnd:
    item = Item::kEnd;
    ok = decode_end(c);
    if (ok) {
      have_end_ = true;
      if (add) {
        add_clock_pair(end_.tsc, end_.monotonic_ns);
        calibrate(false);
      }
    }
    break;
  }
  if (!ok)
    stop(ReadStatus::kCorrupt, offset,
         std::string(record_type_name(h.type)) +
             " record: malformed payload (an entry overruns its " + std::to_string(h.raw_bytes) +
             " bytes)");
  return ok;
}

bool TraceReader::event_error(std::string what) {
  uint64_t at = static_cast<uint64_t>(cur_.p - block_begin_);
  stop(ReadStatus::kCorrupt, rec_offset_,
       "events record, event " + std::to_string(event_index_ - 1) + " (payload byte " +
           std::to_string(at) + "): " + what);
  return false;
}

// The hot path: decodes the next event of the block into ev_, folding ticks.
// Returns false at the block's end or on an error (then done_ is set).
bool TraceReader::decode_event() {
  using trace::EventKind;
  Cursor &c = cur_;
  Event &e = ev_;
  while (c.p < c.end) {
    uint8_t head = *c.p++;
    ++event_index_;
    EventKind kind = trace::head_kind(head);
    trace::Api api = trace::head_api(head);
    e.kind = kind;
    e.api = api;
    e.index = event_index_ - 1;
    e.old_ptr = e.size = e.usable = e.alignment = e.stack_id = e.string_id = e.ext_value = 0;
    switch (kind) {
    case EventKind::kAlloc:
      e.ptr = prev_ptr_ + static_cast<uint64_t>(c.svarint());
      prev_ptr_ = e.ptr;
      decode_sizes(c, e);
      e.stack_id = c.varint();
      // The api decides whether an alignment follows: an unknown one would
      // desynchronise everything after it.
      if (api >= trace::Api::kCount)
        return event_error("alloc with unknown api " + std::to_string(static_cast<int>(api)));
      if (trace::api_is_aligned(api)) {
        uint64_t log2 = c.varint();
        if (log2 >= 64)
          return event_error("alignment exponent " + std::to_string(log2) + " out of range");
        e.alignment = uint64_t{1} << log2;
      }
      break;
    case EventKind::kFree:
      e.ptr = prev_ptr_ + static_cast<uint64_t>(c.svarint());
      prev_ptr_ = e.ptr;
      break;
    case EventKind::kRealloc:
      e.old_ptr = prev_ptr_ + static_cast<uint64_t>(c.svarint());
      e.ptr = e.old_ptr + static_cast<uint64_t>(c.svarint());
      prev_ptr_ = e.ptr;
      decode_sizes(c, e);
      e.stack_id = c.varint();
      break;
    case EventKind::kTick:
      tsc_ += c.varint();
      if (c.bad)
        return event_error("tick overruns the payload");
      continue;
    case EventKind::kMark:
      e.ptr = 0;
      e.string_id = c.varint();
      break;
    case EventKind::kTag:
      e.ptr = prev_ptr_ + static_cast<uint64_t>(c.svarint());
      prev_ptr_ = e.ptr;
      e.string_id = c.varint();
      break;
    case EventKind::kExt: {
      e.ptr = 0;
      uint64_t ext = c.varint();
      if (!trace::is_known_ext(ext)) {
        if (c.bad)
          return event_error("ext event overruns the payload");
        return event_error("unknown ext event kind " + std::to_string(ext));
      }
      e.ext = static_cast<trace::ExtKind>(ext);
      if (e.ext == trace::ExtKind::kFreeRange) {
        e.ptr = c.varint();
        e.size = c.varint();
        if (!c.bad && e.ptr + e.size < e.ptr)
          return event_error("free range past the end of the address space");
      } else {
        e.ext_value = c.varint();
      }
      break;
    }
    default:
      return event_error("unknown event kind " + std::to_string(static_cast<int>(kind)));
    }
    if (c.bad)
      return event_error(std::string(event_name(e)) + " event overruns the payload");
    e.tsc = tsc_;
    return true;
  }
  end_block();
  return false;
}

// At a block's end: the events decoded must be the ones its header counts.
// Without that, a damaged byte of a block stored raw (no checksum) shifts
// the fields after it into other plausible events, and the report is wrong
// without a word.
bool TraceReader::end_block() {
  in_block_ = false;
  if (event_index_ == block_count_)
    return true;
  stop(ReadStatus::kCorrupt, rec_offset_,
       "events record: its header counts " + std::to_string(block_count_) +
           " events, its payload holds " + std::to_string(event_index_) + " (damaged)");
  return false;
}

// A block stored raw has no checksum (zstd checks the others before any of
// their events is read): it is walked once before its first event is
// yielded, so that damage its end reveals (a count that does not match, an
// event overrunning the payload) stops the reader before any of its events,
// not after it has handed them on as if they were sound.
bool TraceReader::check_raw_block() {
  const Cursor cur = cur_;
  const uint64_t prev = prev_ptr_, tsc = tsc_;
  BlockSkim ignored;
  if (!skim_block(ignored))
    return false; // stopped, with the error at the record
  cur_ = cur;
  prev_ptr_ = prev;
  tsc_ = tsc;
  event_index_ = 0;
  in_block_ = true;
  return true;
}

bool TraceReader::skim_block(BlockSkim &s) {
  using trace::EventKind;
  Cursor &c = cur_;
  uint64_t prev = prev_ptr_;
  while (in_block_ && c.p < c.end) {
    uint8_t head = *c.p++;
    ++event_index_;
    EventKind kind = trace::head_kind(head);
    trace::Api api = trace::head_api(head);
    switch (kind) {
    case EventKind::kAlloc: {
      prev += static_cast<uint64_t>(c.svarint());
      s.net += prev != 0;
      if (c.varint() & 1)
        c.skip_varint(); // usable - size
      c.skip_varint();   // stack id
      if (api >= trace::Api::kCount)
        return event_error("alloc with unknown api " + std::to_string(static_cast<int>(api)));
      if (trace::api_is_aligned(api)) {
        uint64_t log2 = c.varint();
        if (log2 >= 64)
          return event_error("alignment exponent " + std::to_string(log2) + " out of range");
      }
      break;
    }
    case EventKind::kFree:
      prev += static_cast<uint64_t>(c.svarint());
      s.net -= prev != 0;
      break;
    case EventKind::kRealloc: {
      uint64_t old = prev + static_cast<uint64_t>(c.svarint());
      prev = old + static_cast<uint64_t>(c.svarint());
      uint64_t sizes = c.varint();
      if (sizes & 1)
        c.skip_varint();
      c.skip_varint();
      if (prev != 0 || sizes >> 1 == 0)
        s.net += int32_t{prev != 0} - int32_t{old != 0};
      break;
    }
    case EventKind::kTick:
      tsc_ += c.varint();
      if (c.bad)
        return event_error("tick overruns the payload");
      continue;
    case EventKind::kMark:
      s.marks.emplace_back(c.varint(), tsc_);
      break;
    case EventKind::kTag:
      prev += static_cast<uint64_t>(c.svarint());
      c.skip_varint();
      s.tags = true;
      break;
    case EventKind::kExt: {
      uint64_t ext = c.varint();
      if (!trace::is_known_ext(ext)) {
        if (c.bad)
          return event_error("ext event overruns the payload");
        return event_error("unknown ext event kind " + std::to_string(ext));
      }
      s.lost |= static_cast<trace::ExtKind>(ext) == trace::ExtKind::kLost;
      for (unsigned i = 0; i < trace::ext_fields(static_cast<trace::ExtKind>(ext)); ++i)
        c.skip_varint();
      break;
    }
    default:
      return event_error("unknown event kind " + std::to_string(static_cast<int>(kind)));
    }
    if (c.bad) {
      Event e;
      e.kind = kind;
      return event_error(std::string(event_name(e)) + " event overruns the payload");
    }
    ++s.events;
    s.max_prefix = std::max(s.max_prefix, s.net);
  }
  prev_ptr_ = prev;
  return end_block();
}

// ---- Tables -----------------------------------------------------------------

bool TraceReader::decode_stacks(Cursor c, bool add) {
  while (!c.at_end()) {
    uint64_t id = c.varint();
    uint64_t depth = c.varint();
    if (c.bad || depth > c.left()) // every frame takes at least a byte
      return false;
    if (!add) {
      for (uint64_t i = 0; i < depth; ++i)
        c.varint();
      if (c.bad)
        return false;
      continue;
    }
    size_t first = frames_.size();
    for (uint64_t i = 0; i < depth; ++i)
      frames_.push_back(c.varint());
    if (c.bad) {
      frames_.resize(first);
      return false;
    }
    if (!stacks_.emplace(id, StackSpan{first, depth}).second)
      frames_.resize(first); // ids are unique; a repeat is a resend of the same stack
  }
  return true;
}

bool TraceReader::decode_strings(Cursor c, bool add) {
  while (!c.at_end()) {
    uint64_t id = c.varint();
    uint64_t len = c.varint();
    if (c.bad)
      return false;
    const uint8_t *s = c.bytes(len);
    if (c.bad)
      return false;
    if (add)
      strings_.emplace(id, std::string(reinterpret_cast<const char *>(s), len));
  }
  return true;
}

bool TraceReader::decode_modules(Cursor c) {
  rec_modules_.clear();
  while (!c.at_end()) {
    ModuleEntry m;
    m.what = static_cast<trace::ModuleEvent>(c.u8());
    m.tsc = c.varint();
    m.load_bias = c.varint();
    uint64_t len = c.varint();
    const uint8_t *s = c.bad ? nullptr : c.bytes(len);
    if (c.bad)
      return false;
    m.path.assign(reinterpret_cast<const char *>(s), len);
    len = c.varint();
    s = c.bad ? nullptr : c.bytes(len);
    if (c.bad)
      return false;
    m.build_id.assign(reinterpret_cast<const char *>(s), len);
    uint64_t nseg = c.varint();
    if (c.bad || nseg > c.left() / 3) // a segment takes at least three bytes
      return false;
    m.segments.resize(nseg);
    for (ModuleSegment &seg : m.segments) {
      seg.vaddr = c.varint();
      seg.memsz = c.varint();
      seg.flags = c.u8();
    }
    if (c.bad)
      return false;
    rec_modules_.push_back(std::move(m));
  }
  return true;
}

bool TraceReader::decode_threads(Cursor c) {
  rec_threads_.clear();
  while (!c.at_end()) {
    ThreadEntry t;
    t.what = static_cast<trace::ThreadEvent>(c.u8());
    t.tsc = c.varint();
    t.tid = c.varint();
    t.name_id = c.varint();
    if (c.bad)
      return false;
    rec_threads_.push_back(t);
  }
  return true;
}

bool TraceReader::decode_memory_map(Cursor c) {
  map_.regions.clear();
  map_.runs.clear();
  map_.snapshot_id = c.varint();
  map_.tsc = c.varint();
  map_.flags = c.u8();
  uint64_t nregions = c.varint();
  if (c.bad || nregions > c.left() / 6) // a region takes at least six bytes
    return false;
  map_.regions.resize(nregions);
  for (MapRegion &r : map_.regions) {
    r.start = c.varint();
    r.end = c.varint();
    r.prot = c.u8();
    r.kind = static_cast<trace::RegionKind>(c.u8());
    r.anon_huge_kib = c.varint();
    uint64_t nruns = c.varint();
    if (c.bad || nruns > c.left() / 3 || map_.runs.size() + nruns > UINT32_MAX)
      return false;
    r.first_run = static_cast<uint32_t>(map_.runs.size());
    r.nruns = static_cast<uint32_t>(nruns);
    uint64_t page = 0;
    for (uint64_t i = 0; i < nruns; ++i) {
      PageRun run;
      run.first_page = page + c.varint();
      run.npages = c.varint();
      run.pfn = c.varint();
      page = run.first_page + run.npages;
      r.resident_pages += run.npages;
      map_.runs.push_back(run);
    }
  }
  return !c.bad && c.at_end();
}

// A cause this reader does not know is kept: the trace still stopped there.
bool TraceReader::decode_stop(Cursor c) {
  StopRecord s;
  s.cause = static_cast<trace::StopCause>(c.u8());
  s.limit = c.varint();
  s.offset = c.varint();
  if (c.bad)
    return false;
  stop_ = s;
  return true;
}

bool TraceReader::decode_end(Cursor c) {
  EndRecord e;
  uint8_t reason = c.u8();
  if (reason < static_cast<uint8_t>(trace::EndReason::kExit) ||
      reason > static_cast<uint8_t>(trace::EndReason::kSignal))
    return false;
  e.reason = static_cast<trace::EndReason>(reason);
  e.tsc = c.varint();
  e.monotonic_ns = c.varint();
  uint64_t status = c.varint();
  if (status != UINT64_MAX)
    e.exit_status = status;
  e.events = c.varint();
  e.allocs = c.varint();
  e.frees = c.varint();
  e.bytes_allocated = c.varint();
  e.lost_events = c.varint();
  e.write_errors = c.varint();
  if (c.bad)
    return false;
  end_ = e;
  return true;
}

bool TraceReader::decode_rules(Cursor c, bool add) {
  RulesRecord r;
  auto text = [&](std::string &out) {
    uint64_t len = c.varint();
    const uint8_t *s = c.bad ? nullptr : c.bytes(len);
    if (!c.bad)
      out.assign(reinterpret_cast<const char *>(s), len);
    return !c.bad;
  };
  uint64_t n = c.varint();
  if (c.bad || n > c.left())
    return false;
  r.rules.resize(n);
  for (auto &rule : r.rules) {
    if (!text(rule.text))
      return false;
    rule.allocations = c.varint();
    rule.bytes = c.varint();
  }
  n = c.varint();
  if (c.bad || n > c.left())
    return false;
  r.wrappers.resize(n);
  for (auto &w : r.wrappers) {
    w.not_wrapper = c.u8() != 0;
    if (!text(w.function))
      return false;
  }
  if (c.bad || !c.at_end())
    return false;
  (void)add; // the same record whether prescanned or reached by next()
  rules_ = std::move(r);
  return true;
}

// Kept whole-file, like the tables: the prescan gathers them (add), next()
// points at the ones it already has.
bool TraceReader::decode_htm_aborts(Cursor c, uint64_t offset, uint32_t tid, bool add) {
  if (!add) {
    // Reached again by next() after the prescan: find this record's entries.
    rec_htm_first_ = rec_htm_end_ = htm_aborts_.size();
    for (size_t i = 0; i < htm_record_offsets_.size(); ++i)
      if (htm_record_offsets_[i].first == offset) {
        rec_htm_first_ = htm_record_offsets_[i].second;
        rec_htm_end_ = i + 1 < htm_record_offsets_.size() ? htm_record_offsets_[i + 1].second
                                                          : htm_aborts_.size();
      }
    return true;
  }
  size_t first = htm_aborts_.size(), first_line = htm_lines_.size();
  while (!c.at_end()) {
    HtmAbort a;
    uint8_t cause = c.u8();
    if (cause > static_cast<uint8_t>(trace::HtmCause::kCommits))
      c.bad = true;
    a.cause = static_cast<trace::HtmCause>(cause);
    a.flags = c.u8();
    a.tid = tid;
    a.region_id = c.varint();
    a.line = c.varint();
    a.read_mask = c.varint();
    a.write_mask = c.varint();
    a.other_mask = c.varint();
    auto u32 = [&] {
      uint64_t v = c.varint();
      if (v > UINT32_MAX)
        c.bad = true;
      return static_cast<uint32_t>(v);
    };
    a.set = u32();
    a.l1_sets = u32();
    a.l1_ways = u32();
    a.tx_lines = u32();
    a.tx_written_lines = u32();
    a.tx_sets = u32();
    a.lines_count = u32();
    if (a.lines_count > trace::kMaxHtmSetLines || a.lines_count > c.left())
      c.bad = true;
    if (c.bad)
      break;
    a.lines_first = static_cast<uint32_t>(htm_lines_.size());
    for (uint32_t i = 0; i < a.lines_count; ++i)
      htm_lines_.push_back(c.varint());
    if (c.bad)
      break;
    htm_aborts_.push_back(a);
  }
  if (c.bad) {
    htm_aborts_.resize(first);
    htm_lines_.resize(first_line);
    return false;
  }
  htm_record_offsets_.emplace_back(offset, first);
  rec_htm_first_ = first;
  rec_htm_end_ = htm_aborts_.size();
  return true;
}

std::span<const uint64_t> TraceReader::stack(uint64_t id) const {
  auto it = stacks_.find(id);
  if (it == stacks_.end())
    return {};
  return std::span<const uint64_t>(frames_).subspan(it->second.first, it->second.depth);
}

const std::string *TraceReader::string(uint64_t id) const {
  auto it = strings_.find(id);
  return it == strings_.end() ? nullptr : &it->second;
}

const std::string *TraceReader::thread_name(uint64_t tid) const {
  auto it = thread_names_.find(tid);
  return it == thread_names_.end() ? nullptr : string(it->second);
}

// ---- Prescan ----------------------------------------------------------------

// Walks the record headers once, decoding only the table records, so events
// can be resolved and timed from the start. Event payloads are skipped without
// decompression; only when the trace has no kEnd is the last block's clock
// pair read. A problem found here is left for next() to report where it lies.
void TraceReader::prescan() {
  uint64_t start = offset_;
  std::vector<uint64_t> event_records; // the last few, newest last
  uint64_t off = start;
  bool saw_end = false;
  // Records after the last end record (nothing is written after a process
  // ends), and an end record after one that ended the process (only a
  // failed exec goes on): damage, or two traces joined.
  uint64_t after_end = 0, first_after_end = 0, end_at = 0;
  // Event records of threads no thread record ever started: a damaged tid
  // moves its events to a thread that never ran.
  std::unordered_set<uint64_t> started;
  std::unordered_map<uint64_t, uint64_t> first_events_of; // tid -> offset
  for (;;) {
    RecordHeader h;
    if (read_record_header(off, h) != Load::kOk)
      break;
    uint64_t at = off;
    off += sizeof h + h.payload_bytes;
    // After an exec's end a failed exec goes on recording; a thread's exit
    // record may follow the end (its TLS destructors ran after it).
    if (saw_end && final_end_->reason != trace::EndReason::kExec &&
        h.type != static_cast<uint8_t>(RecordType::kThread) && after_end++ == 0)
      first_after_end = at;
    if (h.type == static_cast<uint8_t>(RecordType::kEvents)) {
      block_events_ += h.count;
      first_events_of.emplace(h.tid, at);
      if (h.raw_bytes > 0) {
        if (event_records.size() == 4)
          event_records.erase(event_records.begin());
        event_records.push_back(at);
      }
      tables_until_ = off;
      continue;
    }
    if (!known_record_type(h.type)) {
      tables_until_ = off;
      continue;
    }
    Cursor c{nullptr, nullptr};
    Item item = Item::kDone;
    if (!load_payload(at, h, c) || !decode_record(at, h, c, true, item))
      break;
    if (h.type == static_cast<uint8_t>(RecordType::kThread))
      for (const ThreadEntry &t : rec_threads_)
        started.insert(t.tid);
    if (h.type == static_cast<uint8_t>(RecordType::kEnd)) {
      if (saw_end && final_end_->reason != trace::EndReason::kExec)
        warn(at, "a second end record, after the one at offset " + std::to_string(end_at) +
                     " that ended the process: damaged, or two traces joined");
      saw_end = true;
      final_end_ = end_;
      end_at = at;
      after_end = 0;
    }
    tables_until_ = off;
  }
  // A forked child's recording goes on in the thread that forked, now the
  // child's main thread (its tid the child's pid), with no start record.
  if (header_.pid)
    started.insert(*header_.pid);
  std::vector<std::pair<uint64_t, uint64_t>> strays; // offset, tid
  for (const auto &[tid, at] : first_events_of)
    if (!started.count(tid))
      strays.emplace_back(at, tid);
  std::sort(strays.begin(), strays.end());
  for (const auto &[at, tid] : strays)
    warn(at, "events of thread " + std::to_string(tid) +
                 ", which no thread record started: a damaged thread id?");
  if (after_end)
    warn(first_after_end, std::to_string(after_end) + " record" + (after_end > 1 ? "s" : "") +
                              " after the end record at offset " + std::to_string(end_at) +
                              ", which ended the process: damaged, or written after it");
  // Without the end pair, the latest block's pair is the widest we can get.
  if (!saw_end) {
    done_ = false;
    status_ = ReadStatus::kOk;
    for (auto it = event_records.rbegin(); it != event_records.rend(); ++it) {
      RecordHeader h;
      Cursor c{nullptr, nullptr};
      if (read_record_header(*it, h) != Load::kOk || !load_payload(*it, h, c))
        break;
      c.varint();
      uint64_t clock_tsc = c.varint();
      uint64_t clock_ns = c.varint();
      if (!c.bad) {
        add_clock_pair(clock_tsc, clock_ns);
        break;
      }
    }
  }
  // next() starts over and reports any problem at its place.
  done_ = false;
  status_ = ReadStatus::kOk;
  error_ = {};
  in_block_ = false;
  have_end_ = false;
  rec_modules_.clear();
  rec_threads_.clear();
  map_ = {};
  end_ = {};
  offset_ = start;
  calibrate(true);
}

// ---- Clock ------------------------------------------------------------------

void TraceReader::add_clock_pair(uint64_t tsc, uint64_t ns) {
  if (!clock_lo_ || ns < clock_lo_->ns)
    clock_lo_ = ClockPair{tsc, ns};
  if (!clock_hi_ || ns > clock_hi_->ns)
    clock_hi_ = ClockPair{tsc, ns};
}

void TraceReader::calibrate(bool final) {
  calibrated_ = false;
  ns_per_tick_ = 1.0;
  if (clock_lo_ && clock_hi_ && clock_hi_->ns - clock_lo_->ns > kMinClockSpanNs &&
      clock_hi_->tsc > clock_lo_->tsc) {
    ns_per_tick_ = static_cast<double>(clock_hi_->ns - clock_lo_->ns) /
                   static_cast<double>(clock_hi_->tsc - clock_lo_->tsc);
    calibrated_ = true;
  }
  if (header_.start_tsc) {
    origin_tsc_ = *header_.start_tsc;
    origin_ns_offset_ = 0;
  } else if (clock_lo_) {
    origin_tsc_ = clock_lo_->tsc;
    origin_ns_offset_ = header_.start_monotonic_ns
                            ? static_cast<int64_t>(clock_lo_->ns - *header_.start_monotonic_ns)
                            : 0;
  }
  if (final && !calibrated_ && !clock_warned_) {
    clock_warned_ = true;
    warn(0, "no two clock samples are more than 50 us apart; assuming 1 TSC tick = 1 ns");
  }
}

} // namespace memlayout::inspector
