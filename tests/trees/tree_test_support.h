// The fixture every per-tree test shares: the values it stores, filling a
// tree and reading its contents back, counting a pool's live records, and
// the concurrent drivers that several trees run with their own parameters
// (stable keys under churn, per-key accounting, one or a few keys fought
// over by every thread). Each driver takes the tree's type as a template
// parameter, so the tests call the tree directly. A tree's own test file
// then holds its probe (access to its internals) and its own scenarios.
#pragma once

#include "epoch.h"
#include "map.h"

#include <memlayout/seg.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace memlayout::trees::test {

// What the tests store under a key: never the key itself, so a lookup that
// returns another node's value fails, and a failure message shows whose
// value it was (50007: key 50's).
inline Value value_of(Key key) { return key * 1000 + 7; }

// Quiescent only: the tree's keys and values, in key order.
inline std::map<Key, Value> contents(const ConcurrentMap &m) {
  std::map<Key, Value> out;
  m.for_each([&](Key k, Value v) { out.emplace(k, v); });
  return out;
}

// What contents() should read after the keys were inserted with value_of's
// values.
inline std::map<Key, Value> expected_of(std::initializer_list<Key> keys) {
  std::map<Key, Value> out;
  for (Key k : keys)
    out.emplace(k, value_of(k));
  return out;
}

// first..last in an order shuffled with seed.
inline std::vector<Key> shuffled_keys(Key first, Key last, uint64_t seed) {
  std::vector<Key> keys;
  for (Key k = first; k <= last; ++k)
    keys.push_back(k);
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(seed));
  return keys;
}

// Inserts the keys in the order given (the order shapes an unbalanced tree).
template <class Tree> void fill(Tree &tree, std::initializer_list<Key> keys) {
  for (Key k : keys)
    REQUIRE(tree.insert(k, value_of(k)));
}

// A record kind as a tree registers it with its RecordAllocator.
struct RecordKind {
  std::string name;
  size_t size;
  bool operator==(const RecordKind &) const = default;
  friend std::ostream &operator<<(std::ostream &os, const RecordKind &k) {
    return os << k.name << ": " << k.size << " B";
  }
};

// The record kinds of the tree `make` builds in `layout`, in registration order.
inline std::vector<RecordKind> record_kinds(TreeFactory make, Layout layout) {
  std::unique_ptr<ConcurrentMap> tree = make(TreeConfig{layout, AllocPolicy::kMalloc, {}});
  const RecordAllocator &r = tree->records();
  std::vector<RecordKind> kinds;
  for (RecordAllocator::Kind k = 0; k < r.kind_count(); ++k)
    kinds.push_back({r.kind_name(k), r.record_size(k)});
  return kinds;
}

// rounds times: inserts keys 1..16 in a scattered order (k * 7 % 17), then
// removes them all, so every round retires what the previous one built.
template <class Tree> void churn_sixteen_keys(Tree &tree, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    for (Key k = 1; k <= 16; ++k)
      REQUIRE(tree.insert(k * 7 % 17, value_of(k)));
    for (Key k = 1; k <= 16; ++k)
      REQUIRE(tree.remove(k));
  }
}

// What one thread's retired records that wait for the epoch may number: the
// buckets of its last three epochs (trees/epoch.h), and the tree's own.
inline uint64_t limbo_bound() { return 3 * epoch_retires_per_scan() + 100; }

// Live records of a pool: what it allocated and has not freed.
struct PoolCount {
  seg_pool *pool;
  uint64_t allocations = 0, frees = 0;
  explicit PoolCount(const char *name) : pool(seg_pool_create(name, nullptr)) {
    REQUIRE(pool);
    refresh();
  }
  void refresh() {
    struct seg_pool_stats st {};
    REQUIRE(seg_pool_stats(pool, &st) == 0);
    allocations = st.allocations;
    frees = st.frees;
  }
};

// Runs body(thread index) on `threads` threads and waits for them all.
template <class Body> void run_threads(int threads, Body body) {
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back(body, t);
  for (auto &th : running)
    th.join();
}

// Two threads, `rounds` times in lockstep: thread 0 runs prepare(round)
// alone, then both run race(round, thread) at the same moment. Returns how
// many race calls returned false.
template <class Prepare, class Race>
int failures_of_lockstep_races(int rounds, Prepare prepare, Race race) {
  std::barrier sync(2);
  std::atomic<int> failures{0};
  run_threads(2, [&](int id) {
    for (int round = 0; round < rounds; ++round) {
      if (id == 0)
        prepare(round);
      sync.arrive_and_wait();
      if (!race(round, id))
        failures.fetch_add(1);
      sync.arrive_and_wait();
    }
  });
  return failures.load();
}

// On an empty tree: the keys of 1..range divisible by 4 are inserted first
// (in an order shuffled with seed) and never removed. Two writers insert and
// remove the other keys (writer_ops attempts each) while two readers look
// the stable keys up until the writers are done: no lookup may miss one.
template <class Tree>
void check_stable_keys_never_missed(Tree &tree, Key range, int writer_ops, uint64_t seed) {
  for (Key k : shuffled_keys(1, range, seed))
    if (k % 4 == 0)
      REQUIRE(tree.insert(k, value_of(k)));
  constexpr int kWriters = 2, kReaders = 2;
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> misses{0}, lookups{0};
  run_threads(kWriters + kReaders, [&](int t) {
    if (t < kWriters) {
      std::mt19937_64 rng(t);
      for (int i = 0; i < writer_ops; ++i) {
        Key k = static_cast<Key>(rng() % range) + 1;
        if (k % 4 == 0)
          continue;
        if (rng() % 2)
          tree.insert(k, value_of(k));
        else
          tree.remove(k);
      }
      writers_done.fetch_add(1);
      return;
    }
    std::mt19937_64 rng(100 + t - kWriters);
    uint64_t missed = 0, done = 0;
    while (writers_done.load(std::memory_order_relaxed) < kWriters) {
      Key k = 4 * (static_cast<Key>(rng() % (range / 4)) + 1);
      Value v = 0;
      if (!tree.lookup(k, &v) || v != value_of(k))
        ++missed;
      ++done;
    }
    misses.fetch_add(missed);
    lookups.fetch_add(done);
  });
  CHECK(misses.load() == 0);
  CHECK(lookups.load() > 0);
  CHECK(tree.check_structure() == "");
}

// Per-key accounting, as in the generic suite: on an empty tree, `threads`
// threads insert and remove keys 1..range at random (ops each). Per key, the
// successful inserts minus the successful removes of all threads must be 0
// or 1, and say whether the key is there at the end.
template <class Tree> void check_per_key_accounting(Tree &tree, Key range, int threads, int ops) {
  std::vector<std::vector<int>> delta(threads, std::vector<int>(range + 1, 0));
  run_threads(threads, [&](int t) {
    std::mt19937_64 rng(t);
    for (int i = 0; i < ops; ++i) {
      Key k = static_cast<Key>(rng() % range) + 1;
      if (rng() % 2)
        delta[t][k] += tree.insert(k, value_of(k));
      else
        delta[t][k] -= tree.remove(k);
    }
  });
  for (Key k = 1; k <= range; ++k) {
    int sum = 0;
    for (int t = 0; t < threads; ++t)
      sum += delta[t][k];
    INFO("key " << k);
    REQUIRE((sum == 0 || sum == 1));
    Value v = 0;
    CHECK(tree.lookup(k, &v) == (sum == 1));
  }
  CHECK(tree.check_structure() == "");
}

// Four contended keys, each next to a stable key nobody updates; the tree
// holds the stable keys (and, when contended_present, the contended ones).
// Four threads, started together, insert, remove or look up (then also look
// up the slot's stable key) at random: no lookup may see a wrong value or
// miss a stable key, and the per-key accounting must match the contents.
template <class Tree>
void check_contended_keys_next_to_stable_ones(Tree &tree, const Key (&contended)[4],
                                              const Key (&stable)[4], bool contended_present,
                                              unsigned seed) {
  constexpr int kThreads = 4;
  constexpr int kOps = 200'000;
  std::vector<std::vector<int>> delta(kThreads, std::vector<int>(4, 0));
  std::atomic<uint64_t> wrong{0};
  std::barrier start(kThreads);
  run_threads(kThreads, [&](int i) {
    std::vector<int> &d = delta[i];
    start.arrive_and_wait();
    std::mt19937_64 r(i + seed);
    uint64_t bad = 0;
    for (int n = 0; n < kOps; ++n) {
      size_t slot = r() % 4;
      Key k = contended[slot];
      Value v = 0;
      switch (r() % 3) {
      case 0:
        d[slot] += tree.insert(k, value_of(k));
        break;
      case 1:
        d[slot] -= tree.remove(k);
        break;
      default:
        if (tree.lookup(k, &v) && v != value_of(k))
          ++bad;
        Key s = stable[slot];
        if (!tree.lookup(s, &v) || v != value_of(s))
          ++bad;
      }
    }
    wrong += bad;
  });
  CHECK(wrong.load() == 0);
  std::map<Key, Value> want;
  for (Key s : stable)
    want.emplace(s, value_of(s));
  for (size_t slot = 0; slot < 4; ++slot) {
    int sum = contended_present ? 1 : 0;
    for (int i = 0; i < kThreads; ++i)
      sum += delta[i][slot];
    REQUIRE((sum == 0 || sum == 1));
    if (sum)
      want.emplace(contended[slot], value_of(contended[slot]));
  }
  CHECK(contents(tree) == want);
  CHECK(tree.check_structure() == "");
}

// `threads` threads each alternate insert(key, value) and remove(key), ops
// times: successes must net out to whether the key is there at the end
// (present_before: it was there when they started).
template <class Tree>
void check_one_key_contended(Tree &tree, Key key, Value value, bool present_before, int threads,
                             int ops) {
  std::atomic<long> net{present_before ? 1 : 0};
  run_threads(threads, [&](int) {
    long mine = 0;
    for (int i = 0; i < ops; ++i)
      mine += (i % 2 == 0) ? tree.insert(key, value) : -static_cast<long>(tree.remove(key));
    net.fetch_add(mine);
  });
  Value v = 0;
  bool present = tree.lookup(key, &v);
  CHECK(net.load() == (present ? 1 : 0));
  CHECK(tree.check_structure() == "");
}

} // namespace memlayout::trees::test
