#include "stack_table.h"

#include "sys.h"
#include "trace_format.h"
#include "trace_writer.h"

#include <cstring>

namespace memlayout::preload {

Dictionary g_dictionary;

namespace {
constexpr uint8_t kStackEntry = 1, kStringEntry = 2;
// The arena grows by doubling, moved under the lock (entries are found by
// offset): a reservation of its largest size up front counted against an
// RLIMIT_AS the program lowers after it starts, and its mallocs failed.
constexpr size_t kArenaFirst = size_t{1} << 20;
constexpr size_t kArenaMax = size_t{1} << 30;
constexpr size_t kMaxStringBytes = 4096;
constexpr size_t kRecordChunk = 1 << 20;

uint64_t hash_bytes(const void *p, size_t n) {
  auto *b = static_cast<const unsigned char *>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h | 1;
}
} // namespace

struct Dictionary::Entry {
  uint64_t hash;
  uint32_t id;
  uint8_t kind;
  uint8_t pad;
  uint16_t len; // frames or bytes
  // data follows, padded to 8 bytes
  unsigned char *data() { return reinterpret_cast<unsigned char *>(this + 1); }
  size_t data_bytes() const { return kind == kStackEntry ? len * sizeof(uintptr_t) : len; }
  size_t total_bytes() const { return sizeof(Entry) + ((data_bytes() + 7) & ~size_t{7}); }
};

bool Dictionary::reserve(size_t bytes) {
  if (arena_used_ + bytes <= arena_cap_)
    return true;
  size_t cap = arena_cap_ ? arena_cap_ : kArenaFirst;
  while (cap < arena_used_ + bytes)
    cap *= 2;
  if (cap > kArenaMax)
    return false;
  auto *grown = static_cast<unsigned char *>(sys::map_pages(cap));
  if (!grown)
    return false;
  if (arena_) {
    memcpy(grown, arena_, arena_used_);
    sys::unmap_pages(arena_, arena_cap_);
  }
  arena_ = grown;
  arena_cap_ = cap;
  return true;
}

bool Dictionary::grow_table() {
  size_t n = nslots_ ? nslots_ * 2 : 1 << 14;
  auto *slots = static_cast<uint64_t *>(sys::map_pages(n * sizeof(uint64_t)));
  if (!slots)
    return false;
  for (size_t i = 0; i < nslots_; ++i) {
    if (!slots_[i])
      continue;
    auto *e = reinterpret_cast<Entry *>(arena_ + slots_[i] - 1);
    size_t j = e->hash & (n - 1);
    while (slots[j])
      j = (j + 1) & (n - 1);
    slots[j] = slots_[i];
  }
  sys::unmap_pages(slots_, nslots_ * sizeof(uint64_t));
  slots_ = slots;
  nslots_ = n;
  return true;
}

Dictionary::Entry *Dictionary::find_or_add(uint8_t kind, const void *data, size_t len,
                                           uint64_t hash, bool *added) {
  *added = false;
  if ((nentries_ + 1) * 4 > nslots_ * 3 && !grow_table())
    return nullptr;
  size_t bytes = kind == kStackEntry ? len * sizeof(uintptr_t) : len;
  size_t j = hash & (nslots_ - 1);
  for (; slots_[j]; j = (j + 1) & (nslots_ - 1)) {
    auto *e = reinterpret_cast<Entry *>(arena_ + slots_[j] - 1);
    if (e->hash == hash && e->kind == kind && e->len == len && !memcmp(e->data(), data, bytes))
      return e;
  }
  size_t total = sizeof(Entry) + ((bytes + 7) & ~size_t{7});
  if (!reserve(total))
    return nullptr;
  auto *e = reinterpret_cast<Entry *>(arena_ + arena_used_);
  e->hash = hash;
  e->id = next_id_++;
  e->kind = kind;
  e->len = static_cast<uint16_t>(len);
  memcpy(e->data(), data, bytes);
  slots_[j] = arena_used_ + 1;
  arena_used_ += total;
  ++nentries_;
  *added = true;
  pending_.store(true, std::memory_order_release);
  return e;
}

uint32_t Dictionary::intern_stack(const uintptr_t *frames, size_t depth, uint64_t hash) {
  LockGuard g(lock_);
  bool added;
  Entry *e = find_or_add(kStackEntry, frames, depth, hash, &added);
  return e ? e->id : 0;
}

uint32_t Dictionary::intern_string(const char *s) {
  size_t n = strnlen(s, kMaxStringBytes);
  uint64_t h = hash_bytes(s, n);
  LockGuard g(lock_);
  bool added;
  Entry *e = find_or_add(kStringEntry, s, n, h, &added);
  return e ? e->id : 0;
}

void Dictionary::flush_pending() {
  if (!has_pending())
    return;
  LockGuard g(lock_);
  flush_locked();
}

void Dictionary::flush_pending_if_unlocked() {
  if (!has_pending() || !lock_.try_lock())
    return;
  flush_locked();
  lock_.unlock();
}

// Serialises entries [written_, arena_used_) into kStacks and kStrings records
// of at most kRecordChunk bytes each.
void Dictionary::flush_locked() {
  if (written_ == arena_used_) {
    pending_.store(false, std::memory_order_release);
    return;
  }
  if (!scratch_) {
    scratch_cap_ = 2 * kRecordChunk + 64 * trace::kMaxVarintBytes + kMaxStringBytes;
    scratch_ = static_cast<unsigned char *>(sys::map_pages(scratch_cap_));
    if (!scratch_)
      return;
  }
  for (uint8_t kind : {kStringEntry, kStackEntry}) {
    unsigned char *out = scratch_, *w = out;
    uint32_t count = 0;
    auto type = kind == kStackEntry ? trace::RecordType::kStacks : trace::RecordType::kStrings;
    for (size_t off = written_; off < arena_used_;) {
      auto *e = reinterpret_cast<Entry *>(arena_ + off);
      off += e->total_bytes();
      if (e->kind != kind)
        continue;
      w = trace::put_varint(w, e->id);
      w = trace::put_varint(w, e->len);
      if (kind == kStackEntry) {
        auto *f = reinterpret_cast<const uintptr_t *>(e->data());
        for (size_t i = 0; i < e->len; ++i)
          w = trace::put_varint(w, f[i]);
      } else {
        memcpy(w, e->data(), e->len);
        w += e->len;
      }
      ++count;
      if (static_cast<size_t>(w - out) >= kRecordChunk) {
        g_writer.write_record(type, 0, count, out, static_cast<size_t>(w - out));
        w = out;
        count = 0;
      }
    }
    if (count)
      g_writer.write_record(type, 0, count, out, static_cast<size_t>(w - out));
  }
  written_ = arena_used_;
  pending_.store(false, std::memory_order_release);
}

void Dictionary::child_after_fork() {
  written_ = 0;
  pending_.store(arena_used_ != 0, std::memory_order_release);
  lock_.unlock();
}

} // namespace memlayout::preload
