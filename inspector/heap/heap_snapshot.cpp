#include "heap_snapshot.h"

#include "replay_heaps.h"
#include "trace_reader.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace memlayout::inspector {

namespace {

using trace::EventKind;

// A free that another thread's allocation of the same address must follow is
// searched for this far past the allocation's timestamp: a thread samples its
// clock every 1 to 128 events (fewer the sparser they come), so its stamp can
// lag its real time by that many events' worth; 1 ms covers threads that
// slept between two allocations.
constexpr double kCausalityWindowNs = 1e6;
// At most this many events of one thread are decoded ahead while searching.
constexpr size_t kMaxLookahead = size_t{1} << 16;

// ---- Pass 1: where each thread's blocks lie ----------------------------------

struct BlockRef {
  uint64_t offset = 0;    // of the record
  uint64_t first_tsc = 0; // of its first event
  uint32_t events = 0;    // events the indexing read yielded from it
  int32_t net = 0;        // objects it creates less those it ends
  int32_t max_prefix = 0; // most of `net` reached within it
};

struct ThreadBlocks {
  uint32_t tid = 0;
  std::vector<BlockRef> blocks; // in file order, which is the thread's order
};

struct MapRef {
  uint64_t offset = 0, tsc = 0;
};

struct TraceIndex {
  std::vector<ThreadBlocks> threads; // by first appearance in the file
  std::vector<MapRef> maps;
  std::vector<uint64_t> mark_ids; // distinct, by first appearance
  std::vector<uint64_t> mark_tsc; // stamp of each one's first occurrence
  bool lost_events = false;       // the recorder dropped some (kLost)
  bool has_tags = false;
};

// Most objects live at once, until events stamped `until`, in any merge of
// the threads' blocks by their first stamps: each thread counts its earlier
// blocks' net and the most its current block reaches. A sizing hint for the
// replay (unknown frees and double allocations can make the real count
// exceed it; the containers then grow).
uint64_t live_bound(const TraceIndex &ix, uint64_t until = UINT64_MAX) {
  struct Start {
    uint64_t tsc;
    uint32_t thread, block;
  };
  std::vector<Start> starts;
  for (uint32_t t = 0; t < ix.threads.size(); ++t)
    for (uint32_t b = 0; b < ix.threads[t].blocks.size(); ++b)
      if (ix.threads[t].blocks[b].first_tsc <= until)
        starts.push_back({ix.threads[t].blocks[b].first_tsc, t, b});
  std::stable_sort(starts.begin(), starts.end(),
                   [](const Start &a, const Start &b) { return a.tsc < b.tsc; });
  std::vector<int64_t> done(ix.threads.size()), active(ix.threads.size());
  int64_t total = 0, best = 0;
  for (const Start &s : starts) {
    const std::vector<BlockRef> &blocks = ix.threads[s.thread].blocks;
    if (s.block > 0)
      done[s.thread] += blocks[s.block - 1].net;
    int64_t now = done[s.thread] + blocks[s.block].max_prefix;
    total += now - active[s.thread];
    active[s.thread] = now;
    best = std::max(best, total);
  }
  return static_cast<uint64_t>(best);
}

// One events block as the index counts it.
struct BlockCount {
  BlockRef ref;
  uint32_t tid = 0;
  bool tags = false, lost = false;
  std::vector<std::pair<uint64_t, uint64_t>> marks; // (string id, tsc) in order
};

// Counts the block at `offset` whose first event `first` the reader `rd`
// has just yielded, skimming the rest. False when the block is malformed
// (rd then stops there).
bool count_block(TraceReader &rd, const Event &first, uint64_t offset, BlockCount &c) {
  BlockRef &b = c.ref;
  b = {offset, first.tsc, 1, 0, 0};
  c.tid = first.tid;
  switch (first.kind) {
  case EventKind::kAlloc:
    b.net += first.ptr != 0;
    break;
  case EventKind::kFree:
    b.net -= first.ptr != 0;
    break;
  case EventKind::kRealloc:
    if (first.ptr != 0 || first.size == 0)
      b.net += int32_t{first.ptr != 0} - int32_t{first.old_ptr != 0};
    break;
  case EventKind::kExt:
    c.lost |= first.ext == trace::ExtKind::kLost;
    break;
  case EventKind::kTag:
    c.tags = true;
    break;
  case EventKind::kMark:
    c.marks.push_back({first.string_id, first.tsc});
    break;
  default:
    break;
  }
  b.max_prefix = std::max(b.max_prefix, b.net);
  // The rest of the block: counted without building each event.
  BlockSkim skim;
  skim.net = b.net;
  skim.max_prefix = b.max_prefix;
  bool ok = rd.skim_block(skim);
  b.events += skim.events;
  b.net = skim.net;
  b.max_prefix = skim.max_prefix;
  c.tags |= skim.tags;
  c.lost |= skim.lost;
  c.marks.insert(c.marks.end(), skim.marks.begin(), skim.marks.end());
  return ok;
}

// Builds a TraceIndex from blocks given in file order.
class IndexBuilder {
public:
  void map(uint64_t offset, uint64_t tsc) { ix_.maps.push_back({offset, tsc}); }
  void block(BlockCount &&c) {
    auto [pos, fresh] = ordinal_.emplace(c.tid, static_cast<uint32_t>(ix_.threads.size()));
    if (fresh)
      ix_.threads.push_back({c.tid, {}});
    ix_.threads[pos->second].blocks.push_back(c.ref);
    ix_.has_tags |= c.tags;
    ix_.lost_events |= c.lost;
    for (auto [id, tsc] : c.marks)
      if (std::find(ix_.mark_ids.begin(), ix_.mark_ids.end(), id) == ix_.mark_ids.end()) {
        ix_.mark_ids.push_back(id);
        ix_.mark_tsc.push_back(tsc);
      }
  }
  TraceIndex take() { return std::move(ix_); }

private:
  TraceIndex ix_;
  std::unordered_map<uint32_t, uint32_t> ordinal_; // tid -> index in ix_.threads
};

TraceIndex index_trace(TraceReader &r) {
  IndexBuilder ix;
  for (Item it; (it = r.next()) != Item::kDone;) {
    if (it == Item::kMemoryMap)
      ix.map(r.record_offset(), r.memory_map().tsc);
    if (it != Item::kEvent)
      continue;
    // Each event next() yields here is a block's first: the rest is skimmed.
    BlockCount c;
    count_block(r, r.event(), r.record_offset(), c); // on a malformed block next() reports the end
    ix.block(std::move(c));
  }
  return ix.take();
}

// ---- Random access to records ------------------------------------------------

// Hands one record to a TraceReader on its own, behind a copy of the file
// header, so any block can be decoded when the merge needs it.
class RecordSource {
public:
  explicit RecordSource(std::span<const uint8_t> bytes) : mem_(bytes) {}
  RecordSource(const RecordSource &) = delete;
  RecordSource &operator=(const RecordSource &) = delete;
  ~RecordSource() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  bool open_file(const std::string &path, std::string &error) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      error = path + ": cannot reopen: " + std::strerror(errno);
      return false;
    }
    return true;
  }

  bool init(uint16_t header_bytes, std::string &error) {
    header_.resize(header_bytes);
    if (!read(0, header_.size(), header_.data())) {
      error = "cannot re-read the trace header";
      return false;
    }
    return true;
  }

  // `out` gets header + the record at `offset`.
  bool load(uint64_t offset, std::vector<uint8_t> &out) {
    trace::RecordHeader h;
    if (!read(offset, sizeof h, reinterpret_cast<uint8_t *>(&h)))
      return false;
    size_t total = sizeof h + h.payload_bytes;
    out.resize(header_.size() + total);
    std::memcpy(out.data(), header_.data(), header_.size());
    return read(offset, total, out.data() + header_.size());
  }

private:
  bool read(uint64_t offset, size_t n, uint8_t *dst) {
    if (fd_ < 0) {
      if (offset > mem_.size() || n > mem_.size() - offset)
        return false;
      std::memcpy(dst, mem_.data() + offset, n);
      return true;
    }
    size_t got = 0;
    while (got < n) {
      ssize_t k = ::pread(fd_, dst + got, n - got, static_cast<off_t>(offset + got));
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        return false;
      got += static_cast<size_t>(k);
    }
    return true;
  }

  std::span<const uint8_t> mem_;
  int fd_ = -1;
  std::vector<uint8_t> header_;
};

struct BlockSlot {
  std::vector<uint8_t> bytes;
  TraceReader reader;
};

// The index on two threads: `r` passes over the events records unread
// (TraceReader::skip_events) and both threads count the blocks, each from
// its own copy. Where that might not end as the sequential pass does (a
// reader without prescan, a record or block that is not well formed), `r`
// is restarted and nothing is returned: the sequential pass then reports
// the problem at its place.
std::optional<TraceIndex> index_on_two_threads(TraceReader &r, RecordSource &src) {
  if (!r.prescanned() || std::thread::hardware_concurrency() < 2)
    return std::nullopt;
  IndexBuilder ix;
  std::vector<uint64_t> offsets;
  r.skip_events(&offsets);
  for (Item it; (it = r.next()) != Item::kDone;)
    if (it == Item::kMemoryMap)
      ix.map(r.record_offset(), r.memory_map().tsc);
  r.skip_events(nullptr);
  if (r.status() != ReadStatus::kOk) { // truncated or damaged: the one-thread pass says where
    r.restart();
    return std::nullopt;
  }
  std::vector<BlockCount> counts(offsets.size());
  std::vector<uint8_t> has_events(offsets.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      BlockSlot slot;
      TraceReader::Options opts;
      opts.prescan = false;
      for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next++) < offsets.size();) {
        TraceReader &rd = slot.reader;
        bool ok = src.load(offsets[i], slot.bytes) &&
                  rd.open_buffer(slot.bytes.data(), slot.bytes.size(), r.name(), opts);
        if (ok && rd.next() == Item::kEvent) {
          has_events[i] = 1;
          ok = count_block(rd, rd.event(), offsets[i], counts[i]);
        } else if (ok) { // no events: fine if it stopped only where its one record ends
          ok = rd.status() == ReadStatus::kTruncated && rd.error().offset == slot.bytes.size();
        }
        if (!ok)
          failed = true;
      }
    } catch (const std::bad_alloc &) { // the one-thread pass needs less
      failed = true;
    }
  };
  try {
    std::thread other(work);
    work();
    other.join();
  } catch (const std::system_error &) { // no second thread
    work();
  }
  if (failed) {
    r.restart();
    return std::nullopt;
  }
  for (size_t i = 0; i < offsets.size(); ++i)
    if (has_events[i])
      ix.block(std::move(counts[i]));
  return ix.take();
}

// What the replay needs of an event, copied out of the decoder. The copy
// reads field by field (volatile): the decoder has just written them with
// 8-byte stores, and a vectorised 16-byte load of two of them cannot be
// forwarded from the store buffer, which stalled the replay more than the
// decoding cost.
struct Step {
  uint64_t tsc = 0, ptr = 0, old_ptr = 0, size = 0, usable = 0, stack_id = 0, string_id = 0;
  uint32_t tid = 0;
  EventKind kind = EventKind::kAlloc;
  trace::Api api = trace::Api::kMalloc;
  uint8_t align_log2 = 0;  // of an aligned API's alignment; in what would be padding
  trace::ExtKind ext = {}; // kExt only; the last byte of the line

  uint64_t alignment() const { return trace::api_is_aligned(api) ? uint64_t{1} << align_log2 : 0; }

  static Step of(const Event &decoded) {
    const volatile Event &e = decoded;
    Step s;
    s.kind = e.kind;
    s.api = e.api;
    s.tid = e.tid;
    s.tsc = e.tsc;
    s.ptr = e.ptr;
    s.old_ptr = e.old_ptr;
    s.size = e.size;
    s.usable = e.usable;
    s.stack_id = e.stack_id;
    s.string_id = e.string_id;
    s.ext = e.ext;
    uint64_t alignment = e.alignment;
    s.align_log2 = alignment ? static_cast<uint8_t>(__builtin_ctzll(alignment)) : 0;
    return s;
  }
};
static_assert(sizeof(Step) == 64, "a Step per cache line");

// A queue of decoded events: a ring that grows by doubling. std::deque
// allocates a chunk per five Events, which cost more than the decoding.
class EventRing {
public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  // Events it holds before push_back moves them (and every reference to one).
  size_t capacity() const { return buf_.size(); }
  const Step &front() const { return buf_[head_]; }
  const Step &operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --n_;
  }
  void push_back(const Step &e) {
    if (n_ == buf_.size())
      grow();
    buf_[(head_ + n_) & (buf_.size() - 1)] = e;
    ++n_;
  }
  void erase(size_t i) { // rare: a look-ahead took an event out
    for (; i + 1 < n_; ++i)
      at(i) = at(i + 1);
    --n_;
  }

private:
  Step &at(size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  void grow() {
    // Twice the recorder's longest sampling period: the next sample fits.
    std::vector<Step> bigger(std::max<size_t>(256, buf_.size() * 2));
    for (size_t i = 0; i < n_; ++i)
      bigger[i] = at(i);
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<Step> buf_;
  size_t head_ = 0, n_ = 0;
};

// ---- Decoding on a second core -----------------------------------------------

// A block's events, decoded whole.
struct DecodedBlock {
  std::vector<Step> steps;
  bool ok = false; // false: the block could not be re-read
};

// Decodes whole blocks on a second thread, in the order the merge opens
// them (first stamp, then thread), at most kAhead blocks ahead of it. The
// replay spends most of its time waiting on its heap's cache misses, and
// the decoding (a third of its work) then runs beside it. A block the merge
// needs before the decoder got to it (a look-ahead for a free opens blocks
// early) the merge decodes itself. A decoded block takes 64 bytes per event
// (a full one about 1 MB) and each thread has one open, so only traces with
// few threads are decoded this way; the others stream each block (Merger).
class BlockDecoder {
public:
  static constexpr size_t kAhead = 4;
  static constexpr size_t kMaxThreads = 32;

  static bool worthwhile(const TraceIndex &ix) {
    return ix.threads.size() <= kMaxThreads && std::thread::hardware_concurrency() > 1;
  }

  BlockDecoder(const TraceIndex &ix, RecordSource &src, const std::string &name)
      : ix_(ix), src_(src), name_(name) {
    for (uint32_t t = 0; t < ix.threads.size(); ++t) {
      first_.push_back(static_cast<uint32_t>(refs_.size()));
      for (uint32_t b = 0; b < ix.threads[t].blocks.size(); ++b)
        refs_.push_back({t, b});
    }
    blocks_.assign(refs_.size(), {});
    order_.resize(refs_.size());
    for (uint32_t i = 0; i < order_.size(); ++i)
      order_[i] = i;
    std::stable_sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
      uint64_t ta = first_tsc(a), tb = first_tsc(b);
      return ta != tb ? ta < tb : refs_[a].thread < refs_[b].thread;
    });
    worker_ = std::thread([this] { run(); });
  }
  BlockDecoder(const BlockDecoder &) = delete;
  BlockDecoder &operator=(const BlockDecoder &) = delete;
  ~BlockDecoder() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    to_worker_.notify_all();
    worker_.join();
  }

  // Thread t's block b, decoded; give_back() it when done.
  DecodedBlock *take(uint32_t t, uint32_t b) {
    uint32_t id = first_[t] + b;
    std::unique_lock lk(mu_);
    to_merge_.wait(lk, [&] { return blocks_[id].state != State::kDecoding; });
    if (blocks_[id].state == State::kUntouched) {
      blocks_[id].state = State::kTaken;
      DecodedBlock *d = spare();
      lk.unlock();
      decode(id, *d, own_slot_);
      return d;
    }
    blocks_[id].state = State::kTaken;
    --ready_;
    DecodedBlock *d = blocks_[id].decoded;
    lk.unlock();
    to_worker_.notify_one();
    return d;
  }

  void give_back(DecodedBlock *d) {
    std::lock_guard lk(mu_);
    spares_.push_back(d);
  }

private:
  enum class State : uint8_t { kUntouched, kDecoding, kReady, kTaken };
  struct Ref {
    uint32_t thread, block;
  };
  struct Slot {
    State state = State::kUntouched;
    DecodedBlock *decoded = nullptr;
  };

  uint64_t first_tsc(uint32_t id) const {
    return ix_.threads[refs_[id].thread].blocks[refs_[id].block].first_tsc;
  }

  DecodedBlock *spare() { // under mu_
    if (spares_.empty()) {
      all_.push_back(std::make_unique<DecodedBlock>());
      return all_.back().get();
    }
    DecodedBlock *d = spares_.back();
    spares_.pop_back();
    return d;
  }

  void decode(uint32_t id, DecodedBlock &d, BlockSlot &slot) {
    const BlockRef &b = ix_.threads[refs_[id].thread].blocks[refs_[id].block];
    d.steps.clear();
    TraceReader::Options opts;
    opts.prescan = false;
    d.ok = src_.load(b.offset, slot.bytes) &&
           slot.reader.open_buffer(slot.bytes.data(), slot.bytes.size(), name_, opts);
    if (!d.ok)
      return;
    d.steps.reserve(b.events);
    for (uint32_t left = b.events; left > 0 && slot.reader.next() == Item::kEvent; --left)
      d.steps.push_back(Step::of(slot.reader.event()));
  }

  void run() {
    BlockSlot slot;
    for (uint32_t id : order_) {
      DecodedBlock *d;
      {
        std::unique_lock lk(mu_);
        to_worker_.wait(lk, [&] { return stop_ || ready_ < kAhead; });
        if (stop_)
          return;
        if (blocks_[id].state != State::kUntouched)
          continue;
        blocks_[id].state = State::kDecoding;
        d = spare();
      }
      try {
        decode(id, *d, slot);
      } catch (...) { // out of memory: the merge decodes what is left itself
        std::lock_guard lk(mu_);
        blocks_[id].state = State::kUntouched;
        spares_.push_back(d);
        stop_ = true;
        to_merge_.notify_all();
        return;
      }
      {
        std::lock_guard lk(mu_);
        blocks_[id].decoded = d;
        blocks_[id].state = State::kReady;
        ++ready_;
      }
      to_merge_.notify_all();
    }
  }

  const TraceIndex &ix_;
  RecordSource &src_;
  const std::string &name_;
  std::vector<Ref> refs_;       // by block id (threads in order, their blocks in order)
  std::vector<uint32_t> first_; // a thread's first block id
  std::vector<uint32_t> order_; // ids in the order the merge opens them
  std::vector<std::unique_ptr<DecodedBlock>> all_;
  BlockSlot own_slot_; // the merge's, for blocks it decodes itself

  std::mutex mu_; // guards what follows
  std::condition_variable to_worker_, to_merge_;
  std::vector<Slot> blocks_;
  std::vector<DecodedBlock *> spares_;
  size_t ready_ = 0; // decoded, not yet taken
  bool stop_ = false;
  std::thread worker_;
};

// ---- The k-way merge ---------------------------------------------------------

// One thread's events in order: `ahead` (decoded, their table slots
// prefetched), then the rest of the open block, then its later blocks.
struct Source {
  uint32_t ordinal = 0;
  const std::vector<BlockRef> *blocks = nullptr;
  size_t next_block = 0;
  BlockSlot *slot = nullptr;
  uint32_t left = 0;               // events still to take from the open block
  DecodedBlock *decoded = nullptr; // the open block, when a BlockDecoder decoded it
  size_t decoded_pos = 0;
  EventRing ahead;

  bool ready() const { return !ahead.empty(); }
  const Step &head() const { return ahead.front(); }
};

// Yields events of all threads in (TSC, thread ordinal) order; within a
// thread, in recorded order. Deterministic, so two replays see one order.
class Merger {
public:
  // Events are decoded this far ahead of their use: a random heap's hash
  // slots miss the caches, and prefetching them overlaps the misses.
  static constexpr size_t kDecodeAhead = 32;

  // `table`, when given, is the live set whose lines are prefetched.
  // `decode_thread`: decode blocks on a second thread where that is worthwhile.
  Merger(const TraceIndex &ix, RecordSource &src, std::string name, const AddrTable *table,
         bool decode_thread)
      : src_(src), name_(std::move(name)), table_(table) {
    if (decode_thread && BlockDecoder::worthwhile(ix)) {
      try {
        decoder_ = std::make_unique<BlockDecoder>(ix, src_, name_);
      } catch (const std::system_error &) { // no thread: decoded here, block by block
      }
    }
    sources_.resize(ix.threads.size());
    for (size_t i = 0; i < sources_.size(); ++i) {
      sources_[i].ordinal = static_cast<uint32_t>(i);
      sources_[i].blocks = &ix.threads[i].blocks;
      if (!ix.threads[i].blocks.empty())
        push(sources_[i]);
    }
  }

  // The next event, valid until the following call; nullptr at the end or
  // on a read error (error() non-empty).
  const Step *next() {
    if (cur_) {
      Source &s = *cur_;
      cur_ = nullptr;
      s.ahead.pop_front();
      // Keep draining one thread while it stays ahead of all others: the
      // common case of runs of events with one timestamp costs no heap work.
      if (top_up(s) && (heap_.empty() || precedes(s, heap_.front()))) {
        cur_ = &s;
        return &s.head();
      }
      if (!exhausted(s))
        push(s);
    }
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      Key k = heap_.back();
      heap_.pop_back();
      Source &s = sources_[k.ordinal];
      if (!top_up(s)) {
        if (!open_block(s))
          return nullptr;
        top_up(s);
        if (!exhausted(s))
          push(s);
        continue;
      }
      if (s.head().tsc != k.tsc) { // a look-ahead took its head: requeue by the new one
        push(s);
        continue;
      }
      cur_ = &s;
      return &s.head();
    }
    return nullptr;
  }

  const std::string &error() const { return error_; }

  // A stamp the current event (next()'s) cannot have happened after: the
  // thread's next sample, which it took after the event. A thread preempted
  // between a sample and its events carries the older stamp into them, by as
  // much as it waited (tens of milliseconds with more threads than CPUs).
  // 0 when the thread's next sample is not within what its ring holds
  // without moving: the caller holds a reference to the current event.
  uint64_t current_stamp_bound() {
    if (!cur_)
      return 0;
    Source &s = *cur_;
    const uint64_t at = s.head().tsc;
    for (size_t i = 1;; ++i) {
      if (i == s.ahead.size() && (i == s.ahead.capacity() || !extend(s, UINT64_MAX)))
        return 0;
      if (s.ahead[i].tsc > at)
        return s.ahead[i].tsc;
    }
  }

  // Causality: a free is recorded before the real free, so when an address
  // comes back from an allocation while still live, its pending free by
  // another thread really happened first even if its stamp is not earlier.
  // Takes the earliest such free (or realloc away from addr) within the
  // window out of its thread, with that thread's earlier tags of addr (which
  // named the old object). Returns false when there is none.
  bool take_free(uint64_t addr, uint64_t limit_tsc, std::vector<Step> &out) {
    Source *best = nullptr;
    size_t best_i = 0;
    for (Source &o : sources_) {
      if (&o == cur_ || exhausted(o))
        continue;
      for (size_t i = 0;; ++i) {
        if (i == o.ahead.size() && (i >= kMaxLookahead || !extend(o, limit_tsc)))
          break;
        const Step &e = o.ahead[i];
        if (e.tsc > limit_tsc)
          break;
        bool frees = (e.kind == EventKind::kFree && e.ptr == addr) ||
                     (e.kind == EventKind::kRealloc && e.old_ptr == addr && e.ptr != addr);
        if (frees) {
          if (!best || e.tsc < best->ahead[best_i].tsc) {
            best = &o;
            best_i = i;
          }
          break;
        }
        // This thread gets the address itself first: its later free is its own.
        if ((e.kind == EventKind::kAlloc || e.kind == EventKind::kRealloc) && e.ptr == addr)
          break;
      }
    }
    if (!best)
      return false;
    EventRing &q = best->ahead;
    for (size_t i = 0; i < best_i;) {
      if (q[i].kind == EventKind::kTag && q[i].ptr == addr) {
        out.push_back(q[i]);
        q.erase(i);
        --best_i;
      } else {
        ++i;
      }
    }
    out.push_back(q[best_i]);
    q.erase(best_i);
    return true;
  }

private:
  struct Key {
    uint64_t tsc;
    uint32_t ordinal;
  };
  struct Later {
    bool operator()(const Key &a, const Key &b) const {
      return a.tsc != b.tsc ? a.tsc > b.tsc : a.ordinal > b.ordinal;
    }
  };

  static bool precedes(const Source &s, const Key &k) {
    uint64_t t = s.head().tsc;
    return t != k.tsc ? t < k.tsc : s.ordinal < k.ordinal;
  }

  bool exhausted(const Source &s) const {
    return !s.ready() && !s.slot && !s.decoded && s.next_block == s.blocks->size();
  }

  // Ready with the head the thread has decoded, or else its unopened next
  // block's first stamp (a lower bound: ticks may precede its first event).
  void push(Source &s) {
    uint64_t tsc = s.ready() ? s.head().tsc : (*s.blocks)[s.next_block].first_tsc;
    heap_.push_back({tsc, s.ordinal});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // Decodes one event of the open block into `ahead`; releases a finished block.
  bool decode_one(Source &s) {
    if (s.decoded) {
      if (s.decoded_pos < s.decoded->steps.size()) {
        ahead(s, s.decoded->steps[s.decoded_pos++]);
        return true;
      }
      decoder_->give_back(s.decoded);
      s.decoded = nullptr;
      return false;
    }
    if (!s.slot)
      return false;
    if (s.left > 0 && s.slot->reader.next() == Item::kEvent) {
      --s.left;
      ahead(s, Step::of(s.slot->reader.event()));
      return true;
    }
    free_.push_back(s.slot);
    s.slot = nullptr;
    return false;
  }

  void ahead(Source &s, const Step &e) {
    s.ahead.push_back(e);
    if (table_)
      table_->prefetch(e.kind == EventKind::kRealloc ? e.old_ptr : e.ptr);
  }

  // Keeps kDecodeAhead events decoded; false when the thread has none ready.
  bool top_up(Source &s) {
    while (s.ahead.size() < kDecodeAhead && decode_one(s)) {
    }
    return s.ready();
  }

  bool open_block(Source &s) {
    if (s.next_block == s.blocks->size())
      return true;
    const BlockRef &b = (*s.blocks)[s.next_block++];
    if (decoder_) {
      DecodedBlock *d = decoder_->take(s.ordinal, static_cast<uint32_t>(s.next_block - 1));
      if (!d->ok) {
        decoder_->give_back(d);
        error_ = reread_error(b.offset);
        return false;
      }
      s.decoded = d;
      s.decoded_pos = 0;
      return true;
    }
    if (free_.empty()) {
      pool_.push_back(std::make_unique<BlockSlot>());
      free_.push_back(pool_.back().get());
    }
    BlockSlot *slot = free_.back();
    free_.pop_back();
    TraceReader::Options opts;
    opts.prescan = false;
    if (!src_.load(b.offset, slot->bytes) ||
        !slot->reader.open_buffer(slot->bytes.data(), slot->bytes.size(), name_, opts)) {
      error_ = reread_error(b.offset);
      free_.push_back(slot);
      return false;
    }
    s.slot = slot;
    s.left = b.events;
    return true;
  }

  std::string reread_error(uint64_t offset) const {
    return name_ + ": offset " + std::to_string(offset) +
           ": cannot re-read an events record the first reading decoded";
  }

  // Decodes one more event of the thread into `ahead`, opening its next
  // block when that starts within the limit.
  bool extend(Source &s, uint64_t limit_tsc) {
    for (;;) {
      if (decode_one(s))
        return true;
      if (s.next_block == s.blocks->size() || (*s.blocks)[s.next_block].first_tsc > limit_tsc)
        return false;
      if (!open_block(s))
        return false;
    }
  }

  RecordSource &src_;
  std::string name_;
  const AddrTable *table_;
  std::vector<Source> sources_;
  std::vector<Key> heap_;
  Source *cur_ = nullptr;
  std::vector<std::unique_ptr<BlockSlot>> pool_;
  std::vector<BlockSlot *> free_;
  std::string error_;
  std::unique_ptr<BlockDecoder> decoder_; // last: its thread stops before the rest goes
};

// ---- The replay --------------------------------------------------------------

struct ReplayStop {
  uint64_t at_seq = UINT64_MAX;   // stop right after this event
  std::vector<uint64_t> mark_ids; // or right after the first of these marks
};

struct ReplayResult {
  bool stopped = false;     // reached the stop
  uint64_t seq = 0;         // events applied
  uint64_t last_tsc = 0;    // stamp of the last event applied
  uint64_t heap_events = 0; // allocs, frees and reallocs applied
  uint64_t unknown_frees = 0, double_allocs = 0;
  uint64_t max_count = 0; // most objects live at once
  // Peak of live requested bytes (first moment it was reached).
  bool has_peak = false;
  uint64_t peak_bytes = 0, peak_seq = 0, peak_tsc = 0, peak_max_count = 0;
  uint64_t stop_max_count = 0; // max_count when the stop was reached
  // The counters as they stood at the peak.
  uint64_t peak_heap_events = 0, peak_unknown_frees = 0, peak_double_allocs = 0;
  // The peak came after a whole event of the merged order, not inside an
  // allocation that pulled a free forward (where an object's seq does not
  // say whether it was inserted before the peak).
  bool peak_exact = false;
};

// Which replay, for progress reports: the events it will go through at most
// and the callback (may be empty).
struct ReplayProgress {
  const SnapshotProgress *report = nullptr;
  const char *stage = "";
  uint64_t total = 1;
};

template <class Heap> class Replay {
public:
  Replay(Heap &heap, Merger &m, const ReplayStop &stop, uint64_t window_ticks,
         ReplayProgress progress = {},
         const std::function<void(const AppliedEvent &)> *observer = nullptr)
      : heap_(heap), m_(m), stop_(stop), window_(window_ticks), progress_(progress),
        observer_(observer && *observer ? observer : nullptr) {}

  ReplayResult run() {
    constexpr uint64_t kReportEvery = uint64_t{1} << 20;
    bool report = progress_.report && *progress_.report;
    while (!res_.stopped) {
      const Step *e = m_.next();
      if (!e)
        break;
      step(*e, true);
      if (report && (res_.seq & (kReportEvery - 1)) == 0)
        (*progress_.report)(
            progress_.stage,
            std::min(1.0, static_cast<double>(res_.seq) / static_cast<double>(progress_.total)));
    }
    if (res_.stopped && stop_alloc_.ptr)
      name_stop_object();
    return res_;
  }

private:
  void step(const Step &e, bool may_search) {
    uint64_t seq = res_.seq++;
    freed_on_arrival_ = false;
    if (may_search)
      pulled_ = false;
    res_.last_tsc = e.tsc;
    switch (e.kind) {
    case EventKind::kAlloc:
      ++res_.heap_events;
      if (e.ptr != 0)
        add(e, seq, 0, may_search);
      break;
    case EventKind::kFree: {
      ++res_.heap_events;
      if (e.ptr != 0 && !heap_.remove(e.ptr, nullptr))
        note_orphan_free(e.ptr, e, may_search);
      break;
    }
    case EventKind::kRealloc: {
      ++res_.heap_events;
      uint32_t tag = 0;
      if (e.ptr == 0 && e.size != 0)
        break; // failed: the old block stays
      if (e.old_ptr != 0 && !heap_.remove(e.old_ptr, &tag))
        note_orphan_free(e.old_ptr, e, may_search);
      // A moved object is still the one the program tagged.
      if (e.ptr != 0)
        add(e, seq, tag, may_search);
      break;
    }
    case EventKind::kTag:
      heap_.tag(e.ptr, static_cast<uint32_t>(e.string_id));
      break;
    case EventKind::kExt:
      if (e.ext == trace::ExtKind::kFreeRange)
        free_range(e, seq);
      break;
    case EventKind::kMark:
      if (std::find(stop_.mark_ids.begin(), stop_.mark_ids.end(), e.string_id) !=
          stop_.mark_ids.end())
        stop_here();
      break;
    default:
      break;
    }
    if (res_.stopped && e.kind != EventKind::kMark)
      return; // a nested step (a pulled-forward free) reached the stop
    if (observer_) {
      (*observer_)({e.kind, e.api, e.tid, seq, e.ptr, e.old_ptr, e.size, e.usable, e.stack_id,
                    e.alignment(), e.tsc});
      if (freed_on_arrival_) // what the replay did: its free, already passed, follows it
        (*observer_)({EventKind::kFree, trace::Api::kFree, orphan_tid_, seq, e.ptr, 0, 0, 0, 0, 0,
                      orphan_tsc_});
    }
    if (res_.stopped)
      return;
    if (heap_.count() > res_.max_count)
      res_.max_count = heap_.count();
    if (heap_.bytes() > res_.peak_bytes) {
      res_.has_peak = true;
      res_.peak_bytes = heap_.bytes();
      res_.peak_seq = seq;
      res_.peak_tsc = e.tsc;
      res_.peak_max_count = res_.max_count;
      res_.peak_heap_events = res_.heap_events;
      res_.peak_unknown_frees = res_.unknown_frees;
      res_.peak_double_allocs = res_.double_allocs;
      res_.peak_exact = may_search && !pulled_;
      heap_.on_peak(seq);
    }
    if (seq == stop_.at_seq) {
      stop_here();
      if (e.kind == EventKind::kAlloc || e.kind == EventKind::kRealloc)
        stop_alloc_ = {e.ptr, e.tid};
    }
  }

  // A pool destroyed: each object live in its range ends there, as a free
  // by the destroying thread (in address order, for the observer).
  void free_range(const Step &e, uint64_t seq) {
    std::vector<uint64_t> ended;
    heap_.table()->for_each([&](uint64_t addr, uint64_t) {
      if (addr - e.ptr < e.size)
        ended.push_back(addr);
    });
    std::sort(ended.begin(), ended.end());
    for (uint64_t addr : ended) {
      heap_.remove(addr, nullptr);
      if (observer_)
        (*observer_)({EventKind::kFree, e.api, e.tid, seq, addr, 0, 0, 0, 0, 0, e.tsc, true});
    }
  }

  // A replay stopped right after an allocation (the peak's): the thread's
  // next event, when it tags that object, is part of allocating it
  // (allocate, then tag), as the one-replay peak keeps it too.
  void name_stop_object() {
    constexpr int kLookAhead = 4096; // other threads' events in between, at most
    for (int k = 0; k < kLookAhead; ++k) {
      const Step *e = m_.next();
      if (!e)
        return;
      if (e->tid != stop_alloc_.tid)
        continue;
      if (e->kind == EventKind::kTag && e->ptr == stop_alloc_.ptr)
        heap_.tag(e->ptr, static_cast<uint32_t>(e->string_id));
      return;
    }
  }

  struct StopAlloc {
    uint64_t ptr = 0;
    uint32_t tid = 0;
  } stop_alloc_;

  void stop_here() {
    if (heap_.count() > res_.max_count)
      res_.max_count = heap_.count();
    res_.stopped = true;
    res_.stop_max_count = res_.max_count;
  }

  // A free of an address not live, kept for a window: its allocation may
  // come next in the merged order though it happened first.
  struct OrphanFree {
    uint64_t bound; // the latest one's: a stamp its allocation cannot be later than
    uint32_t tid;
    uint32_t count; // of them pending: the address may have gone round more than once
    uint64_t tsc;   // the latest one's stamp
  };

  // `current`: e is the merger's current event. Its allocation happened
  // before the free, so by the freeing thread's next sample, which is later
  // than the window where that thread waited long between its sample and
  // the free (more threads than CPUs).
  void note_orphan_free(uint64_t ptr, const Step &e, bool current) {
    ++res_.unknown_frees;
    if (orphan_frees_.size() >= kMaxOrphanFrees)
      std::erase_if(orphan_frees_, [&](const auto &kv) { return kv.second.bound < e.tsc; });
    if (orphan_frees_.size() >= kMaxOrphanFrees)
      return;
    uint64_t bound = e.tsc + window_;
    if (current)
      bound = std::max(bound, m_.current_stamp_bound());
    OrphanFree &o = orphan_frees_[ptr];
    o = {bound, e.tid, o.count + 1, e.tsc};
  }

  void add(const Step &e, uint64_t seq, uint32_t tag, bool may_search) {
    // Stamps are the thread's last TSC sample, so another thread's free of
    // this object can carry an earlier one than the allocation and come
    // first: the free then found nothing, and the object would live on for
    // good. An allocation by another thread within the bound of a free of
    // its address that found nothing is that object: it is born freed (a
    // same-thread pair is in order; and where another thread got the
    // address first, per-thread caches make a true free-then-reuse this
    // close all but impossible).
    if (!orphan_frees_.empty() && !heap_.contains(e.ptr)) {
      auto it = orphan_frees_.find(e.ptr);
      if (it != orphan_frees_.end() && it->second.tid != e.tid && e.tsc <= it->second.bound) {
        orphan_tid_ = it->second.tid;
        orphan_tsc_ = it->second.tsc;
        if (--it->second.count == 0)
          orphan_frees_.erase(it);
        --res_.unknown_frees;
        freed_on_arrival_ = true;
        return;
      }
    }
    if (heap_.contains(e.ptr)) {
      pulled_events_.clear();
      // Its free happened before it: by the time this thread sampled next
      // at the latest, and within the window anyway.
      if (may_search && m_.take_free(e.ptr, std::max(e.tsc + window_, m_.current_stamp_bound()),
                                     pulled_events_)) {
        pulled_ = true;
        std::vector<Step> first;
        first.swap(pulled_events_);
        for (const Step &f : first) {
          step(f, false);
          if (res_.stopped)
            return;
        }
      }
      if (heap_.remove(e.ptr, nullptr))
        ++res_.double_allocs;
    }
    heap_.insert(e, seq, tag);
  }

  Heap &heap_;
  Merger &m_;
  const ReplayStop &stop_;
  uint64_t window_;
  ReplayProgress progress_;
  const std::function<void(const AppliedEvent &)> *observer_;
  ReplayResult res_;
  std::vector<Step> pulled_events_;
  bool pulled_ = false; // the current event pulled others forward
  static constexpr size_t kMaxOrphanFrees = size_t{1} << 16;
  std::unordered_map<uint64_t, OrphanFree> orphan_frees_;
  bool freed_on_arrival_ = false; // the current allocation met its earlier-stamped free
  uint32_t orphan_tid_ = 0;       // that free's thread and stamp
  uint64_t orphan_tsc_ = 0;
};

// ---- Helpers -----------------------------------------------------------------

std::string mark_list(const TraceReader &r, const TraceIndex &ix) {
  if (ix.mark_ids.empty())
    return "it has no marks";
  std::string s = "marks in it: ";
  for (size_t i = 0; i < ix.mark_ids.size(); ++i) {
    const std::string *n = r.string(ix.mark_ids[i]);
    s += (i ? ", " : "") + (n ? *n : "#" + std::to_string(ix.mark_ids[i]));
  }
  return s;
}

// The snapshot taken first at or after the point, else the last before it.
std::optional<MemoryMap> pick_map(const TraceIndex &ix, RecordSource &src, const std::string &name,
                                  uint64_t tsc) {
  const MapRef *best = nullptr;
  for (const MapRef &m : ix.maps)
    if (m.tsc >= tsc && (!best || m.tsc < best->tsc))
      best = &m;
  if (!best)
    for (const MapRef &m : ix.maps)
      if (!best || m.tsc >= best->tsc)
        best = &m;
  if (!best)
    return std::nullopt;
  BlockSlot slot;
  TraceReader::Options opts;
  opts.prescan = false;
  if (!src.load(best->offset, slot.bytes) ||
      !slot.reader.open_buffer(slot.bytes.data(), slot.bytes.size(), name, opts) ||
      slot.reader.next() != Item::kMemoryMap)
    return std::nullopt;
  return slot.reader.memory_map();
}

// The snapshot at the point: its objects, counters, time and memory map.
void finish(const TraceReader &r, const TraceIndex &ix, RecordSource &src, uint64_t point_tsc,
            uint64_t heap_events, uint64_t unknown_frees, uint64_t double_allocs,
            std::vector<LiveObject> objects, HeapSnapshot &out) {
  out.ts_ns = r.ns_since_start(point_tsc);
  out.events = heap_events;
  out.unknown_frees = unknown_frees;
  out.double_allocs = double_allocs;
  out.objects = std::move(objects);
  for (const LiveObject &o : out.objects) {
    out.live_bytes += o.size;
    out.live_usable_bytes += o.usable;
  }
  out.memory_map = pick_map(ix, src, r.name(), point_tsc);
}

// `peak` of a trace where nothing was ever live: the start is the peak.
void nothing_live(const TraceReader &r, const TraceIndex &ix, RecordSource &src,
                  HeapSnapshot &out) {
  out.ts_ns = r.header().start_tsc ? r.ns_since_start(*r.header().start_tsc) : 0;
  out.memory_map = pick_map(ix, src, r.name(), r.header().start_tsc.value_or(0));
}

// What a replay needs besides its heap and where to stop.
struct ReplayRun {
  TraceReader &r;
  const TraceIndex &ix;
  RecordSource &src;
  uint64_t window;       // causality window, in ticks
  uint64_t total_events; // for progress
  const SnapshotProgress &progress;
  bool decode_thread;
};

enum class PeakRoute { kDone, kReplayToPeak, kFailed };

// `peak` in one replay that rolls back to the peak (ObjectHeap keep_peak).
// kDone: `out` is complete. kReplayToPeak: the rollback cannot be exact (a
// peak inside a pulled-forward free, more tags changed after the peak than
// the heap journals): `stop` and `reserve` are set for a replay to the peak
// with the whole heap.
PeakRoute peak_in_one_replay(const ReplayRun &run, uint64_t bound, ReplayStop &stop,
                             uint64_t &reserve, HeapSnapshot &out, std::string &error) {
  ObjectHeap heap(true);
  heap.reserve(bound);
  Merger m(run.ix, run.src, run.r.name(), heap.table(), run.decode_thread);
  ReplayResult first =
      Replay<ObjectHeap>(heap, m, stop, run.window,
                         {&run.progress, "rebuilding the live heap", run.total_events})
          .run();
  if (!m.error().empty()) {
    error = m.error();
    return PeakRoute::kFailed;
  }
  if (!first.has_peak) {
    nothing_live(run.r, run.ix, run.src, out);
    return PeakRoute::kDone;
  }
  if (first.peak_exact && heap.peak_kept()) {
    finish(run.r, run.ix, run.src, first.peak_tsc, first.peak_heap_events, first.peak_unknown_frees,
           first.peak_double_allocs, heap.take_peak(), out);
    return PeakRoute::kDone;
  }
  stop.at_seq = first.peak_seq;
  reserve = first.peak_max_count;
  return PeakRoute::kReplayToPeak;
}

bool build(TraceReader &r, RecordSource &src, const SnapshotSpec &spec, HeapSnapshot &out,
           std::string &error, const SnapshotProgress &progress) {
  out = HeapSnapshot{};
  out.at = spec;
  if (r.status() == ReadStatus::kUnreadable) {
    error = r.error().message;
    return false;
  }
  if (progress)
    progress("indexing the trace", 0);
  // The source re-reads blocks for the replay, and for the index when that
  // runs on two threads.
  std::string src_error;
  bool src_ok = src.init(r.header().header_bytes, src_error);
  std::optional<TraceIndex> indexed;
  if (src_ok && spec.decode_thread)
    indexed = index_on_two_threads(r, src);
  TraceIndex ix = indexed ? std::move(*indexed) : index_trace(r);
  out.partial = r.status() != ReadStatus::kOk;
  uint64_t total_events = 1;
  for (const auto &t : ix.threads)
    for (const auto &b : t.blocks)
      total_events += b.events;

  ReplayStop stop;
  uint64_t until = UINT64_MAX; // no event stamped later is replayed
  if (spec.point == SnapshotPoint::kMark) {
    until = 0;
    for (size_t i = 0; i < ix.mark_ids.size(); ++i)
      if (const std::string *n = r.string(ix.mark_ids[i]); n && *n == spec.mark) {
        stop.mark_ids.push_back(ix.mark_ids[i]);
        until = std::max(until, ix.mark_tsc[i]);
      }
    if (stop.mark_ids.empty()) {
      error = "no mark named " + spec.mark + " in " + r.name() + "; " + mark_list(r, ix);
      return false;
    }
  }
  if (!src_ok) {
    error = src_error;
    return false;
  }
  uint64_t window = static_cast<uint64_t>(kCausalityWindowNs * r.ticks_per_ns());

  // The index bounds the live count, so the containers are sized up front.
  // `peak` rolls back to the peak in one replay where it can
  // (peak_in_one_replay). Otherwise, and for an observer (which must see
  // the final replay's events only up to the point), a first replay finds
  // the peak and a second one with the whole heap stops there. When the
  // recorder lost events, frees may be missing and each reuse of their
  // addresses would inflate the bound: a first replay then counts exactly.
  uint64_t bound = live_bound(ix, until);
  uint64_t reserve = bound;
  bool peak_known = false;
  if (spec.point == SnapshotPoint::kPeak && !ix.lost_events && !spec.observer) {
    ReplayRun run{r, ix, src, window, total_events, progress, spec.decode_thread};
    switch (peak_in_one_replay(run, bound, stop, reserve, out, error)) {
    case PeakRoute::kDone:
      return true;
    case PeakRoute::kFailed:
      return false;
    case PeakRoute::kReplayToPeak:
      peak_known = true;
      break;
    }
  }
  if (!peak_known && (spec.point == SnapshotPoint::kPeak || ix.lost_events)) {
    ReplayResult first;
    {
      SizeHeap heap;
      if (!ix.lost_events)
        heap.reserve(bound);
      Merger m(ix, src, r.name(), heap.table(), spec.decode_thread);
      first = Replay<SizeHeap>(heap, m, stop, window,
                               {&progress, "finding the moment to analyse", total_events})
                  .run();
      if (!m.error().empty()) {
        error = m.error();
        return false;
      }
    }
    reserve = spec.point == SnapshotPoint::kMark ? first.stop_max_count : first.max_count;
    if (spec.point == SnapshotPoint::kPeak) {
      if (!first.has_peak) {
        nothing_live(r, ix, src, out);
        return true;
      }
      stop.at_seq = first.peak_seq;
      reserve = first.peak_max_count;
    }
  }

  ObjectHeap heap;
  heap.reserve(reserve);
  Merger m(ix, src, r.name(), heap.table(), spec.decode_thread);
  ReplayResult res =
      Replay<ObjectHeap>(heap, m, stop, window,
                         {&progress, "rebuilding the live heap", total_events}, &spec.observer)
          .run();
  if (!m.error().empty()) {
    error = m.error();
    return false;
  }
  uint64_t point_tsc = res.seq ? res.last_tsc : r.header().start_tsc.value_or(0);
  finish(r, ix, src, point_tsc, res.heap_events, res.unknown_frees, res.double_allocs, heap.take(),
         out);
  return true;
}

} // namespace

bool build_snapshot(TraceReader &r, const SnapshotSpec &spec, HeapSnapshot &out, std::string &error,
                    const SnapshotProgress &progress) {
  RecordSource src({});
  if (!src.open_file(r.name(), error))
    return false;
  return build(r, src, spec, out, error, progress);
}

bool build_snapshot(TraceReader &r, std::span<const uint8_t> trace_bytes, const SnapshotSpec &spec,
                    HeapSnapshot &out, std::string &error, const SnapshotProgress &progress) {
  RecordSource src(trace_bytes);
  return build(r, src, spec, out, error, progress);
}

} // namespace memlayout::inspector
