// The emulator's machinery (tx_emulator.h). Shared state is a table of line
// stripes: each stripe, under its spin lock, chains the entries of every
// running transaction whose lines hash to it. A transaction's own state (its
// lines, their write buffers, its set counters) is private to its thread
// except for each entry's masks and key, which requesters read to classify a
// conflict, and its state word, which they change to doom it.
//
// Memory order. A transaction reads memory with acquire loads and then
// checks that it was not doomed. Whoever publishes a conflicting value — a
// committer writing back, a plain access, the fallback path — dooms the
// readers first and then stores with release, so a reader that saw the new
// value also sees itself doomed. (No fences: ThreadSanitizer cannot follow
// them.)
#include "tx_emulator.h"

#include "lockstep.h"
#include "spin_lock.h"
#include "thread_index.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace memlayout::trees::htm {
namespace {

constexpr uint64_t kLine = 64;

// The slot's state word: generation << 2 | status. The generation tells a
// running transaction's entries from those of an earlier one of the slot.
enum Status : uint64_t { kIdle = 0, kActive = 1, kDoomed = 2, kCommitting = 3 };
constexpr uint64_t status_of(uint64_t s) { return s & 3; }
constexpr uint64_t gen_of(uint64_t s) { return s >> 2; }
constexpr uint64_t make_state(uint64_t gen, Status st) { return gen << 2 | st; }

uint64_t mask_of(size_t offset, size_t n) {
  return n >= 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << offset;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The clock of the descheduling check, read at every access: the TSC where
// there is one (a few ns), calibrated once against the steady clock.
uint64_t ticks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return now_ns();
#endif
}
double ticks_per_ns() {
  static const double r = [] {
    uint64_t n0 = now_ns(), t0 = ticks();
    while (now_ns() - n0 < 2'000'000)
      ;
    return static_cast<double>(ticks() - t0) / static_cast<double>(now_ns() - n0);
  }();
  return r;
}

class Lock {
public:
  void lock() {
    for (unsigned attempt = 0;; ++attempt) {
      if (!held_.load(std::memory_order_relaxed) &&
          !held_.exchange(true, std::memory_order_acquire))
        return;
      back_off(attempt);
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

private:
  std::atomic<bool> held_{false};
};

// One line of one transaction. `next` and the first setting of the masks
// are guarded by the stripe's lock; later bits are added with atomic ORs.
struct Entry {
  uint64_t line = 0;
  std::atomic<uint64_t> rmask{0}, wmask{0};
  Entry *next = nullptr;
  uint32_t slot = 0;
  uint64_t gen = 0;
  uint64_t key = 0;
  bool key_known = false;
};

struct Stripe {
  Lock lock;
  Entry *head = nullptr;
};

constexpr unsigned kStripeBits = 16;
Stripe g_stripes[1u << kStripeBits];

Stripe &stripe_of(uint64_t line) {
  return g_stripes[((line >> 6) * 0x9e3779b97f4a7c15ULL) >> (64 - kStripeBits)];
}

void unlink(Stripe &s, Entry *e) {
  for (Entry **p = &s.head; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      return;
    }
}

// Atomic copies between memory and a buffer: the memory may be written by a
// committer at the same moment (the reader is then doomed and discards what
// it read); whole aligned words where it can.
void load_bytes(const uint8_t *src, uint8_t *dst, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (((reinterpret_cast<uintptr_t>(src + i)) & 7) == 0 && n - i >= 8) {
      uint64_t w = __atomic_load_n(reinterpret_cast<const uint64_t *>(src + i), __ATOMIC_ACQUIRE);
      std::memcpy(dst + i, &w, 8);
      i += 8;
    } else {
      dst[i] = __atomic_load_n(src + i, __ATOMIC_ACQUIRE);
      ++i;
    }
  }
}

// Stores the bytes of `data` (a line's buffer) that `mask` selects.
void store_masked(uint8_t *line, const uint8_t *data, uint64_t mask) {
  for (unsigned w = 0; w < 8; ++w) {
    uint64_t m = (mask >> (w * 8)) & 0xff;
    if (!m)
      continue;
    uint8_t *dst = line + w * 8;
    if (m == 0xff) {
      uint64_t v;
      std::memcpy(&v, data + w * 8, 8);
      __atomic_store_n(reinterpret_cast<uint64_t *>(dst), v, __ATOMIC_RELEASE);
      continue;
    }
    for (unsigned b = 0; b < 8; ++b)
      if (m & (1u << b))
        __atomic_store_n(dst + b, data[w * 8 + b], __ATOMIC_RELEASE);
  }
}

struct Slot {
  std::atomic<uint64_t> state{0};
  Lock doom_lock;
  AbortInfo doom; // set by whoever dooms the transaction, under doom_lock

  // Owned by the slot's thread.
  uint64_t gen = 0;
  uint64_t key = 0;
  bool key_known = false;
  uint64_t last_tick = 0, gap_ticks = 0; // the descheduling check; gap_ticks 0: off
  L1Model model;
  std::unique_ptr<Entry[]> entries;
  std::unique_ptr<uint8_t[]> data; // 64 bytes per entry: the write buffer
  uint32_t capacity = 0, used = 0, written = 0, evicted = 0;
  std::vector<uint16_t> lines_in_set, writes_in_set;
  // Open addressing from line to entry index, valid where stamp == tx_stamp.
  struct Index {
    uint64_t line;
    uint32_t entry;
    uint32_t stamp;
  };
  std::vector<Index> index;
  uint32_t tx_stamp = 0;
  AbortInfo last;
  uint32_t last_lines = 0, last_written = 0;

  void size_for(const L1Model &m) {
    model = m;
    uint32_t need = m.sets * m.ways + m.read_overflow_lines + 1;
    if (need > capacity) {
      capacity = need;
      entries.reset(new Entry[capacity]);
      data.reset(new uint8_t[static_cast<size_t>(capacity) * kLine]);
      uint32_t slots = 1;
      while (slots < 2 * capacity)
        slots <<= 1;
      index.assign(slots, Index{0, 0, 0});
      tx_stamp = 0;
    }
    lines_in_set.assign(m.sets, 0);
    writes_in_set.assign(m.sets, 0);
  }

  int32_t find(uint64_t line) const {
    size_t mask = index.size() - 1;
    for (size_t i = (line >> 6) * 0x9e3779b97f4a7c15ULL >> 20 & mask;; i = (i + 1) & mask) {
      const Index &x = index[i];
      if (x.stamp != tx_stamp)
        return -1;
      if (x.line == line)
        return static_cast<int32_t>(x.entry);
    }
  }
  void remember(uint64_t line, uint32_t entry) {
    size_t mask = index.size() - 1;
    for (size_t i = (line >> 6) * 0x9e3779b97f4a7c15ULL >> 20 & mask;; i = (i + 1) & mask)
      if (index[i].stamp != tx_stamp) {
        index[i] = Index{line, entry, tx_stamp};
        return;
      }
  }
};

// Slots by thread index, created on a thread's first transaction.
std::atomic<Slot *> g_slots[kMaxThreads];
std::mutex g_slots_mutex;
std::atomic<uint32_t> g_model_sets{64}, g_model_ways{8}, g_model_overflow{0};

Slot &slot_at(uint32_t i) { return *g_slots[i].load(std::memory_order_acquire); }

Slot &my_slot() {
  uint32_t i = thread_index();
  Slot *s = g_slots[i].load(std::memory_order_acquire);
  if (!s) {
    std::lock_guard<std::mutex> g(g_slots_mutex);
    s = g_slots[i].load(std::memory_order_relaxed);
    if (!s) {
      s = new Slot; // lives as long as the process: a later thread reuses it
      g_slots[i].store(s, std::memory_order_release);
    }
  }
  return *s;
}

thread_local uint64_t t_plain_key = 0;
thread_local bool t_plain_key_known = false;

// An access being made: by a transaction (slot) or a plain one.
struct Access {
  uint64_t line;
  uint64_t mask;
  bool writes;
  Requester who;
  uint32_t slot; // kMaxThreads for plain accesses
  uint64_t key;
  bool key_known;
};

enum class DoomResult { kDone, kWaitCommit };

// Dooms the transaction owning `e` for `a`, unless it is gone or already
// doomed. Called with the stripe locked.
DoomResult doom(const Entry &e, const Access &a, uint64_t *wait_state) {
  Slot &v = slot_at(e.slot);
  std::lock_guard<Lock> g(v.doom_lock);
  uint64_t st = v.state.load(std::memory_order_acquire);
  if (gen_of(st) != e.gen)
    return DoomResult::kDone;
  if (status_of(st) == kCommitting) {
    *wait_state = st;
    return DoomResult::kWaitCommit;
  }
  if (status_of(st) != kActive)
    return DoomResult::kDone;
  AbortInfo &d = v.doom;
  d = AbortInfo{};
  d.cause = AbortCause::kConflict;
  d.detailed = true;
  d.line = a.line;
  d.victim_read_mask = e.rmask.load(std::memory_order_relaxed);
  d.victim_write_mask = e.wmask.load(std::memory_order_relaxed);
  d.requester_mask = a.mask;
  d.requester_writes = a.writes;
  d.requester = a.who;
  uint64_t hit = a.writes ? (d.victim_read_mask | d.victim_write_mask) : d.victim_write_mask;
  d.overlap = (hit & a.mask) != 0;
  d.keys_known = a.key_known && e.key_known;
  d.same_key = d.keys_known && a.key == e.key;
  v.state.store(make_state(e.gen, kDoomed), std::memory_order_release);
  return DoomResult::kDone;
}

bool conflicts(const Entry &e, const Access &a) {
  uint64_t w = e.wmask.load(std::memory_order_relaxed);
  if (!a.writes)
    return w != 0;
  return w != 0 || e.rmask.load(std::memory_order_relaxed) != 0;
}

// Locks the line's stripe and dooms every other running transaction that
// `a` conflicts with, waiting out those committing. Returns with the stripe
// locked.
Stripe &lock_and_doom(const Access &a) {
  Stripe &s = stripe_of(a.line);
  for (;;) {
    s.lock.lock();
    uint64_t wait_state = 0;
    uint32_t wait_slot = kMaxThreads;
    for (Entry *e = s.head; e; e = e->next) {
      if (e->line != a.line || e->slot == a.slot || !conflicts(*e, a))
        continue;
      if (doom(*e, a, &wait_state) == DoomResult::kWaitCommit) {
        wait_slot = e->slot;
        break;
      }
    }
    if (wait_slot == kMaxThreads)
      return s;
    s.lock.unlock();
    // A committing transaction finishes without waiting for anyone.
    Slot &c = slot_at(wait_slot);
    for (unsigned attempt = 0; c.state.load(std::memory_order_acquire) == wait_state; ++attempt)
      pause(attempt);
  }
}

void release_entries(Slot &me) {
  for (uint32_t i = 0; i < me.used; ++i) {
    Entry &e = me.entries[i];
    Stripe &s = stripe_of(e.line);
    s.lock.lock();
    unlink(s, &e);
    s.lock.unlock();
  }
}

// Ends the calling thread's transaction as aborted with `why` (unless a
// requester doomed it first: the hardware reports the first cause).
[[noreturn]] void abort_with(Slot &me, const AbortInfo *why) {
  {
    std::lock_guard<Lock> g(me.doom_lock);
    uint64_t st = me.state.load(std::memory_order_relaxed);
    if (status_of(st) == kDoomed || !why)
      me.last = me.doom;
    else
      me.last = *why;
    me.state.store(make_state(me.gen, kDoomed), std::memory_order_release);
  }
  release_entries(me);
  me.used = 0;
  me.state.store(make_state(me.gen, kIdle), std::memory_order_release);
  throw TxAborted{};
}

// The thread lost the CPU since the transaction's last access: a hardware
// transaction would have aborted at that interrupt, before any conflict
// found meanwhile. (The doom a requester set is overridden.)
void check_descheduled(Slot &me) {
  if (!me.gap_ticks)
    return;
  uint64_t now = ticks();
  if (now - me.last_tick > me.gap_ticks) {
    AbortInfo a;
    a.cause = AbortCause::kOther;
    a.detailed = true;
    {
      std::lock_guard<Lock> g(me.doom_lock);
      me.doom = a; // whoever doomed it meanwhile came after the interrupt
    }
    abort_with(me, &a);
  }
}

// After an acquire load of data: a doom that preceded the store it read is seen.
void check_doomed(Slot &me) {
  if (status_of(me.state.load(std::memory_order_acquire)) == kDoomed)
    abort_with(me, nullptr);
}

[[noreturn]] void capacity_abort(Slot &me, uint64_t line, bool write) {
  uint32_t set = me.model.set_of(line);
  AbortInfo a;
  a.cause = AbortCause::kCapacity;
  a.detailed = true;
  a.write_capacity = write;
  a.set = set;
  a.lines_in_set = me.lines_in_set[set];
  a.lines = me.used + 1;
  a.written_lines = me.written;
  for (uint16_t n : me.lines_in_set)
    a.sets_used += n != 0;
  a.set_lines[a.set_lines_count++] = line; // the line that did not fit
  for (uint32_t i = 0; i < me.used && a.set_lines_count < AbortInfo::kMaxSetLines; ++i)
    if (me.entries[i].line != line && me.model.set_of(me.entries[i].line) == set)
      a.set_lines[a.set_lines_count++] = me.entries[i].line;
  abort_with(me, &a);
}

// The L1 model. Written lines must stay in their set: one more than its ways
// aborts. A line beyond the ways of its set pushes a read-only line of that
// set out to the secondary tracker (written lines are at most `ways`, so the
// set has one); one more than the tracker holds aborts.
void account_first_write(Slot &me, uint64_t line) {
  uint32_t set = me.model.set_of(line);
  ++me.written;
  if (++me.writes_in_set[set] > me.model.ways)
    capacity_abort(me, line, true);
}
void account_new_line(Slot &me, uint64_t line) {
  uint32_t set = me.model.set_of(line);
  if (++me.lines_in_set[set] > me.model.ways && ++me.evicted > me.model.read_overflow_lines)
    capacity_abort(me, line, false);
}

Entry &new_entry(Slot &me, uint64_t line) {
  if (me.used == me.capacity) // unreachable: the model aborts first
    capacity_abort(me, line, false);
  uint32_t i = me.used++;
  Entry &e = me.entries[i];
  e.line = line;
  e.rmask.store(0, std::memory_order_relaxed);
  e.wmask.store(0, std::memory_order_relaxed);
  e.next = nullptr;
  e.slot = thread_index();
  e.gen = me.gen;
  e.key = me.key;
  e.key_known = me.key_known;
  me.remember(line, i);
  return e;
}

Access access_of(const Slot &me, uint64_t line, uint64_t mask, bool writes) {
  return Access{line, mask, writes, Requester::kTransaction, thread_index(), me.key, me.key_known};
}

// An access to bytes [addr, addr + n) of one line.
struct Part {
  uint64_t line;
  size_t off;
  uint64_t mask;
};
Part begin_part(Slot &me, const void *addr, size_t n) {
  check_descheduled(me);
  check_doomed(me);
  uint64_t line = reinterpret_cast<uintptr_t>(addr) & ~(kLine - 1);
  size_t off = reinterpret_cast<uintptr_t>(addr) - line;
  return Part{line, off, mask_of(off, n)};
}
void end_part(Slot &me) {
  if (me.gap_ticks)
    me.last_tick = ticks();
}

// Calls part(address, bytes) for the pieces of [addr, addr + n) on each line.
template <class F> void by_line(const void *addr, size_t n, F &&part) {
  auto a = reinterpret_cast<uintptr_t>(addr);
  for (size_t done = 0; done < n;) {
    size_t len = std::min(n - done, kLine - ((a + done) & (kLine - 1)));
    part(done, len);
    done += len;
  }
}

void read_part(Slot &me, const uint8_t *addr, size_t n, uint8_t *out) {
  auto [line, off, m] = begin_part(me, addr, n);
  int32_t idx = me.find(line);
  Entry *e;
  if (idx < 0) {
    account_new_line(me, line);
    Access a = access_of(me, line, m, false);
    Stripe &s = lock_and_doom(a);
    e = &new_entry(me, line);
    e->rmask.store(m, std::memory_order_relaxed);
    e->next = s.head;
    s.head = e;
    s.lock.unlock();
  } else {
    e = &me.entries[idx];
  }
  uint64_t w = e->wmask.load(std::memory_order_relaxed);
  const uint8_t *buf = &me.data[static_cast<size_t>(e - me.entries.get()) * kLine];
  if ((w & m) != m) {
    e->rmask.fetch_or(m & ~w, std::memory_order_relaxed);
    load_bytes(addr, out, n);
    check_doomed(me);
  }
  for (size_t i = 0; i < n; ++i)
    if (w >> (off + i) & 1)
      out[i] = buf[off + i];
  end_part(me);
}

void write_part(Slot &me, uint8_t *addr, size_t n, const uint8_t *in) {
  auto [line, off, m] = begin_part(me, addr, n);
  int32_t idx = me.find(line);
  Entry *e = idx < 0 ? nullptr : &me.entries[idx];
  if (!e || e->wmask.load(std::memory_order_relaxed) == 0) {
    account_first_write(me, line);
    if (!e)
      account_new_line(me, line);
    Access a = access_of(me, line, m, true);
    Stripe &s = lock_and_doom(a);
    if (!e) {
      e = &new_entry(me, line);
      e->next = s.head;
      s.head = e;
    }
    e->wmask.store(m, std::memory_order_relaxed);
    s.lock.unlock();
  } else {
    e->wmask.fetch_or(m, std::memory_order_relaxed);
  }
  std::memcpy(&me.data[static_cast<size_t>(e - me.entries.get()) * kLine + off], in, n);
  end_part(me);
}

} // namespace

TxEmulator::TxEmulator() = default;

TxEmulator &TxEmulator::instance() {
  static TxEmulator e;
  return e;
}

void TxEmulator::set_model(const L1Model &m) {
  g_model_sets.store(m.sets);
  g_model_ways.store(m.ways);
  g_model_overflow.store(m.read_overflow_lines);
}

L1Model TxEmulator::model() const {
  return L1Model{g_model_sets.load(), g_model_ways.load(), g_model_overflow.load()};
}

void TxEmulator::begin(uint64_t key, bool key_known, uint64_t descheduled_ns) {
  lockstep_step();
  if (lockstep_joined())
    descheduled_ns = 0; // the turns are the schedule: no thread is preempted in the model
  Slot &me = my_slot();
  L1Model m = model();
  if (m.sets != me.model.sets || m.ways != me.model.ways ||
      m.read_overflow_lines != me.model.read_overflow_lines || !me.capacity)
    me.size_for(m);
  else {
    std::fill(me.lines_in_set.begin(), me.lines_in_set.end(), 0);
    std::fill(me.writes_in_set.begin(), me.writes_in_set.end(), 0);
  }
  if (++me.tx_stamp == 0) { // wrapped: old stamps could match again
    std::fill(me.index.begin(), me.index.end(), Slot::Index{0, 0, 0});
    me.tx_stamp = 1;
  }
  me.used = me.written = me.evicted = 0;
  me.key = key;
  me.key_known = key_known;
  me.gap_ticks = descheduled_ns
                     ? static_cast<uint64_t>(static_cast<double>(descheduled_ns) * ticks_per_ns())
                     : 0;
  me.last_tick = me.gap_ticks ? ticks() : 0;
  ++me.gen;
  me.state.store(make_state(me.gen, kActive), std::memory_order_seq_cst);
}

void TxEmulator::commit() {
  lockstep_step();
  Slot &me = my_slot();
  check_descheduled(me);
  bool doomed;
  {
    std::lock_guard<Lock> g(me.doom_lock);
    doomed = status_of(me.state.load(std::memory_order_relaxed)) != kActive;
    if (!doomed)
      me.state.store(make_state(me.gen, kCommitting), std::memory_order_relaxed);
  }
  if (doomed)
    abort_with(me, nullptr);
  for (uint32_t i = 0; i < me.used; ++i) {
    Entry &e = me.entries[i];
    if (uint64_t w = e.wmask.load(std::memory_order_relaxed))
      store_masked(reinterpret_cast<uint8_t *>(e.line), &me.data[i * kLine], w);
  }
  release_entries(me);
  me.last_lines = me.used;
  me.last_written = me.written;
  me.used = 0;
  me.state.store(make_state(me.gen, kIdle), std::memory_order_release);
}

void TxEmulator::abort_explicit(uint8_t code) {
  AbortInfo a;
  a.cause = AbortCause::kExplicit;
  a.explicit_code = code;
  a.detailed = true;
  abort_with(my_slot(), &a);
}

bool TxEmulator::in_transaction() const {
  Slot &me = my_slot();
  uint64_t st = status_of(me.state.load(std::memory_order_relaxed));
  return st == kActive || st == kDoomed;
}

void TxEmulator::read(const void *addr, size_t n, void *out) {
  lockstep_step();
  Slot &me = my_slot();
  by_line(addr, n, [&](size_t at, size_t len) {
    read_part(me, static_cast<const uint8_t *>(addr) + at, len, static_cast<uint8_t *>(out) + at);
  });
}

void TxEmulator::write(void *addr, size_t n, const void *in) {
  lockstep_step();
  Slot &me = my_slot();
  by_line(addr, n, [&](size_t at, size_t len) {
    write_part(me, static_cast<uint8_t *>(addr) + at, len, static_cast<const uint8_t *>(in) + at);
  });
}

const AbortInfo &TxEmulator::last_abort() const { return my_slot().last; }
uint32_t TxEmulator::last_commit_lines() const { return my_slot().last_lines; }
uint32_t TxEmulator::last_commit_written_lines() const { return my_slot().last_written; }

void TxEmulator::set_plain_key(uint64_t key, bool known) {
  t_plain_key = key;
  t_plain_key_known = known;
}

TxEmulator::PlainLock TxEmulator::lock_for_plain(const void *addr, size_t n, bool writes,
                                                 Requester who) {
  lockstep_step();
  uint64_t line = reinterpret_cast<uintptr_t>(addr) & ~(kLine - 1);
  size_t off = reinterpret_cast<uintptr_t>(addr) - line;
  Access a{line,
           mask_of(off, std::min(n, kLine - off)),
           writes,
           who,
           kMaxThreads,
           t_plain_key,
           t_plain_key_known};
  // The access itself stores with release: a reader that sees it sees its doom.
  return PlainLock{&lock_and_doom(a)};
}

void TxEmulator::unlock_plain(PlainLock l) { static_cast<Stripe *>(l.stripe)->lock.unlock(); }

} // namespace memlayout::trees::htm
