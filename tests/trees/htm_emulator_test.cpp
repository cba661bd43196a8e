// The HTM emulator on hand-built cases whose answers are known: conflicts at
// line granularity classified true or false, requester wins, strong
// atomicity, capacity from the L1 model, and atomicity under more threads
// than cores.
#include "htm/elided_region.h"
#include "htm/tx_emulator.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

using namespace memlayout::trees::htm;

namespace {

struct alignas(64) Line {
  uint64_t word[8] = {};
};

// A buffer of `lines` 64-byte lines, line-aligned.
struct Lines {
  explicit Lines(size_t lines)
      : mem(static_cast<Line *>(std::aligned_alloc(4096, (lines * 64 + 4095) / 4096 * 4096))),
        n(lines) {
    for (size_t i = 0; i < n; ++i)
      new (&mem[i]) Line();
  }
  ~Lines() { std::free(mem); }
  Line &operator[](size_t i) { return mem[i]; }
  Line *mem;
  size_t n;
};

TxEmulator &emu() { return TxEmulator::instance(); }

void use_model(uint32_t sets, uint32_t ways, uint32_t overflow) {
  emu().set_model(L1Model{sets, ways, overflow});
}

uint64_t read_word(const uint64_t *p) {
  uint64_t v;
  emu().read(p, 8, &v);
  return v;
}
void write_word(uint64_t *p, uint64_t v) { emu().write(p, 8, &v); }

// Thread A runs `first` inside a transaction, then thread B runs `second`
// inside one and commits; then A tries to commit. Returns A's abort, or a
// default AbortInfo (cause kOther, not detailed) when A committed.
struct Outcome {
  bool a_committed = false;
  bool b_committed = false;
  AbortInfo a_abort;
};
Outcome race(std::function<void()> first, std::function<void()> second, uint64_t key_a = 1,
             uint64_t key_b = 2) {
  Outcome o;
  std::barrier step(2);
  std::thread a([&] {
    try {
      emu().begin(key_a, true, 0);
      first();
      step.arrive_and_wait(); // B may go
      step.arrive_and_wait(); // B is done
      emu().commit();
      o.a_committed = true;
    } catch (const TxAborted &) {
      o.a_abort = emu().last_abort();
    }
  });
  std::thread b([&] {
    step.arrive_and_wait();
    try {
      emu().begin(key_b, true, 0);
      second();
      emu().commit();
      o.b_committed = true;
    } catch (const TxAborted &) {
    }
    step.arrive_and_wait();
  });
  a.join();
  b.join();
  return o;
}

} // namespace

TEST_CASE("htm emulator: two writers of different words of one line: a false conflict",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(1);
  Outcome o = race([&] { write_word(&l[0].word[0], 1); }, [&] { write_word(&l[0].word[1], 2); });
  REQUIRE_FALSE(o.a_committed); // requester (B) wins
  REQUIRE(o.b_committed);
  CHECK(o.a_abort.cause == AbortCause::kConflict);
  CHECK(o.a_abort.detailed);
  CHECK_FALSE(o.a_abort.overlap);
  CHECK(o.a_abort.line == reinterpret_cast<uint64_t>(&l[0]));
  CHECK(o.a_abort.victim_write_mask == 0xffull);
  CHECK(o.a_abort.requester_mask == 0xff00ull);
  CHECK(o.a_abort.requester_writes);
  CHECK(o.a_abort.requester == Requester::kTransaction);
  CHECK_FALSE(o.a_abort.same_key);
  // A's write was discarded, B's published.
  CHECK(l[0].word[0] == 0);
  CHECK(l[0].word[1] == 2);
}

TEST_CASE("htm emulator: two writers of the same word: a true conflict", "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(1);
  Outcome o =
      race([&] { write_word(&l[0].word[3], 1); }, [&] { write_word(&l[0].word[3], 2); }, 7, 7);
  REQUIRE_FALSE(o.a_committed);
  CHECK(o.a_abort.cause == AbortCause::kConflict);
  CHECK(o.a_abort.overlap);
  CHECK(o.a_abort.same_key);
  CHECK(o.a_abort.keys_known);
  CHECK(l[0].word[3] == 2);
}

TEST_CASE("htm emulator: a writer dooms a reader, true or false by the bytes", "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(1);
  SECTION("disjoint bytes") {
    Outcome o =
        race([&] { (void)read_word(&l[0].word[0]); }, [&] { write_word(&l[0].word[7], 9); });
    REQUIRE_FALSE(o.a_committed);
    CHECK_FALSE(o.a_abort.overlap);
    CHECK(o.a_abort.victim_read_mask == 0xffull);
    CHECK(o.a_abort.victim_write_mask == 0);
  }
  SECTION("one shared byte") {
    Outcome o = race([&] { (void)read_word(&l[0].word[0]); },
                     [&] {
                       uint8_t b = 5;
                       emu().write(reinterpret_cast<uint8_t *>(&l[0]) + 7, 1, &b);
                     });
    REQUIRE_FALSE(o.a_committed);
    CHECK(o.a_abort.overlap);
    CHECK(o.a_abort.requester_mask == (1ull << 7));
  }
}

TEST_CASE("htm emulator: readers of one line do not conflict; other lines do not either",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(2);
  l[0].word[0] = 11;
  Outcome o = race([&] { CHECK(read_word(&l[0].word[0]) == 11); },
                   [&] {
                     CHECK(read_word(&l[0].word[0]) == 11);
                     write_word(&l[1].word[0], 3);
                   });
  CHECK(o.a_committed);
  CHECK(o.b_committed);
}

TEST_CASE("htm emulator: a reader requesting a written line dooms the writer", "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(1);
  Outcome o = race([&] { write_word(&l[0].word[2], 4); },
                   [&] { CHECK(read_word(&l[0].word[2]) == 0); }); // the old value
  REQUIRE_FALSE(o.a_committed);
  REQUIRE(o.b_committed);
  CHECK(o.a_abort.overlap);
  CHECK_FALSE(o.a_abort.requester_writes);
  CHECK(l[0].word[2] == 0);
}

TEST_CASE("htm emulator: a plain store dooms the transaction that read the line",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  g_emulating.store(true);
  Lines l(1);
  std::barrier step(2);
  AbortInfo info;
  bool committed = false;
  std::thread a([&] {
    try {
      emu().begin(1, true, 0);
      (void)read_word(&l[0].word[4]);
      step.arrive_and_wait();
      step.arrive_and_wait();
      (void)read_word(&l[0].word[5]); // a doomed transaction stops at its next access
      emu().commit();
      committed = true;
    } catch (const TxAborted &) {
      info = emu().last_abort();
    }
  });
  step.arrive_and_wait();
  plain_store(&l[0].word[0], uint64_t{8});
  step.arrive_and_wait();
  a.join();
  REQUIRE_FALSE(committed);
  CHECK(info.cause == AbortCause::kConflict);
  CHECK(info.requester == Requester::kPlain);
  CHECK_FALSE(info.overlap);
  CHECK(l[0].word[0] == 8);
}

TEST_CASE("htm emulator: writes are invisible until commit and discarded on abort",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(1);
  emu().begin(0, false, 0);
  write_word(&l[0].word[0], 42);
  CHECK(read_word(&l[0].word[0]) == 42); // the transaction sees its own write
  CHECK(l[0].word[0] == 0);              // memory does not yet
  emu().commit();
  CHECK(l[0].word[0] == 42);
  CHECK(emu().last_commit_lines() == 1);
  CHECK(emu().last_commit_written_lines() == 1);

  emu().begin(0, false, 0);
  write_word(&l[0].word[1], 43);
  CHECK_THROWS_AS(emu().abort_explicit(0x12), TxAborted);
  CHECK(emu().last_abort().cause == AbortCause::kExplicit);
  CHECK(emu().last_abort().explicit_code == 0x12);
  CHECK(l[0].word[1] == 0);
}

TEST_CASE("htm emulator: a write set over the ways of one set is a capacity abort",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  Lines l(64 * 10); // line i*64 lands in set (i*64) % 64 = 0 for every i
  auto write_lines_of_set_zero = [&](int n) {
    emu().begin(0, false, 0);
    for (int i = 0; i < n; ++i)
      write_word(&l[static_cast<size_t>(i) * 64].word[0], 1);
    emu().commit();
  };
  REQUIRE_NOTHROW(write_lines_of_set_zero(8));
  REQUIRE_THROWS_AS(write_lines_of_set_zero(9), TxAborted);
  const AbortInfo &a = emu().last_abort();
  CHECK(a.cause == AbortCause::kCapacity);
  CHECK(a.write_capacity);
  CHECK(a.set == emu().model().set_of(reinterpret_cast<uint64_t>(&l[0])));
  CHECK(a.written_lines == 9);
  CHECK(a.set_lines_count == 9);
  CHECK(a.sets_used == 1);

  // The same nine lines spread over nine sets fit easily.
  emu().begin(0, false, 0);
  for (int i = 0; i < 9; ++i)
    write_word(&l[static_cast<size_t>(i) * 65].word[0], 1);
  REQUIRE_NOTHROW(emu().commit());
}

TEST_CASE("htm emulator: read-only lines overflow a set into the bounded read tracker",
          "[htm][emulator]") {
  Lines l(64 * 16);
  auto read_lines_of_set_zero = [&](int n) {
    emu().begin(0, false, 0);
    for (int i = 0; i < n; ++i)
      (void)read_word(&l[static_cast<size_t>(i) * 64].word[0]);
    emu().commit();
  };
  use_model(64, 8, 0); // Karnagel's model: reads bound by the L1 too
  REQUIRE_NOTHROW(read_lines_of_set_zero(8));
  REQUIRE_THROWS_AS(read_lines_of_set_zero(9), TxAborted);
  CHECK(emu().last_abort().cause == AbortCause::kCapacity);
  CHECK_FALSE(emu().last_abort().write_capacity);
  use_model(64, 8, 4); // four read-only lines may leave the L1
  REQUIRE_NOTHROW(read_lines_of_set_zero(12));
  REQUIRE_THROWS_AS(read_lines_of_set_zero(13), TxAborted);
  // Written lines may not leave: eight written plus one read still fits
  // (the read is evicted), nine written does not.
  emu().begin(0, false, 0);
  for (int i = 0; i < 8; ++i)
    write_word(&l[static_cast<size_t>(i) * 64].word[0], 1);
  (void)read_word(&l[8 * 64].word[0]);
  REQUIRE_NOTHROW(emu().commit());
  use_model(64, 8, 0);
}

TEST_CASE("htm emulator: transactions are atomic under more threads than cores",
          "[htm][emulator]") {
  use_model(64, 8, 0);
  g_emulating.store(true);
  // Two accounts on different lines and a counter sharing a line with one of
  // them: transfers keep the sum, readers must never see it broken.
  Lines l(2);
  l[0].word[0] = 1000;
  l[1].word[0] = 1000;
  constexpr int kThreads = 8, kOps = 3000;
  std::atomic<uint64_t> broken{0}, commits{0}, aborts{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        for (;;) {
          try {
            emu().begin(static_cast<uint64_t>(t), true, 0);
            uint64_t a = read_word(&l[0].word[0]);
            if (i % 16 == 0)
              std::this_thread::yield(); // let others in while this one is open
            uint64_t b = read_word(&l[1].word[0]);
            if (t % 2 == 0) {
              write_word(&l[0].word[0], a - 1);
              write_word(&l[1].word[0], b + 1);
              write_word(&l[0].word[1], read_word(&l[0].word[1]) + 1);
            } else if (a + b != 2000) {
              broken.fetch_add(1);
            }
            emu().commit();
            commits.fetch_add(1);
            break;
          } catch (const TxAborted &) {
            aborts.fetch_add(1);
            std::this_thread::yield();
          }
        }
      }
    });
  for (auto &t : ts)
    t.join();
  CHECK(broken.load() == 0);
  CHECK(l[0].word[0] + l[1].word[0] == 2000);
  CHECK(l[0].word[1] == kThreads / 2 * kOps); // no lost increment
  CHECK(commits.load() == kThreads * kOps);
  CHECK(aborts.load() > 0); // they did contend
}

TEST_CASE("htm region: retries, then the fallback lock; counts by cause", "[htm][region]") {
  HtmConfig cfg;
  cfg.backend = Backend::kEmulate;
  cfg.retries = RetryPolicy{2, 1, 1};
  cfg.l1 = L1Model{64, 8, 0};
  cfg.descheduled_ns = 0;
  Runtime rt = resolve_runtime(cfg);
  REQUIRE(rt.backend == Backend::kEmulate);
  FallbackLock lock;
  ElidedRegion region("test.region", lock, rt, nullptr);
  Lines l(64 * 10);
  // A body whose write set never fits: one capacity abort per try, then the
  // lock after the policy's capacity budget (1): two aborts, one fallback.
  int runs = 0;
  int r = region.run(0, [&](Tx &tx) {
    ++runs;
    for (int i = 0; i < 9; ++i)
      tx.store(&l[static_cast<size_t>(i) * 64].word[0], uint64_t{7});
    return tx.mode() == Mode::kDirect ? 1 : 0;
  });
  CHECK(r == 1);
  CHECK(runs == 3);
  HtmCounts c = region.counts();
  CHECK(c.aborts[static_cast<int>(AbortCause::kCapacity)] == 2);
  CHECK(c.capacity_write == 2);
  CHECK(c.fallbacks == 1);
  CHECK(c.commits == 0);
  CHECK(l[8 * 64].word[0] == 7);
  // A small body commits.
  region.run(0, [&](Tx &tx) { tx.store(&l[1].word[0], uint64_t{5}); });
  CHECK(region.counts().commits == 1);
  CHECK(l[1].word[0] == 5);
  // Running out of spare records: refill outside, retry, no fallback.
  bool have = false;
  int refills = 0;
  region.run(
      0,
      [&](Tx &tx) {
        if (!have)
          tx.abort_need_records();
      },
      [&] {
        have = true;
        ++refills;
      });
  CHECK(refills == 1);
  CHECK(region.counts().need_records == 1);
  CHECK(region.counts().fallbacks == 1);
}

TEST_CASE("htm region: taking the fallback lock aborts transactions in flight (lock conflict)",
          "[htm][region]") {
  HtmConfig cfg;
  cfg.backend = Backend::kEmulate;
  cfg.descheduled_ns = 0;
  Runtime rt = resolve_runtime(cfg);
  FallbackLock lock;
  ElidedRegion region("test.lock", lock, rt, nullptr);
  Lines l(1);
  std::barrier step(2);
  std::atomic<int> tries{0};
  std::thread a([&] {
    region.run(1, [&](Tx &tx) {
      if (tries.fetch_add(1) == 0) {
        step.arrive_and_wait(); // inside, having read the lock word
        step.arrive_and_wait(); // the lock was taken and released
      }
      tx.store(&l[0].word[0], tx.load(&l[0].word[0]) + 1);
    });
  });
  step.arrive_and_wait();
  lock.acquire();
  lock.release();
  step.arrive_and_wait();
  a.join();
  HtmCounts c = region.counts();
  CHECK(c.conflicts_lock == 1);
  CHECK(c.commits == 1);
  CHECK(l[0].word[0] == 1);
}
