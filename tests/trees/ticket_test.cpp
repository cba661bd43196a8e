// ticket (BST-TK): its versioned lock pair, and the tree's tricky cases —
// removes right under the root, the same keys fought over by every thread,
// and keys that never change staying visible while their neighbours churn.
#include "ticket.h"
#include "tree_factories.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

using namespace memlayout::trees;
using namespace memlayout::trees::test;

TEST_CASE("ticket: a half locks only at the version its search saw", "[ticket]") {
  TicketLockPair lock;
  uint64_t seen = lock.observe();
  REQUIRE(lock.try_lock_half(0, seen));
  CHECK_FALSE(lock.try_lock_half(0, seen)); // held
  CHECK(lock.any_held());
  CHECK(lock.try_lock_half(1, seen)); // the other half is independent
  lock.unlock_half(1);
  lock.unlock_half(0);
  CHECK_FALSE(lock.any_held());
  CHECK_FALSE(lock.try_lock_half(0, seen)); // a new version: the old search is stale
  uint64_t now = lock.observe();
  REQUIRE(lock.try_lock_half(0, now));
  lock.revert_half(0); // nothing changed: searches that saw `now` stay valid
  CHECK(lock.try_lock_half(0, now));
  lock.unlock_half(0);
}

TEST_CASE("ticket: a removed node's lock stays held for good", "[ticket]") {
  TicketLockPair lock;
  uint64_t seen = lock.observe();
  REQUIRE(lock.try_lock_half(1, seen));
  lock.unlock_half(1);
  CHECK_FALSE(lock.try_lock_both_forever(seen)); // half 1 moved on since `seen`
  uint64_t now = lock.observe();
  REQUIRE(lock.try_lock_both_forever(now));
  CHECK(lock.any_held());
  CHECK_FALSE(lock.try_lock_half(0, now));
  CHECK_FALSE(lock.try_lock_half(1, now));
  CHECK_FALSE(lock.try_lock_half(0, lock.observe()));
}

TEST_CASE("ticket: records are 64 bytes in the baseline layout, 32 when fixed", "[ticket]") {
  CHECK(record_kinds(make_ticket, Layout::kBaseline) == std::vector<RecordKind>{{"node", 64}});
  CHECK(record_kinds(make_ticket, Layout::kFixed) == std::vector<RecordKind>{{"node", 32}});
}

// The fixed layout keeps a leaf's value in the word a routing node locks:
// values whose bits read as held halves must neither block updates next to
// them nor fail the quiescent check, and must come back whole.
TEST_CASE("ticket: leaf values that look like held locks", "[ticket]") {
  for (Layout layout : {Layout::kBaseline, Layout::kFixed}) {
    auto t = make_ticket(TreeConfig{layout, AllocPolicy::kMalloc, {}});
    const Value values[] = {-1, 1, Value{1} << 32, (Value{1} << 32) | 1, INT64_MIN, 0};
    Key k = 1;
    for (Value v : values)
      REQUIRE(t->insert(k++, v));
    CHECK(t->check_structure() == "");
    for (Key j = 1; j < k; j += 2) // removes lock the routing nodes above these leaves
      REQUIRE(t->remove(j));
    for (Key j = 20; j < 40; ++j) // inserts split leaves that hold those values
      REQUIRE(t->insert(j, j));
    k = 1;
    for (Value v : values) {
      Value got = 12345;
      bool present = t->lookup(k, &got);
      CHECK(present == (k % 2 == 0));
      if (present)
        CHECK(got == v);
      ++k;
    }
    CHECK(t->check_structure() == "");
  }
}

TEST_CASE("ticket: removes next to the root and of the last key keep the shape", "[ticket]") {
  for (Layout layout : {Layout::kBaseline, Layout::kFixed}) {
    auto t = make_ticket(TreeConfig{layout, AllocPolicy::kMalloc, {}});
    Value v = 0;
    // One key: its leaf sits beside the left sentinel under one routing node.
    REQUIRE(t->insert(5, 50));
    REQUIRE(t->remove(5));
    CHECK_FALSE(t->lookup(5, &v));
    CHECK(t->check_structure() == "");
    // The smallest and largest user keys, around the sentinels' routing keys.
    REQUIRE(t->insert(kMinKey, 1));
    REQUIRE(t->insert(kMaxKey, 2));
    REQUIRE(t->insert(100, 3));
    CHECK(t->check_structure() == "");
    REQUIRE(t->remove(kMinKey));
    REQUIRE(t->lookup(kMaxKey, &v));
    CHECK(v == 2);
    REQUIRE(t->remove(kMaxKey));
    REQUIRE(t->lookup(100, &v));
    CHECK(v == 3);
    REQUIRE(t->remove(100));
    CHECK(t->check_structure() == "");
    int visited = 0;
    t->for_each([&](Key, Value) { ++visited; });
    CHECK(visited == 0);
    // A remove moves the sibling subtree up: every other key stays findable.
    for (Key k = 1; k <= 64; ++k)
      REQUIRE(t->insert(k * 7 % 64 + 1, k));
    for (Key k = 1; k <= 64; k += 2) {
      REQUIRE(t->remove(k));
      for (Key j = k + 1; j <= 64; ++j)
        REQUIRE(t->lookup(j, &v));
    }
    CHECK(t->check_structure() == "");
  }
}

TEST_CASE("ticket: every thread fighting over the same two keys", "[ticket]") {
  auto t = make_ticket(TreeConfig{Layout::kFixed, AllocPolicy::kMalloc, {}});
  constexpr int kThreads = 4;
  std::atomic<long> balance[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      long local[2] = {0, 0};
      for (int n = 0; n < 50'000; ++n) {
        int k = (n + i) & 1;
        if ((n >> 1) & 1)
          local[k] += t->insert(k + 10, k);
        else
          local[k] -= t->remove(k + 10);
      }
      balance[0] += local[0];
      balance[1] += local[1];
    });
  for (auto &th : threads)
    th.join();
  for (int k = 0; k < 2; ++k) {
    Value v = -1;
    bool present = t->lookup(k + 10, &v);
    CHECK(balance[k].load() == (present ? 1 : 0));
    if (present)
      CHECK(v == k);
  }
  CHECK(t->check_structure() == "");
}

TEST_CASE("ticket: keys nobody touches stay visible while their neighbours churn", "[ticket]") {
  for (Layout layout : {Layout::kBaseline, Layout::kFixed}) {
    auto t = make_ticket(TreeConfig{layout, AllocPolicy::kMalloc, {}});
    constexpr Key kRange = 512;
    for (Key k = 2; k <= kRange; k += 2)
      REQUIRE(t->insert(k, k));
    std::atomic<bool> stop{false};
    std::atomic<long> misses{0};
    std::vector<std::thread> churners;
    for (int i = 0; i < 2; ++i)
      churners.emplace_back([&, i] {
        uint64_t x = 88172645463325252ULL + static_cast<uint64_t>(i);
        while (!stop.load(std::memory_order_relaxed)) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          Key odd = static_cast<Key>(x % (kRange / 2)) * 2 + 1;
          if (x & (1u << 20))
            t->insert(odd, odd);
          else
            t->remove(odd);
        }
      });
    std::thread reader([&] {
      for (int round = 0; round < 200; ++round)
        for (Key k = 2; k <= kRange; k += 2) {
          Value v = 0;
          if (!t->lookup(k, &v) || v != k)
            ++misses;
        }
      stop.store(true);
    });
    reader.join();
    for (auto &c : churners)
      c.join();
    CHECK(misses.load() == 0);
    CHECK(t->check_structure() == "");
  }
}
