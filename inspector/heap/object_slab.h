// The objects of a heap replay (ObjectHeap, replay_heaps.h) in 32-byte
// records, two to a cache line: a LiveObject is 56 bytes, and at that size
// a replay to the peak could not keep the objects freed after it within the
// memory budget (100 B per live object), so it had to read the trace a
// second time to collect them. Values that do not fit a record's narrow
// fields (sizes, usable sizes or stack ids of 2^32 and more, tags past
// 65 534, positions past 2^40) are rare: such a record is marked escaped and
// the whole object kept beside the slab.
#pragma once

#include "heap_model.h"
#include "paged_array.h"

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <unordered_map>
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

class ObjectSlab {
public:
  void reserve(size_t n) { slots_.reserve(n); }
  size_t size() const { return slots_.size(); }

  // A new slot at the end (put() fills it).
  uint32_t add() {
    slots_.emplace_back();
    return static_cast<uint32_t>(slots_.size() - 1);
  }

  // Slot i holds the object allocation event `e` creates (as make_object).
  template <class Event> void put(uint32_t i, const Event &e, uint64_t seq, uint32_t tag) {
    Record &r = slots_[i];
    r.addr = e.ptr;
    if (!escapes_.empty())
      escapes_.erase(i);
    if ((e.size | e.usable | e.stack_id) >> 32 || seq >= kSeqLimit || tag >= kTagEscaped) {
      LiveObject &o = escapes_[i];
      make_object(o, e, seq, tag);
      r.word = std::min(seq, kSeqLimit - 1) << kSeqShift | kTagEscaped;
      return;
    }
    r.word = seq << kSeqShift | uint64_t{static_cast<uint8_t>(e.api)} << kApiShift | tag;
    r.size = static_cast<uint32_t>(e.size);
    r.usable = static_cast<uint32_t>(e.usable);
    r.stack_id = static_cast<uint32_t>(e.stack_id);
    r.tid = e.tid;
  }

  uint64_t seq(uint32_t i) const {
    uint64_t w = slots_[i].word;
    if ((w & kTagMask) == kTagEscaped) [[unlikely]]
      return escapes_.at(i).seq;
    return w >> kSeqShift;
  }
  uint64_t size_of(uint32_t i) const {
    const Record &r = slots_[i];
    return escaped(r) ? escapes_.at(i).size : r.size;
  }
  uint32_t tag(uint32_t i) const {
    const Record &r = slots_[i];
    return escaped(r) ? escapes_.at(i).tag_id : static_cast<uint32_t>(r.word & kTagMask);
  }
  void set_tag(uint32_t i, uint32_t id) {
    Record &r = slots_[i];
    if (escaped(r)) {
      escapes_.at(i).tag_id = id;
    } else if (id < kTagEscaped) {
      r.word = (r.word & ~kTagMask) | id;
    } else {
      LiveObject &o = escapes_[i];
      o = unpack(r, nullptr);
      o.tag_id = id;
      r.word = (r.word & ~kTagMask) | kTagEscaped;
    }
  }

  void prefetch(uint32_t i, bool for_write) const {
    if (for_write)
      __builtin_prefetch(&slots_[i], 1);
    else
      __builtin_prefetch(&slots_[i]);
  }

  // The objects of the slots keep[i] names, by address; the slab is empty
  // after. Memory stays near the larger of what is kept, as records or as
  // LiveObjects: records are compacted, the rest released, and each stretch
  // of records goes back to the system once unpacked. Addresses are
  // distinct (the objects were live together).
  std::vector<LiveObject> take(const std::vector<bool> &keep) {
    std::vector<LiveObject> escaped_objects;
    size_t n = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!keep[i])
        continue;
      Record r = slots_[i];
      if (escaped(r)) { // stack_id now says where the object went
        r.stack_id = static_cast<uint32_t>(escaped_objects.size());
        escaped_objects.push_back(escapes_.at(static_cast<uint32_t>(i)));
      }
      slots_[n++] = r;
    }
    escapes_ = {};
    slots_.release(n, slots_.size());
    slots_.shrink(n);
    // Two sorted runs, the first sorted on a second thread where there is
    // one; merged as they are unpacked.
    auto by_addr = [](const Record &a, const Record &b) { return a.addr < b.addr; };
    Record *begin = slots_.begin(), *end = slots_.end();
    size_t half = n;
    if (n >= kSortOnTwoThreads && std::thread::hardware_concurrency() > 1) {
      try {
        std::thread first([&] { std::sort(begin, begin + n / 2, by_addr); });
        std::sort(begin + n / 2, end, by_addr);
        first.join();
        half = n / 2;
      } catch (const std::system_error &) { // no thread: one run
      }
    }
    if (half == n)
      std::sort(begin, end, by_addr);
    std::vector<LiveObject> out;
    out.reserve(n);
    constexpr size_t kReleaseEvery = 8192;
    size_t i = 0, j = half, released_i = 0, released_j = half;
    while (i < half || j < n) {
      bool first_run = j == n || (i < half && slots_[i].addr <= slots_[j].addr);
      out.push_back(unpack(slots_[first_run ? i++ : j++], &escaped_objects));
      if (out.size() % kReleaseEvery == 0) {
        released_i = slots_.release(released_i, i);
        released_j = slots_.release(released_j, j);
      }
    }
    slots_ = {};
    return out;
  }

private:
  struct Record {
    uint64_t addr;
    uint64_t word; // seq << kSeqShift | api << kApiShift | tag
    uint32_t size, usable, stack_id, tid;
  };
  static_assert(sizeof(Record) == 32);

  static constexpr size_t kSortOnTwoThreads = size_t{1} << 16;
  static constexpr unsigned kSeqShift = 24, kApiShift = 16;
  static constexpr uint64_t kSeqLimit = uint64_t{1} << (64 - kSeqShift);
  static constexpr uint64_t kTagMask = 0xffff, kTagEscaped = kTagMask;

  static bool escaped(const Record &r) { return (r.word & kTagMask) == kTagEscaped; }

  // `escaped_objects`: where take() moved the escaped ones.
  static LiveObject unpack(const Record &r, const std::vector<LiveObject> *escaped_objects) {
    if (escaped(r))
      return (*escaped_objects)[r.stack_id];
    LiveObject o;
    o.addr = r.addr;
    o.size = r.size;
    o.usable = r.usable;
    o.stack_id = r.stack_id;
    o.tid = r.tid;
    o.tag_id = static_cast<uint32_t>(r.word & kTagMask);
    o.api = static_cast<trace::Api>(r.word >> kApiShift & 0xff);
    o.seq = r.word >> kSeqShift;
    return o;
  }

  PagedArray<Record> slots_;
  std::unordered_map<uint32_t, LiveObject> escapes_; // by slot
};

} // namespace memlayout::inspector
