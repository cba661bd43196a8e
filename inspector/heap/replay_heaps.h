// The live sets a heap replay (heap_snapshot.cpp) applies events to. Each
// offers contains / insert / remove / tag / on_peak, bytes() and count():
//
//  - SizeHeap: address -> size, to find the peak of live bytes.
//  - ObjectHeap: whole objects; with keep_peak it also rolls back to the
//    peak of live bytes at the end, so one replay finds the peak and
//    rebuilds the heap there (or, when too many of the peak's objects were
//    freed after it, names them for a PickHeap replay).
//  - PickHeap: no live set at all; collects the allocations whose positions
//    in the merged order a previous replay named.
#pragma once

#include "addr_table.h"
#include "heap_model.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memlayout::inspector {

// The object an allocation event `e` (ptr, size, usable, stack_id, tid, api)
// creates, written field by field where it is kept: a LiveObject built on
// the stack and copied would be read back with 16-byte loads its narrower
// stores cannot forward, a stall on every allocation.
template <class Event> void make_object(LiveObject &o, const Event &e, uint64_t seq, uint32_t tag) {
  o.addr = e.ptr;
  o.size = e.size;
  o.usable = e.usable;
  o.stack_id = e.stack_id;
  o.tid = e.tid;
  o.tag_id = tag;
  o.api = e.api;
  o.seq = seq;
}

class SizeHeap {
public:
  const AddrTable *table() const { return &table_; }
  void reserve(size_t n) { table_.reserve(n); }
  bool contains(uint64_t addr) { return table_.find(addr) != nullptr; }
  template <class Event> void insert(const Event &e, uint64_t, uint32_t) {
    table_.insert(e.ptr, e.size);
    bytes_ += e.size;
    ++count_;
  }
  bool remove(uint64_t addr, uint32_t *tag) {
    uint64_t size;
    if (!table_.erase(addr, size))
      return false;
    bytes_ -= size;
    --count_;
    if (tag)
      *tag = 0;
    return true;
  }
  void tag(uint64_t, uint32_t) {}
  void on_peak(uint64_t) {}
  uint64_t bytes() const { return bytes_; }
  uint64_t count() const { return count_; }

private:
  AddrTable table_;
  uint64_t bytes_ = 0, count_ = 0;
};

// A set of `count` merged positions, all at most `last`: a bitmap over
// [0, last] where that takes no more memory than the positions themselves
// (at least one in 64 set), else the sorted positions.
class SeqSet {
public:
  SeqSet(uint64_t last, size_t count) : last_(last) {
    if (last / 64 < count)
      bits_.assign(last / 64 + 1, 0);
    else
      sorted_.reserve(count);
  }
  void add(uint64_t q) { // q <= last, each at most once
    ++size_;
    if (!bits_.empty())
      bits_[q / 64] |= uint64_t{1} << (q % 64);
    else
      sorted_.push_back(q);
  }
  void seal() { std::sort(sorted_.begin(), sorted_.end()); } // after the last add
  bool contains(uint64_t q) const {
    if (!bits_.empty())
      return q <= last_ && (bits_[q / 64] >> (q % 64) & 1);
    return std::binary_search(sorted_.begin(), sorted_.end(), q);
  }
  size_t size() const { return size_; }

private:
  uint64_t last_;
  size_t size_ = 0;
  std::vector<uint64_t> bits_, sorted_;
};

// Whole objects in a slab; the table maps address -> slab index and size
// (so a free needs no slab line to keep the byte count). Freed slots wait
// in batches of kSweepBatch and are recycled with the batch's lines
// prefetched together: on a heap far larger than the caches the misses
// overlap instead of stalling one free at a time.
//
// Rolling back to the peak (keep_peak): an object is alive at the peak when
// it was allocated at or before the peak's position in the merged order
// (LiveObject::seq) and not freed until then. The ones still live at the
// end are in the table; the ones freed after the peak keep their slab slots
// instead of recycling them ("retained"), and a tag changed after the peak
// is journaled. Every new peak recycles all of that. Which freed slots
// belong to the peak needs their seq, a slab line the free does not
// otherwise touch: the batches sort that out.
//
// Retention is capped at 1/16 of the objects live at the peak or 8 MiB of
// slots, whichever is more: 3.5 B per object on top of the ~80 the heap
// costs, or less than the process's fixed memory. Past the cap the peak's
// objects have to be read from the trace again by a PickHeap replay, so the
// slab is of no more use: the heap drops it and keeps for each live address
// only its seq and size ("seq mode"), and the seqs of the objects freed
// after the peak that were live at it. peak_kept() is then false for good.
class ObjectHeap {
public:
  explicit ObjectHeap(bool keep_peak = false) : keep_peak_(keep_peak) {}

  const AddrTable *table() const { return &table_; }
  void reserve(size_t n) {
    // Only the slots used get pages: room for the freed slots waiting to be
    // swept and the most that can be retained.
    slab_.reserve(n + kSweepBatch + (keep_peak_ ? std::max(n / kBudgetShare, kMinBudget) : 0));
    free_.reserve(slab_.capacity());
    table_.reserve(n);
  }
  bool contains(uint64_t addr) { return table_.find(addr) != nullptr; }

  template <class Event> void insert(const Event &e, uint64_t seq, uint32_t tag) {
    bytes_ += e.size;
    ++count_;
    if (seq_mode_) {
      table_.insert(e.ptr, pack_seq(e.ptr, seq, e.size));
      return;
    }
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
      // The next allocation takes the next free slot: start fetching it.
      if (!free_.empty())
        prefetch_slot(free_.back());
    } else {
      i = static_cast<uint32_t>(slab_.size());
      slab_.emplace_back();
    }
    make_object(slab_[i], e, seq, tag);
    table_.insert(e.ptr, uint64_t{i} | std::min(e.size, kBigSlotSize) << 32);
  }

  bool remove(uint64_t addr, uint32_t *tag) {
    uint64_t v;
    if (!table_.erase(addr, v))
      return false;
    --count_;
    if (tag)
      *tag = 0; // seq mode keeps no tags: a trace with tags gets a full replay
    if (seq_mode_) {
      bytes_ -= seq_size(addr, v);
      uint64_t seq = v >> kSizeBits;
      if (seq <= peak_seq_)
        freed_seqs_.push_back(seq);
      return true;
    }
    uint32_t i = static_cast<uint32_t>(v);
    uint64_t size = v >> 32;
    bytes_ -= size == kBigSlotSize ? slab_[i].size : size;
    if (tag)
      *tag = slab_[i].tag_id;
    pending_.push_back(i);
    if (pending_.size() == kSweepBatch)
      sweep();
    return true;
  }

  void tag(uint64_t addr, uint32_t id) {
    uint64_t *v = seq_mode_ ? nullptr : table_.find(addr);
    if (!v)
      return;
    LiveObject &o = slab_[static_cast<uint32_t>(*v)];
    uint32_t old = o.tag_id;
    o.tag_id = id;
    if (keep_peak_ && has_peak_ && o.seq <= peak_seq_) {
      tag_undo_.push_back({static_cast<uint32_t>(*v), old});
      if (tag_undo_.size() > budget_)
        to_seq_mode();
    }
  }

  // The live set as it stands is the new peak, reached at merged position
  // `seq`: what was kept for the previous one is recycled.
  void on_peak(uint64_t seq) {
    if (!keep_peak_)
      return;
    has_peak_ = true;
    peak_seq_ = seq;
    peak_count_ = count_;
    freed_seqs_.clear();
    if (seq_mode_)
      return;
    for (uint32_t i : pending_)
      release(i);
    for (uint32_t i : retained_)
      release(i);
    pending_.clear();
    retained_.clear();
    tag_undo_.clear();
    budget_ = std::max(count_ / kBudgetShare, kMinBudget);
  }

  uint64_t bytes() const { return bytes_; }
  uint64_t count() const { return count_; }

  // Moves the live objects out, by address; the slab's memory becomes theirs.
  std::vector<LiveObject> take() {
    std::vector<bool> keep(slab_.size());
    table_.for_each([&](uint64_t, uint64_t v) { keep[static_cast<uint32_t>(v)] = true; });
    return compact(keep);
  }

  // keep_peak: whether the objects of the peak are all at hand.
  bool peak_kept() {
    if (!seq_mode_)
      sweep();
    return has_peak_ && !seq_mode_;
  }

  // The objects live at the peak, by address (peak_kept() must be true).
  std::vector<LiveObject> take_peak() {
    for (auto u = tag_undo_.rbegin(); u != tag_undo_.rend(); ++u)
      slab_[u->slot].tag_id = u->tag;
    std::vector<bool> keep(slab_.size());
    table_.for_each([&](uint64_t, uint64_t v) {
      uint32_t i = static_cast<uint32_t>(v);
      keep[i] = slab_[i].seq <= peak_seq_;
    });
    for (uint32_t i : retained_)
      keep[i] = true;
    return compact(keep);
  }

  // The seqs of the objects live at the peak (after peak_kept()); none when
  // a seq was too large to keep in seq mode.
  std::optional<SeqSet> take_peak_seqs() {
    if (seq_overflow_)
      return std::nullopt;
    SeqSet set(peak_seq_, peak_count_);
    if (seq_mode_) {
      for (uint64_t q : freed_seqs_)
        set.add(q);
      freed_seqs_ = {};
      table_.for_each([&](uint64_t, uint64_t v) {
        if (v >> kSizeBits <= peak_seq_)
          set.add(v >> kSizeBits);
      });
    } else {
      for (uint32_t i : retained_)
        set.add(slab_[i].seq);
      table_.for_each([&](uint64_t, uint64_t v) {
        const LiveObject &o = slab_[static_cast<uint32_t>(v)];
        if (o.seq <= peak_seq_)
          set.add(o.seq);
      });
    }
    set.seal();
    return set;
  }

private:
  static constexpr size_t kSweepBatch = 256;
  static constexpr uint64_t kBudgetShare = 16,
                            kMinBudget = (uint64_t{8} << 20) / sizeof(LiveObject);
  // Table values. Object mode: slot | size << 32, a size of kBigSlotSize or
  // more being in the slab. Seq mode: seq << kSizeBits | size, larger sizes
  // in big_sizes_.
  static constexpr uint64_t kBigSlotSize = 0xffffffff;
  static constexpr unsigned kSizeBits = 24;
  static constexpr uint64_t kBigSeqSize = (uint64_t{1} << kSizeBits) - 1;

  struct TagUndo {
    uint32_t slot, tag;
  };

  uint64_t pack_seq(uint64_t addr, uint64_t seq, uint64_t size) {
    seq_overflow_ |= seq >> (64 - kSizeBits) != 0;
    if (size >= kBigSeqSize)
      big_sizes_[addr] = size;
    return seq << kSizeBits | std::min(size, kBigSeqSize);
  }
  uint64_t seq_size(uint64_t addr, uint64_t v) {
    uint64_t size = v & kBigSeqSize;
    if (size == kBigSeqSize) {
      auto it = big_sizes_.find(addr);
      size = it->second;
      big_sizes_.erase(it);
    }
    return size;
  }

  void prefetch_slot(uint32_t i) const {
    const char *p = reinterpret_cast<const char *>(&slab_[i]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + sizeof(LiveObject) - 1, 1);
  }

  void release(uint32_t i) { free_.push_back(i); }

  // Frees the slots waiting in pending_, their lines fetched together, but
  // those of objects live at the peak, which are retained up to the cap.
  void sweep() {
    for (uint32_t i : pending_)
      __builtin_prefetch(&slab_[i].seq);
    bool keeping = keep_peak_ && has_peak_, over = false;
    for (uint32_t i : pending_) {
      uint64_t seq = slab_[i].seq;
      if (!keeping || seq > peak_seq_) {
        release(i);
      } else if (retained_.size() < budget_) {
        retained_.push_back(i);
      } else {
        freed_seqs_.push_back(seq);
        over = true;
      }
    }
    pending_.clear();
    if (over)
      to_seq_mode();
  }

  // Past the cap: from here on, seqs and sizes instead of objects.
  void to_seq_mode() {
    for (uint32_t i : pending_) // left by a tag's call
      if (slab_[i].seq <= peak_seq_)
        freed_seqs_.push_back(slab_[i].seq);
    for (uint32_t i : retained_)
      freed_seqs_.push_back(slab_[i].seq);
    // Each live object's slab line, a batch at a time with the lines
    // prefetched together.
    std::vector<std::pair<uint64_t, uint64_t *>> batch;
    batch.reserve(kSweepBatch);
    auto convert = [&] {
      for (const auto &[addr, v] : batch)
        __builtin_prefetch(&slab_[static_cast<uint32_t>(*v)]);
      for (const auto &[addr, v] : batch) {
        const LiveObject &o = slab_[static_cast<uint32_t>(*v)];
        *v = pack_seq(addr, o.seq, o.size);
      }
      batch.clear();
    };
    table_.for_each_value([&](uint64_t addr, uint64_t &v) {
      batch.emplace_back(addr, &v);
      if (batch.size() == kSweepBatch)
        convert();
    });
    convert();
    seq_mode_ = true;
    std::vector<LiveObject>().swap(slab_);
    std::vector<uint32_t>().swap(free_);
    std::vector<uint32_t>().swap(pending_);
    std::vector<uint32_t>().swap(retained_);
    std::vector<TagUndo>().swap(tag_undo_);
  }

  std::vector<LiveObject> compact(const std::vector<bool> &keep) {
    table_ = AddrTable();
    free_ = {};
    pending_ = {};
    retained_ = {};
    size_t n = 0;
    for (size_t i = 0; i < slab_.size(); ++i)
      if (keep[i])
        slab_[n++] = slab_[i];
    slab_.resize(n);
    std::sort(slab_.begin(), slab_.end(),
              [](const LiveObject &a, const LiveObject &b) { return a.addr < b.addr; });
    return std::move(slab_);
  }

  bool keep_peak_;
  std::vector<LiveObject> slab_;
  std::vector<uint32_t> free_;
  AddrTable table_;
  uint64_t bytes_ = 0, count_ = 0;

  bool has_peak_ = false, seq_mode_ = false, seq_overflow_ = false;
  uint64_t peak_seq_ = 0, peak_count_ = 0, budget_ = 0;
  std::vector<uint32_t> pending_, retained_;
  std::vector<TagUndo> tag_undo_;
  std::vector<uint64_t> freed_seqs_;                 // of the peak's objects, once over the cap
  std::unordered_map<uint64_t, uint64_t> big_sizes_; // seq mode, by address
};

// Collects, in a replay identical to the one that named them, the objects
// allocated at the given merged positions. It keeps no live set: the replay
// takes its address-reuse decisions from the first replay's log. Used only
// on traces without tags (a tag's target depends on the live set).
class PickHeap {
public:
  explicit PickHeap(SeqSet seqs) : seqs_(std::move(seqs)) { objects_.reserve(seqs_.size()); }

  const AddrTable *table() const { return nullptr; }
  bool contains(uint64_t) { return false; }
  template <class Event> void insert(const Event &e, uint64_t seq, uint32_t tag) {
    if (seqs_.contains(seq))
      make_object(objects_.emplace_back(), e, seq, tag);
  }
  bool remove(uint64_t, uint32_t *tag) {
    if (tag)
      *tag = 0;
    return true;
  }
  void tag(uint64_t, uint32_t) {}
  void on_peak(uint64_t) {}
  uint64_t bytes() const { return 0; }
  uint64_t count() const { return 0; }

  bool complete() const { return objects_.size() == seqs_.size(); }
  std::vector<LiveObject> take() {
    std::sort(objects_.begin(), objects_.end(),
              [](const LiveObject &a, const LiveObject &b) { return a.addr < b.addr; });
    return std::move(objects_);
  }

private:
  SeqSet seqs_;
  std::vector<LiveObject> objects_;
};

} // namespace memlayout::inspector
