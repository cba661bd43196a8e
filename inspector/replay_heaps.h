// The live sets a heap replay (heap_snapshot.cpp) applies events to. Each
// offers contains / insert / remove / tag / on_peak, bytes() and count():
//
//  - SizeHeap: address -> size, to find the peak of live bytes.
//  - ObjectHeap: whole objects; with keep_peak it also rolls back to the
//    peak of live bytes at the end, so one replay finds the peak and
//    rebuilds the heap there.
//  - PickHeap: no live set at all; collects the allocations whose positions
//    in the merged order a previous replay named.
#pragma once

#include "addr_table.h"
#include "heap_model.h"

#include <algorithm>
#include <cstdint>
#include <optional>
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
// costs, or less than the process's fixed memory. Past the cap the heap
// keeps only the seqs of the peak's freed objects (a bitmap over positions
// or a list, at most 8 B per object), for a PickHeap replay to collect
// (peak_kept() false).
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
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
      make_object(slab_[i], e, seq, tag);
      // The next allocation takes the next free slot: start fetching it.
      if (!free_.empty())
        prefetch_slot(free_.back());
    } else {
      i = static_cast<uint32_t>(slab_.size());
      make_object(slab_.emplace_back(), e, seq, tag);
    }
    table_.insert(e.ptr, pack(i, e.size));
    bytes_ += e.size;
    ++count_;
  }

  bool remove(uint64_t addr, uint32_t *tag) {
    uint64_t v;
    if (!table_.erase(addr, v))
      return false;
    uint32_t i = static_cast<uint32_t>(v);
    uint64_t size = v >> 32;
    if (size == kBigSize)
      size = slab_[i].size;
    if (tag)
      *tag = slab_[i].tag_id;
    bytes_ -= size;
    --count_;
    pending_.push_back(i);
    if (pending_.size() == kSweepBatch)
      sweep();
    return true;
  }

  void tag(uint64_t addr, uint32_t id) {
    uint64_t *v = table_.find(addr);
    if (!v)
      return;
    LiveObject &o = slab_[static_cast<uint32_t>(*v)];
    if (keep_peak_ && has_peak_ && !dropped_ && o.seq <= peak_seq_) {
      tag_undo_.push_back({static_cast<uint32_t>(*v), o.tag_id});
      if (tag_undo_.size() > budget_)
        drop_objects();
    }
    o.tag_id = id;
  }

  // The live set as it stands is the new peak, reached at merged position
  // `seq`: what was kept for the previous one is recycled.
  void on_peak(uint64_t seq) {
    if (!keep_peak_)
      return;
    has_peak_ = true;
    peak_seq_ = seq;
    for (uint32_t i : pending_)
      release(i);
    for (uint32_t i : retained_)
      release(i);
    pending_.clear();
    retained_.clear();
    peak_set_.reset();
    peak_count_ = count_;
    tag_undo_.clear();
    dropped_ = false;
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

  // keep_peak: false when the objects of the peak were not all kept.
  bool peak_kept() {
    sweep();
    return has_peak_ && !dropped_;
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

  // The seqs of the objects live at the peak (after peak_kept() said false).
  SeqSet take_peak_seqs() {
    if (!peak_set_)
      peak_set_.emplace(peak_seq_, peak_count_);
    for (uint32_t i : retained_)
      peak_set_->add(slab_[i].seq);
    table_.for_each([&](uint64_t, uint64_t v) {
      const LiveObject &o = slab_[static_cast<uint32_t>(v)];
      if (o.seq <= peak_seq_)
        peak_set_->add(o.seq);
    });
    peak_set_->seal();
    return std::move(*peak_set_);
  }

private:
  static constexpr uint64_t kBigSize = 0xffffffff; // the size is in the slab
  static constexpr size_t kSweepBatch = 256;
  static constexpr uint64_t kBudgetShare = 16,
                            kMinBudget = (uint64_t{8} << 20) / sizeof(LiveObject);

  struct TagUndo {
    uint32_t slot, tag;
  };

  static uint64_t pack(uint32_t slot, uint64_t size) {
    return uint64_t{slot} | std::min(size, kBigSize) << 32;
  }

  void prefetch_slot(uint32_t i) const {
    const char *p = reinterpret_cast<const char *>(&slab_[i]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + sizeof(LiveObject) - 1, 1);
  }

  void release(uint32_t i) { free_.push_back(i); }

  // Frees the slots waiting in pending_, their lines fetched together, but
  // those of objects live at the peak, which are retained (or, past the
  // cap, their seqs).
  void sweep() {
    for (uint32_t i : pending_)
      __builtin_prefetch(&slab_[i].seq);
    bool keeping = keep_peak_ && has_peak_;
    for (uint32_t i : pending_) {
      uint64_t seq = slab_[i].seq;
      if (!keeping || seq > peak_seq_) {
        release(i);
      } else if (!dropped_ && retained_.size() < budget_) {
        retained_.push_back(i);
      } else {
        if (!dropped_)
          drop_objects();
        peak_set_->add(seq);
        release(i);
      }
    }
    pending_.clear();
  }

  // Over the cap: keep the seqs of the peak's freed objects, not the objects.
  void drop_objects() {
    dropped_ = true;
    peak_set_.emplace(peak_seq_, peak_count_);
    for (uint32_t i : retained_) {
      peak_set_->add(slab_[i].seq);
      release(i);
    }
    retained_.clear();
    tag_undo_.clear();
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

  bool has_peak_ = false, dropped_ = false;
  uint64_t peak_seq_ = 0, peak_count_ = 0, budget_ = 0;
  std::vector<uint32_t> pending_, retained_;
  std::optional<SeqSet> peak_set_; // the peak's freed objects, once dropped_
  std::vector<TagUndo> tag_undo_;
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
