// Epoch-based reclamation (trees/epoch.h): nothing is freed while a thread
// that may hold it is inside an operation, and everything is freed once no
// thread is.
#include "epoch.h"

#include <catch2/catch.hpp>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace memlayout::trees;

namespace {

// glibc's free() writes its free-list pointer and key over the first 16 bytes
// of a small chunk, so a record freed too early loses its canary.
struct Canary {
  uint64_t front;
  uint64_t back;
};
constexpr uint64_t kFront = 0x5eed5eed5eed5eedULL;
constexpr uint64_t kBack = ~kFront;

struct CanaryAllocator {
  RecordAllocator records{"epoch-test", AllocPolicy::kMalloc};
  RecordAllocator::Kind kind = records.add_kind("canary", sizeof(Canary));

  Canary *new_canary() {
    auto *c = static_cast<Canary *>(records.allocate(kind, sizeof(Canary)));
    c->front = kFront;
    c->back = kBack;
    return c;
  }
  void retire_canary(Canary *c) { retire(records, kind, c); }
};

// Runs empty operations until every retired record is freed, or gives up.
size_t drain(size_t max_ops = 1'000'000) {
  for (size_t i = 0; i < max_ops && retired_pending() != 0; ++i)
    EpochGuard g;
  return retired_pending();
}

} // namespace

TEST_CASE("epoch: retired records wait for a thread inside an operation", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  std::atomic<int> stage{0};
  std::thread reader([&] {
    EpochGuard g;
    stage.store(1);
    while (stage.load() != 2)
      std::this_thread::yield();
  });
  while (stage.load() != 1)
    std::this_thread::yield();

  constexpr size_t kRetired = 1000;
  for (size_t i = 0; i < kRetired; ++i) {
    EpochGuard g;
    alloc.retire_canary(alloc.new_canary());
  }
  for (int i = 0; i < 10'000; ++i)
    EpochGuard g;
  // The reader entered before any of them was retired: none may be freed.
  CHECK(retired_pending() == kRetired);

  stage.store(2);
  reader.join();
  CHECK(drain() == 0);
}

TEST_CASE("epoch: readers never see a record freed under them", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  std::atomic<Canary *> current{alloc.new_canary()};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> torn{0}, reads{0};

  auto read_loop = [&] {
    uint64_t local_torn = 0, local_reads = 0;
    while (!done.load(std::memory_order_relaxed)) {
      EpochGuard g;
      Canary *c = current.load(std::memory_order_acquire);
      for (int i = 0; i < 8; ++i) {
        // atomic_ref: a fresh load each time, not one hoisted out of the loop.
        uint64_t front = std::atomic_ref<uint64_t>(c->front).load(std::memory_order_relaxed);
        uint64_t back = std::atomic_ref<uint64_t>(c->back).load(std::memory_order_relaxed);
        local_torn += front != kFront || back != kBack;
      }
      ++local_reads;
    }
    torn += local_torn;
    reads += local_reads;
  };
  std::thread r1(read_loop), r2(read_loop);
  for (int i = 0; i < 200'000; ++i) {
    EpochGuard g;
    Canary *old = current.exchange(alloc.new_canary(), std::memory_order_acq_rel);
    alloc.retire_canary(old);
  }
  done.store(true);
  r1.join();
  r2.join();
  CHECK(reads.load() > 0);
  CHECK(torn.load() == 0);
  {
    EpochGuard g;
    alloc.retire_canary(current.load());
  }
  CHECK(drain() == 0);
}

TEST_CASE("epoch: a nested guard keeps the thread inside until the outer one ends", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  std::atomic<int> stage{0};
  std::thread holder([&] {
    EpochGuard outer;
    { EpochGuard inner; }
    stage.store(1);
    while (stage.load() != 2)
      std::this_thread::yield();
  });
  while (stage.load() != 1)
    std::this_thread::yield();
  for (int i = 0; i < 500; ++i) {
    EpochGuard g;
    alloc.retire_canary(alloc.new_canary());
  }
  for (int i = 0; i < 10'000; ++i)
    EpochGuard g;
  CHECK(retired_pending() == 500);
  stage.store(2);
  holder.join();
  CHECK(drain() == 0);
}

TEST_CASE("epoch: records left by exited threads are freed by the others", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  // Threads come and go (their thread records are reused), each leaving
  // records no advance could free yet.
  for (int t = 0; t < 50; ++t) {
    std::thread([&] {
      for (int i = 0; i < 100; ++i) {
        EpochGuard g;
        alloc.retire_canary(alloc.new_canary());
      }
    }).join();
  }
  CHECK(retired_pending() > 0);
  CHECK(drain() == 0);
}

TEST_CASE("epoch: reclaim_all frees everything at once when quiescent", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  for (int i = 0; i < 300; ++i) {
    EpochGuard g;
    alloc.retire_canary(alloc.new_canary());
  }
  CHECK(retired_pending() > 0);
  reclaim_all();
  CHECK(retired_pending() == 0);
}

TEST_CASE("epoch: concurrent retirement from several threads frees all", "[epoch]") {
  reclaim_all();
  CanaryAllocator alloc;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20'000; ++i) {
        EpochGuard g;
        alloc.retire_canary(alloc.new_canary());
      }
    });
  for (auto &t : threads)
    t.join();
  CHECK(drain() == 0);
}

// The plain announcement is only safe with the scanners' membarrier: where
// the kernel has it and nothing asks for fences, the guards use it; else (the
// suite runs these tests again with MEMLAYOUT_EPOCH_FENCE=1, and under
// ThreadSanitizer) every guard fences.
TEST_CASE("epoch: operations announce with a plain store where the kernel has membarrier",
          "[epoch]") {
  { EpochGuard g; }
  long commands = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0U, 0);
  [[maybe_unused]] bool kernel_has_it =
      commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  const char *asked = std::getenv("MEMLAYOUT_EPOCH_FENCE");
  [[maybe_unused]] bool fences_asked = asked && std::strcmp(asked, "0") != 0;
#if defined(__SANITIZE_THREAD__)
  bool plain = false;
#else
  bool plain = kernel_has_it && !fences_asked;
#endif
  INFO("membarrier commands " << commands << ", MEMLAYOUT_EPOCH_FENCE "
                              << (asked ? asked : "unset"));
  CHECK(std::string(epoch_announcement()) == (plain ? "membarrier" : "fence"));
}

// A forked child has the parent's registration or registers again: either
// way its scans work and its records are freed (a failed membarrier aborts).
TEST_CASE("epoch: a forked child frees what it retires", "[epoch]") {
  reclaim_all();
  { EpochGuard g; }
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    CanaryAllocator alloc;
    for (int i = 0; i < 5'000; ++i) {
      EpochGuard g;
      alloc.retire_canary(alloc.new_canary());
    }
    _exit(drain() == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
