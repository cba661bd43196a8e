// The pool engine linked as the interposer links it: the range allocator on
// its own, isolation from jemalloc's default arena in the same jemalloc,
// thread caches across thread exit, the cache limit, fork and destroy.
#include "seg_core.h"
#include "seg_hot_path.h"
#include "seg_mallocx.h"
#include "seg_range.h"
#include "seg_tcache.h"
#include "seg_test_support.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace seg = memlayout::seg;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool in(const seg::Range &r, const void *p, size_t bytes) {
  return r.contains(p) && reinterpret_cast<uintptr_t>(p) + bytes <= r.begin() + r.size();
}

struct PoolBounds {
  uintptr_t begin, end;
  bool contains(const void *p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a >= begin && a < end;
  }
};

PoolBounds bounds(const seg::Pool *pool) {
  struct seg_pool_stats s {};
  seg::pool_stats(pool, &s);
  return {s.range_begin, s.range_end};
}

} // namespace

TEST_CASE("engine: the range carves aligned extents and takes them back", "[seg]") {
  static seg::Range range; // 2 KiB of slots: not on the stack
  REQUIRE(range.reserve(64 * kMiB, 64 * kMiB, false));
  CHECK(range.begin() % (64 * kMiB) == 0);
  void *meta = range.carve(nullptr, 2 * kMiB, 2 * kMiB);
  REQUIRE(meta == reinterpret_cast<void *>(range.begin()));
  void *a = range.carve(nullptr, 8192, 4096);
  void *b = range.carve(nullptr, 4096, 64 * 1024); // leaves a gap before it
  REQUIRE(a);
  REQUIRE(b);
  CHECK(reinterpret_cast<uintptr_t>(b) % (64 * 1024) == 0);
  CHECK(in(range, b, 4096));
  static_cast<char *>(a)[100] = 1; // accessible
  CHECK(range.held_bytes() == 2 * kMiB + 8192 + 4096);

  // The alignment gap is reused for a fitting request.
  void *c = range.carve(nullptr, 4096, 4096);
  CHECK(reinterpret_cast<uintptr_t>(c) == reinterpret_cast<uintptr_t>(a) + 8192);

  // Given back, purged: comes back zero; a and c coalesce into one extent.
  REQUIRE(range.give_back(a, 8192));
  REQUIRE(range.give_back(c, 4096));
  void *ac = range.carve(nullptr, 12288, 4096);
  CHECK(ac == a);
  CHECK(static_cast<char *>(ac)[100] == 0);

  // Growing in place at the bump pointer.
  uintptr_t frontier = reinterpret_cast<uintptr_t>(b) + 4096;
  CHECK(range.carve(reinterpret_cast<void *>(frontier), 4096, 4096) ==
        reinterpret_cast<void *>(frontier));
  CHECK(range.carve(reinterpret_cast<void *>(range.begin() + 4096), 4096, 4096) == nullptr);

  // Exhaustion: NULL, no crash; giving everything back returns the bump pointer.
  CHECK(range.carve(nullptr, 128 * kMiB, 4096) == nullptr);
  size_t untouched = range.untouched_bytes();
  void *rest = range.carve(nullptr, untouched, 4096);
  REQUIRE(rest);
  CHECK(range.carve(nullptr, 4096, 4096) != nullptr); // the gaps left before b
  CHECK(range.give_back(rest, untouched));
  CHECK(range.untouched_bytes() == untouched);
  CHECK(range.lost_bytes() == 0);
  range.release();
}

TEST_CASE("engine: strict mode reserves PROT_NONE and commits what is carved", "[seg]") {
  seg::force_strict_reservations(true);
  seg::Pool *pool = seg::pool_create("strict", seg::PoolOptions{});
  seg::force_strict_reservations(false);
  REQUIRE(pool);
  auto range = bounds(pool);
  std::vector<void *> objects;
  for (int i = 0; i < 10000; ++i) {
    void *p = seg::pool_alloc(pool, 200, 0);
    REQUIRE(range.contains(p));
    memset(p, 1, 200);
    objects.push_back(p);
  }
  // The far end of the range was never carved: still inaccessible.
  std::string tail = seg_test::mapping_of(range.end - 4096);
  CHECK(tail.find("---p") != std::string::npos);
  for (void *p : objects)
    seg::pool_free(p);
  // The emptied pages went back to the pool, those beyond the few it keeps
  // made inaccessible again; taken anew they are accessible.
  struct seg_pool_stats s {};
  seg::pool_stats(pool, &s);
  size_t emptied = s.mapped_bytes;
  for (void *&p : objects) {
    p = seg::pool_alloc(pool, 200, 0);
    REQUIRE(range.contains(p));
    memset(p, 2, 200);
  }
  seg::pool_stats(pool, &s);
  CHECK(s.mapped_bytes > emptied);
  for (void *p : objects)
    seg::pool_free(p);
  seg::pool_destroy(pool);
  CHECK(seg_test::mapping_of(range.begin).empty());
}

// jemalloc issues #1535 / #825: through the default thread cache, objects of
// a custom arena came back from plain malloc(). Here the default arena of
// the very jemalloc the pools use never sees pool objects, however they are
// freed.
TEST_CASE("engine: jemalloc's default arena never hands out pool objects", "[seg]") {
  seg::Pool *pool = seg::pool_create("iso-default", seg::PoolOptions{});
  auto range = bounds(pool);
  constexpr size_t kObjects = 4000;
  std::vector<void *> objects(kObjects);
  for (auto &p : objects)
    p = seg::pool_alloc(pool, 48, 0);
  std::atomic<bool> leaked{false};
  std::thread other([&] {
    for (void *p : objects)
      seg::pool_free(p);
    for (size_t i = 0; i < 2 * kObjects; ++i) {
      void *d = mlje_malloc(48);
      leaked = leaked || range.contains(d);
      mlje_free(d);
      void *e = mlje_mallocx(48, 0);
      leaked = leaked || range.contains(e);
    }
  });
  other.join();
  for (size_t i = 0; i < 2 * kObjects; ++i)
    leaked = leaked || range.contains(mlje_malloc(48));
  CHECK(!leaked);
  // And default-arena objects freed with mlje_free never come out of the pool.
  std::set<void *> defaults;
  for (size_t i = 0; i < kObjects; ++i)
    defaults.insert(mlje_malloc(48));
  for (void *d : defaults)
    mlje_free(d);
  for (size_t i = 0; i < kObjects; ++i)
    REQUIRE(!defaults.count(seg::pool_alloc(pool, 48, 0)));
  seg::pool_destroy(pool);
}

TEST_CASE("engine: thread caches are released when their threads exit", "[seg]") {
  seg::Pool *a = seg::pool_create("exit-a", seg::PoolOptions{});
  seg::Pool *b = seg::pool_create("exit-b", seg::PoolOptions{});
  unsigned base = seg::thread_caches_in_use();
  std::vector<void *> survivors;
  std::mutex m;
  // More threads than jemalloc has caches: each gets and returns two.
  for (int round = 0; round < 2100; ++round) {
    std::thread([&] {
      void *x = seg::pool_alloc(a, 64, 0);
      void *y = seg::pool_alloc(b, 64, 0);
      seg::pool_free(x);
      std::lock_guard<std::mutex> g(m);
      survivors.push_back(y);
    }).join();
  }
  CHECK(seg::thread_caches_in_use() == base);
  // Still real caches, not the uncached fallback, for a new thread.
  unsigned during = 0;
  std::thread([&] {
    seg::pool_free(seg::pool_alloc(a, 64, 0));
    during = seg::thread_caches_in_use();
  }).join();
  CHECK(during == base + 1);
  struct seg_pool_stats s {};
  seg::pool_stats(b, &s);
  CHECK(s.allocations == 2100);
  CHECK(s.allocated_bytes == 2100 * 64);
  for (void *y : survivors)
    seg::pool_free(y);
  seg::pool_stats(b, &s);
  CHECK(s.allocated_bytes == 0);
  seg::pool_destroy(a);
  seg::pool_destroy(b);
}

TEST_CASE("engine: without thread caches left, pools still work and stay isolated", "[seg]") {
  seg::Pool *pool = seg::pool_create("no-cache", seg::PoolOptions{});
  auto range = bounds(pool);
  std::vector<unsigned> taken;
  for (;;) { // use up jemalloc's explicit caches
    unsigned id;
    size_t len = sizeof id;
    if (mlje_mallctl("tcache.create", &id, &len, nullptr, 0) != 0)
      break;
    taken.push_back(id);
  }
  CHECK(taken.size() > 4000);
  bool all_inside = true;
  std::thread([&] {
    std::vector<void *> objects;
    for (int i = 0; i < 1000; ++i) {
      objects.push_back(seg::pool_alloc(pool, 80, 0));
      all_inside = all_inside && range.contains(objects.back());
    }
    for (void *p : objects)
      seg::pool_free(p);
    for (int i = 0; i < 1000; ++i) {
      void *d = mlje_malloc(80);
      all_inside = all_inside && !range.contains(d);
    }
  }).join();
  CHECK(all_inside);
  struct seg_pool_stats s {};
  seg::pool_stats(pool, &s);
  CHECK(s.allocations == 1000);
  CHECK(s.frees == 1000);
  CHECK(s.allocated_bytes == 0);
  for (unsigned id : taken)
    mlje_mallctl("tcache.destroy", nullptr, nullptr, &id, sizeof id);
  seg::pool_destroy(pool);
}

TEST_CASE("engine: destroy drops other threads' caches, and the slot is reused", "[seg]") {
  seg::Pool *pool = seg::pool_create("drop", seg::PoolOptions{});
  unsigned base = seg::thread_caches_in_use();
  std::atomic<int> phase{0};
  bool second_ok = false;
  std::thread holder([&] {
    seg::pool_free(seg::pool_alloc(pool, 32, 0)); // a cache for this pool
    phase = 1;
    while (phase != 2)
      std::this_thread::yield();
    // The pool was destroyed and a new one made in its slot: this thread's
    // stale entry must not be used for it.
    seg::Pool *next = seg::pool_by_name("drop-next");
    void *p = seg::pool_alloc(next, 32, 0);
    second_ok = bounds(next).contains(p);
    seg::pool_free(p);
  });
  while (phase != 1)
    std::this_thread::yield();
  CHECK(seg::thread_caches_in_use() == base + 1);
  seg::pool_destroy(pool);
  CHECK(seg::thread_caches_in_use() == base);
  seg::Pool *next = seg::pool_create("drop-next", seg::PoolOptions{});
  CHECK(seg::pool_index(next) == seg::pool_index(pool));
  phase = 2;
  holder.join();
  CHECK(second_ok);
  CHECK(seg::thread_caches_in_use() == base);
  seg::pool_destroy(next);
}

TEST_CASE("engine: fork while other threads allocate from pools", "[seg]") {
  seg::Pool *pool = seg::pool_create("fork", seg::PoolOptions{});
  auto range = bounds(pool);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      std::vector<void *> live;
      while (!stop) {
        for (int i = 0; i < 64; ++i)
          live.push_back(seg::pool_alloc(pool, 16 + i * 100, 0));
        for (void *p : live)
          seg::pool_free(p);
        live.clear();
        // Creating and destroying pools takes the engine lock and jemalloc's.
        seg::pool_destroy(seg::pool_create("fork-churn", seg::PoolOptions{}));
      }
    });
  unsigned forks_ok = 0;
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      // The child: only this thread's cache survives; everything works.
      bool ok = seg::thread_caches_in_use() <= 1;
      std::vector<void *> objects;
      for (int k = 0; k < 1000; ++k) {
        objects.push_back(seg::pool_alloc(pool, 100, 0));
        ok = ok && range.contains(objects.back());
      }
      for (void *p : objects)
        seg::pool_free(p);
      seg::Pool *fresh = seg::pool_create("in-child", seg::PoolOptions{});
      ok = ok && fresh && seg::pool_alloc(fresh, 10, 0);
      _exit(ok ? 0 : 1);
    }
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    forks_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  stop = true;
  for (auto &w : workers)
    w.join();
  CHECK(forks_ok == 20);
  seg::pool_destroy(pool);
}

namespace {

bool holds_batch(const seg::SmallPage *page) {
  return reinterpret_cast<uintptr_t>(page->thread_free.load()) & seg::kBatchTag;
}

} // namespace

// Frees from another thread gather in that thread's batch for the page and
// reach the page only when the batch is full or the thread exits; the owner
// gets every one of them back.
TEST_CASE("engine: remote frees reach the page a batch at a time", "[seg]") {
  seg::Pool *pool = seg::pool_create("remote-batch", seg::PoolOptions{});
  constexpr size_t kObjects = 200, kBatch = seg::kRemoteBatchBlocks;
  std::vector<void *> objects(kObjects);
  for (auto &p : objects)
    p = seg::pool_alloc(pool, 48, 0);
  seg::SmallPage *page = seg::small_page_of(objects[0]);
  REQUIRE(page != nullptr);
  for (void *p : objects)
    REQUIRE(seg::small_page_of(p) == page);
  bool empty_before_full = false, batch_when_full = false, last_waits = false;
  std::thread([&] {
    for (size_t i = 0; i + 1 < kBatch; ++i)
      seg::pool_free(objects[i]);
    empty_before_full = page->thread_free.load() == nullptr;
    seg::pool_free(objects[kBatch - 1]);
    batch_when_full = holds_batch(page);
    void *head = page->thread_free.load();
    for (size_t i = kBatch; i < kObjects - kObjects % kBatch; ++i)
      seg::pool_free(objects[i]);
    seg::pool_free(objects[kObjects - kObjects % kBatch]); // one of a batch not yet full
    last_waits = holds_batch(page) && page->thread_free.load() != head;
    for (size_t i = kObjects - kObjects % kBatch + 1; i < kObjects; ++i)
      seg::pool_free(objects[i]);
  }).join(); // its exit hands the last batch over
  CHECK(empty_before_full);
  CHECK(batch_when_full);
  CHECK(last_waits);
  CHECK(holds_batch(page));
  CHECK(page->used == kObjects);

  // The owner takes them all back: at most the fresh blocks it had linked
  // ahead come first.
  std::set<void *> freed(objects.begin(), objects.end());
  size_t reused = 0;
  std::vector<void *> again(kObjects);
  for (auto &p : again) {
    p = seg::pool_alloc(pool, 48, 0);
    reused += freed.count(p);
  }
  CHECK(reused >= kObjects - 16);
  CHECK(page->thread_free.load() == nullptr);
  for (void *p : again)
    seg::pool_free(p);
  struct seg_pool_stats s {};
  seg::pool_stats(pool, &s);
  CHECK(s.allocations == 2 * kObjects);
  CHECK(s.frees == 2 * kObjects);
  CHECK(s.allocated_bytes == 0);
  seg::pool_destroy(pool);
}

// Objects of two classes freed in turn, as a tree frees nodes and their
// descriptors: each page keeps its own batch.
TEST_CASE("engine: remote frees into pages used in turn batch each page", "[seg]") {
  seg::Pool *pool = seg::pool_create("remote-turns", seg::PoolOptions{});
  constexpr size_t kBatch = seg::kRemoteBatchBlocks;
  std::vector<void *> small, large;
  for (size_t i = 0; i < kBatch; ++i) {
    small.push_back(seg::pool_alloc(pool, 48, 0));
    large.push_back(seg::pool_alloc(pool, 64, 0));
  }
  seg::SmallPage *small_page = seg::small_page_of(small[0]);
  seg::SmallPage *large_page = seg::small_page_of(large[0]);
  REQUIRE(small_page != large_page);
  bool both = false, none_early = true;
  std::thread([&] {
    for (size_t i = 0; i < kBatch; ++i) {
      none_early = none_early && (i == 0 || !small_page->thread_free.load()) &&
                   !large_page->thread_free.load();
      seg::pool_free(small[i]);
      seg::pool_free(large[i]);
    }
    both = holds_batch(small_page) && holds_batch(large_page);
  }).join();
  CHECK(none_early);
  CHECK(both);
  for (size_t i = 0; i < kBatch; ++i)
    CHECK(seg::pool_alloc(pool, 48, 0) != nullptr);
  seg::pool_destroy(pool);
}

// A pool destroyed while another thread holds a batch for it and batches
// wait on its pages: nothing of it is touched afterwards (ASan, TSan).
TEST_CASE("engine: destroy with remote batches held and waiting", "[seg]") {
  seg::Pool *pool = seg::pool_create("remote-destroy", seg::PoolOptions{});
  std::vector<void *> objects;
  for (size_t i = 0; i < 500; ++i)
    objects.push_back(seg::pool_alloc(pool, 32, 0));
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  std::thread freer([&] {
    for (void *p : objects)
      seg::pool_free(p); // 8 batches handed over, 4 blocks held
    std::unique_lock<std::mutex> lock(m);
    step = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return step == 2; });
    // Its heap went with the pool: a new pool in the same slot starts afresh.
    seg::Pool *next = seg::pool_create("remote-destroy-2", seg::PoolOptions{});
    void *p = seg::pool_alloc(next, 32, 0);
    seg::pool_free(p);
    seg::pool_destroy(next);
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step == 1; });
  }
  CHECK(holds_batch(seg::small_page_of(objects[0])));
  seg::pool_destroy(pool);
  {
    std::lock_guard<std::mutex> lock(m);
    step = 2;
    cv.notify_all();
  }
  freer.join();
  CHECK(seg::pool_of(objects[0]) == nullptr);
}

// Large objects (jemalloc's, through each thread's own cache) while the
// process forks: the child must not flush the caches of threads it does not
// have, which they may have been updating (it crashed, or handed out memory
// that overlapped live objects, in about 1 child of 7).
TEST_CASE("engine: fork while other threads use large objects", "[seg]") {
  seg::Pool *pool = seg::pool_create("fork-large", seg::PoolOptions{});
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      void *objects[64];
      while (!stop) {
        for (auto &p : objects) {
          p = seg::pool_alloc(pool, 4096, 0);
          memset(p, 0x5a, 4096);
        }
        for (void *p : objects)
          seg::pool_free(p);
      }
    });
  constexpr int kForks = 60;
  int whole = 0;
  for (int i = 0; i < kForks; ++i) {
    usleep(500);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20); // a hang fails too
      static unsigned char *objects[256];
      for (int k = 0; k < 256; ++k) {
        objects[k] = static_cast<unsigned char *>(seg::pool_alloc(pool, 4096, 0));
        memset(objects[k], k, 4096);
      }
      for (int k = 0; k < 256; ++k)
        for (int j = 0; j < 4096; ++j)
          if (objects[k][j] != static_cast<unsigned char>(k))
            _exit(3);
      for (auto *p : objects)
        seg::pool_free(p);
      _exit(0);
    }
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    whole += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  stop = true;
  for (auto &w : workers)
    w.join();
  CHECK(whole == kForks);
  seg::pool_destroy(pool);
}

TEST_CASE("engine: pool_try_free and pool_of on foreign pointers", "[seg]") {
  seg::Pool *pool = seg::pool_create("foreign", seg::PoolOptions{});
  void *mine = seg::pool_alloc(pool, 10, 0);
  void *theirs = mlje_malloc(10);
  int on_stack = 0;
  CHECK(seg::pool_of(mine) == pool);
  CHECK(seg::pool_of(theirs) == nullptr);
  CHECK(seg::pool_of(&on_stack) == nullptr);
  CHECK(seg::pool_of(reinterpret_cast<void *>(uintptr_t{1} << 62)) == nullptr);
  CHECK(!seg::pool_try_free(theirs));
  CHECK(seg::pool_try_free(mine));
  mlje_free(theirs);
  CHECK(std::string(seg::pool_name(pool)) == "foreign");
  CHECK(seg::pool_by_name("foreign") == pool);
  CHECK(seg::pool_by_name("nobody") == nullptr);
  seg::pool_destroy(pool);
  CHECK(seg::pool_by_name("foreign") == nullptr);
}

TEST_CASE("engine: small_class_for gives a class that holds the size at the alignment", "[seg]") {
  using namespace memlayout::seg;
  unsigned served = 0;
  for (size_t bytes = 1; bytes <= kSmallMax + 64; ++bytes) {
    INFO("bytes " << bytes);
    // No alignment: the size's own class.
    unsigned natural = small_class_for(bytes, 0);
    CHECK(natural == (bytes <= kSmallMax ? small_class(bytes) : kSmallClasses));
    for (size_t align = 8; align <= 2 * kSmallMax; align *= 2) {
      INFO("align " << align);
      unsigned c = small_class_for(bytes, align);
      if (c == kSmallClasses)
        continue; // jemalloc serves it
      ++served;
      CHECK(small_class_size(c) >= bytes);
      CHECK(small_class_size(c) % align == 0); // every page starts on 64 KiB
    }
  }
  CHECK(served > kSmallMax); // most small requests at small alignments stay small
}
