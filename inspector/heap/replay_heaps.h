// The live sets a heap replay (heap_snapshot.cpp) applies events to. Each
// offers contains / insert / remove / tag / on_peak, bytes() and count():
//
//  - SizeHeap: address -> size, to find the peak of live bytes.
//  - ObjectHeap: whole objects; with keep_peak it also rolls back to the
//    peak of live bytes at the end, so one replay finds the peak and
//    rebuilds the heap there.
#pragma once

#include "addr_table.h"
#include "heap_model.h"
#include "object_slab.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memlayout::inspector {

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

// Whole objects in a slab (ObjectSlab: 32-byte records); the table maps
// address -> slab index and size (so a free needs no slab line to keep the
// byte count). Freed slots wait in batches of kSweepBatch and are recycled
// with the batch's lines prefetched together: on a heap far larger than the
// caches the misses overlap instead of stalling one free at a time.
//
// Rolling back to the peak (keep_peak): an object is alive at the peak when
// it was allocated at or before the peak's position in the merged order
// (its seq) and not freed until then. The ones still live at the end are in
// the table; the ones freed after the peak keep their slab slots instead of
// recycling them ("retained"), and a tag changed after the peak is
// journaled. Every new peak recycles all of that. Which freed slots belong
// to the peak needs their seq, a slab line the free does not otherwise
// touch: the batches sort that out.
//
// Retained objects were all live at the peak, so they are never more than
// its objects: 32 B per object on top of the ~55 the heap costs (slab and
// table), within the budget of 100 B per object live at the peak. Only the
// journal of tags has no such bound: past as many entries as objects live
// at the peak (or 512 KiB) the heap stops keeping anything for the rollback,
// and peak_kept() is false for good (the caller then replays to the peak).
class ObjectHeap {
public:
  explicit ObjectHeap(bool keep_peak = false) : keep_peak_(keep_peak) {}

  const AddrTable *table() const { return &table_; }
  void reserve(size_t n) {
    // Only the slots used get pages: room for the freed slots waiting to be
    // swept and the most that can be retained.
    size_t slots = n + kSweepBatch + (keep_peak_ ? n : 0);
    slab_.reserve(slots);
    free_.reserve(slots);
    table_.reserve(n);
  }
  bool contains(uint64_t addr) { return table_.find(addr) != nullptr; }

  template <class Event> void insert(const Event &e, uint64_t seq, uint32_t tag) {
    bytes_ += e.size;
    ++count_;
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
      // The next allocation takes the next free slot: start fetching it.
      if (!free_.empty())
        slab_.prefetch(free_.back(), true);
    } else {
      i = slab_.add();
    }
    slab_.put(i, e, seq, tag);
    table_.insert(e.ptr, uint64_t{i} | std::min(e.size, kBigSlotSize) << 32);
  }

  bool remove(uint64_t addr, uint32_t *tag) {
    uint64_t v;
    if (!table_.erase(addr, v))
      return false;
    --count_;
    uint32_t i = static_cast<uint32_t>(v);
    uint64_t size = v >> 32;
    bytes_ -= size == kBigSlotSize ? slab_.size_of(i) : size;
    if (tag)
      *tag = slab_.tag(i);
    pending_.push_back(i);
    if (pending_.size() == kSweepBatch)
      sweep();
    return true;
  }

  void tag(uint64_t addr, uint32_t id) {
    uint64_t *v = table_.find(addr);
    if (!v)
      return;
    uint32_t i = static_cast<uint32_t>(*v);
    uint32_t old = slab_.tag(i);
    slab_.set_tag(i, id);
    // The first tag of the object the peak's own event allocated is its
    // allocation's (allocate, then tag): the peak keeps it.
    bool peak_object_named = old == 0 && slab_.seq(i) == peak_seq_;
    if (keeping() && slab_.seq(i) <= peak_seq_ && !peak_object_named) {
      tag_undo_.push_back({i, old});
      if (tag_undo_.size() > std::max<uint64_t>(peak_count_, kMinJournal))
        give_up_peak();
    }
  }

  // The live set as it stands is the new peak, reached at merged position
  // `seq`: what was kept for the previous one is recycled.
  void on_peak(uint64_t seq) {
    if (!keep_peak_ || peak_lost_)
      return;
    has_peak_ = true;
    peak_seq_ = seq;
    peak_count_ = count_;
    recycle_kept();
  }

  uint64_t bytes() const { return bytes_; }
  uint64_t count() const { return count_; }

  // Moves the live objects out, by address.
  std::vector<LiveObject> take() {
    std::vector<bool> keep(slab_.size());
    table_.for_each([&](uint64_t, uint64_t v) { keep[static_cast<uint32_t>(v)] = true; });
    return take_slots(keep);
  }

  // keep_peak: whether the objects of the peak are all at hand.
  bool peak_kept() {
    sweep();
    return keeping();
  }

  // The objects live at the peak, by address (peak_kept() must be true).
  std::vector<LiveObject> take_peak() {
    for (auto u = tag_undo_.rbegin(); u != tag_undo_.rend(); ++u)
      slab_.set_tag(u->slot, u->tag);
    std::vector<bool> keep(slab_.size());
    table_.for_each([&](uint64_t, uint64_t v) {
      uint32_t i = static_cast<uint32_t>(v);
      keep[i] = slab_.seq(i) <= peak_seq_;
    });
    for (uint32_t i : retained_)
      keep[i] = true;
    return take_slots(keep);
  }

private:
  struct TagUndo {
    uint32_t slot, tag;
  };

  static constexpr size_t kSweepBatch = 256;
  static constexpr uint64_t kMinJournal = (uint64_t{512} << 10) / sizeof(TagUndo);
  // Table values: slot | size << 32, a size of kBigSlotSize or more being in
  // the slab.
  static constexpr uint64_t kBigSlotSize = 0xffffffff;

  bool keeping() const { return keep_peak_ && has_peak_ && !peak_lost_; }

  void recycle_kept() {
    free_.insert(free_.end(), pending_.begin(), pending_.end());
    free_.insert(free_.end(), retained_.begin(), retained_.end());
    pending_.clear();
    retained_.clear();
    tag_undo_.clear();
  }

  void give_up_peak() {
    recycle_kept();
    peak_lost_ = true;
  }

  // Frees the slots waiting in pending_, their lines fetched together, but
  // those of objects live at the peak, which are retained.
  void sweep() {
    for (uint32_t i : pending_)
      slab_.prefetch(i, false);
    bool keep = keeping();
    for (uint32_t i : pending_) {
      if (keep && slab_.seq(i) <= peak_seq_)
        retained_.push_back(i);
      else
        free_.push_back(i);
    }
    pending_.clear();
  }

  std::vector<LiveObject> take_slots(const std::vector<bool> &keep) {
    table_ = AddrTable();
    free_ = {};
    pending_ = {};
    retained_ = {};
    return slab_.take(keep);
  }

  bool keep_peak_;
  ObjectSlab slab_;
  std::vector<uint32_t> free_;
  AddrTable table_;
  uint64_t bytes_ = 0, count_ = 0;

  bool has_peak_ = false, peak_lost_ = false;
  uint64_t peak_seq_ = 0, peak_count_ = 0;
  std::vector<uint32_t> pending_, retained_;
  std::vector<TagUndo> tag_undo_;
};

} // namespace memlayout::inspector
