#include "freed_sizes.h"

#include "heap_snapshot.h"
#include "trace_reader.h"

namespace memlayout::cli {

uint64_t SizeTable::pack(FreedObject s) {
  if (s.size < (uint64_t{1} << 40) && s.usable >= s.size && s.usable - s.size < (uint64_t{1} << 24))
    return s.size | (s.usable - s.size) << 40;
  return kWide;
}

void SizeTable::put(uint64_t key, FreedObject s) {
  uint64_t v = pack(s);
  if (v == kWide)
    wide_[key].push_back(s);
  if (table_.find(key))
    queued_[key].push_back(v);
  else
    table_.insert(key, v);
}

void SizeTable::replace(uint64_t key, FreedObject s) {
  take(key);
  put(key, s);
}

std::optional<FreedObject> SizeTable::take(uint64_t key) {
  uint64_t v;
  if (!table_.erase(key, v))
    return std::nullopt;
  if (!queued_.empty()) {
    auto q = queued_.find(key);
    if (q != queued_.end()) {
      table_.insert(key, q->second.front());
      q->second.erase(q->second.begin());
      if (q->second.empty())
        queued_.erase(q);
    }
  }
  return unpack(key, v);
}

std::optional<FreedObject> SizeTable::unpack(uint64_t key, uint64_t v) {
  if (v != kWide) {
    uint64_t size = v & ((uint64_t{1} << 40) - 1);
    return FreedObject{size, size + (v >> 40)};
  }
  auto it = wide_.find(key);
  if (it == wide_.end())
    return std::nullopt;
  FreedObject s = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty())
    wide_.erase(it);
  return s;
}

uint64_t FreedSizes::event_key(uint32_t tid, uint64_t ptr, uint64_t n) {
  uint64_t h = ptr ^ (n * 0x9E3779B97F4A7C15ull) ^ (uint64_t{tid} * 0xC2B2AE3D27D4EB4Full << 1);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 32;
  return h ? h : 1; // AddrTable keys are non-zero
}

uint64_t FreedSizes::allocation_number(inspector::AddrTable &seen, uint32_t tid, uint64_t ptr) {
  uint64_t key = event_key(tid, ptr, 0);
  if (uint64_t *n = seen.find(key))
    return ++*n;
  seen.insert(key, 1);
  return 1;
}

bool FreedSizes::pair_across_threads(const std::string &path, std::string &error) {
  inspector::TraceReader r;
  if (!r.open(path)) {
    error = r.error().message;
    return false;
  }
  struct LiveObject {
    FreedObject sizes;
    uint64_t number; // allocation_number
    uint32_t tid;
  };
  std::vector<LiveObject> objects;
  inspector::AddrTable seen;    // each thread's own order, as the file has it
  std::vector<uint64_t> unused; // indexes into objects
  inspector::AddrTable live;    // address -> index into objects
  auto begin_object = [&](const inspector::AppliedEvent &e) {
    LiveObject o{{e.size, e.usable}, allocation_number(seen, e.tid, e.ptr), e.tid};
    if (uint64_t *at = live.find(e.ptr)) { // its free was lost: the replay drops it too
      objects[*at] = o;
      return;
    }
    uint64_t i = objects.size();
    if (!unused.empty()) {
      i = unused.back();
      unused.pop_back();
      objects[i] = o;
    } else {
      objects.push_back(o);
    }
    live.insert(e.ptr, i);
  };
  auto end_object = [&](uint64_t ptr) -> std::optional<LiveObject> {
    uint64_t i;
    if (!live.erase(ptr, i))
      return std::nullopt;
    unused.push_back(i);
    return objects[i];
  };
  auto freed_elsewhere = [&](const LiveObject &o, uint64_t ptr) {
    freed_elsewhere_.insert(event_key(o.tid, ptr, o.number), 1);
  };

  inspector::SnapshotSpec spec;
  spec.point = inspector::SnapshotPoint::kEnd;
  spec.observer = [&](const inspector::AppliedEvent &e) {
    switch (e.kind) {
    case trace::EventKind::kAlloc:
      if (e.ptr)
        begin_object(e);
      break;
    case trace::EventKind::kRealloc:
      if (e.ptr == 0 && e.size != 0)
        break; // failed: the old block stays
      if (e.old_ptr)
        if (auto o = end_object(e.old_ptr); o && o->tid != e.tid)
          freed_elsewhere(*o, e.old_ptr);
      if (e.ptr)
        begin_object(e);
      break;
    case trace::EventKind::kFree:
      if (auto o = end_object(e.ptr); o && !e.range_end && o->tid != e.tid) {
        across_.put(event_key(e.tid, e.ptr, e.tsc), o->sizes);
        freed_elsewhere(*o, e.ptr);
      }
      break;
    default:
      break;
    }
  };
  inspector::HeapSnapshot snapshot;
  return inspector::build_snapshot(r, spec, snapshot, error);
}

void FreedSizes::allocated(uint32_t tid, uint64_t ptr, FreedObject sizes) {
  if (ptr == 0)
    return;
  // Once every allocation freed elsewhere has been met, no more counting.
  if (freed_elsewhere_.size() != 0) {
    uint64_t left;
    if (freed_elsewhere_.erase(event_key(tid, ptr, allocation_number(allocations_seen_, tid, ptr)),
                               left))
      return;
  }
  own_[tid].replace(ptr, sizes);
}

// A thread's own live allocation of the address is what it frees: nobody
// else frees it (those are left out of own_), and no other object can have
// the address while it lives.
std::optional<FreedObject> FreedSizes::freed(uint32_t tid, uint64_t ptr, uint64_t tsc) {
  if (ptr == 0)
    return std::nullopt;
  auto own = own_.find(tid);
  if (own != own_.end())
    if (auto s = own->second.take(ptr))
      return s;
  return across_.take(event_key(tid, ptr, tsc));
}

void FreedSizes::reallocated(uint32_t tid, uint64_t old_ptr, uint64_t ptr, FreedObject sizes) {
  if (ptr == 0 && sizes.size != 0)
    return; // failed: the old block stays
  if (old_ptr) {
    auto own = own_.find(tid);
    if (own != own_.end())
      own->second.take(old_ptr);
  }
  allocated(tid, ptr, sizes);
}

} // namespace memlayout::cli
