// The C API of libmemlayout_seg (<memlayout/seg.h>) as a program links it.
#include "seg_test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <mutex>
#include <set>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using seg_test::bounds_of;
using seg_test::stats_of;

namespace {

bool aligned(const void *p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

} // namespace

TEST_CASE("pool: each pool's objects lie in its own range, never in the heap", "[seg]") {
  seg_pool *a = seg_pool_create("iso-a", nullptr);
  seg_pool *b = seg_pool_create("iso-b", nullptr);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a != b);
  auto ra = bounds_of(a), rb = bounds_of(b);
  REQUIRE(ra.end > ra.begin);
  REQUIRE((ra.end <= rb.begin || rb.end <= ra.begin)); // disjoint
  CHECK(ra.end - ra.begin == (size_t{64} << 30));      // the default reservation

  std::vector<void *> in_a, in_b, in_heap;
  for (size_t i = 0; i < 20000; ++i) {
    size_t size = 1 + (i * 37) % 3000;
    in_a.push_back(seg_malloc(a, size));
    in_heap.push_back(malloc(size));
    in_b.push_back(seg_malloc(b, size));
    if (i % 3 == 0) { // churn: reuse must stay in the pool
      seg_free(in_a[i / 2]);
      in_a[i / 2] = seg_malloc(a, size);
    }
  }
  for (size_t i = 0; i < in_a.size(); ++i) {
    REQUIRE(ra.contains(in_a[i]));
    REQUIRE(seg_pool_of(in_a[i]) == a);
    REQUIRE(rb.contains(in_b[i]));
    REQUIRE(seg_pool_of(in_b[i]) == b);
    REQUIRE(!ra.contains(in_heap[i]));
    REQUIRE(!rb.contains(in_heap[i]));
    REQUIRE(seg_pool_of(in_heap[i]) == nullptr);
  }
  for (void *p : in_a)
    seg_free(p);
  for (void *p : in_b)
    seg_free(p);
  for (void *p : in_heap)
    seg_free(p); // not a pool pointer: goes to free()
  CHECK(stats_of(a).allocated_bytes == 0);
  CHECK(stats_of(b).allocated_bytes == 0);
}

TEST_CASE("pool: objects freed by another thread stay in their pool", "[seg]") {
  seg_pool *a = seg_pool_create("xfree-a", nullptr);
  seg_pool *b = seg_pool_create("xfree-b", nullptr);
  auto ra = bounds_of(a);
  constexpr size_t kObjects = 5000;
  std::vector<void *> objects(kObjects);
  std::thread([&] {
    for (auto &p : objects)
      p = seg_malloc(a, 48);
  }).join();
  std::set<void *> freed(objects.begin(), objects.end());

  std::vector<void *> from_b, from_heap, again;
  std::thread([&] {
    for (void *p : objects)
      seg_free(p); // into this thread's cache for pool a
    for (size_t i = 0; i < kObjects; ++i) {
      from_b.push_back(seg_malloc(b, 48));
      from_heap.push_back(malloc(48));
    }
    for (size_t i = 0; i < kObjects; ++i)
      again.push_back(seg_malloc(a, 48));
  }).join();
  for (size_t i = 0; i < kObjects; ++i) {
    REQUIRE(!ra.contains(from_b[i]));
    REQUIRE(!ra.contains(from_heap[i]));
    REQUIRE(ra.contains(again[i]));
  }
  // The freed objects were reused by pool a, and only by it.
  size_t reused =
      std::count_if(again.begin(), again.end(), [&](void *p) { return freed.count(p); });
  CHECK(reused > kObjects / 2);
  for (size_t i = 0; i < kObjects; ++i) {
    seg_free(from_b[i]);
    free(from_heap[i]);
    seg_free(again[i]);
  }
  auto s = stats_of(a);
  CHECK(s.allocations == 2 * kObjects);
  CHECK(s.frees == 2 * kObjects);
  CHECK(s.allocated_bytes == 0);
}

TEST_CASE("pool: producer and consumer threads exchange objects of one pool", "[seg]") {
  seg_pool *pool = seg_pool_create("xfree-stream", nullptr);
  auto range = bounds_of(pool);
  constexpr size_t kObjects = 200000, kRing = 1024;
  std::vector<std::atomic<void *>> ring(kRing);
  std::atomic<bool> outside{false};
  std::thread consumer([&] {
    for (size_t i = 0; i < kObjects; ++i) {
      void *p;
      while (!(p = ring[i % kRing].exchange(nullptr, std::memory_order_acquire)))
        std::this_thread::yield();
      if (seg_pool_of(p) != pool)
        outside = true;
      seg_free(p);
    }
  });
  for (size_t i = 0; i < kObjects; ++i) {
    void *p = seg_malloc(pool, 16 + i % 200);
    if (!range.contains(p))
      outside = true;
    while (ring[i % kRing].load(std::memory_order_acquire))
      std::this_thread::yield();
    ring[i % kRing].store(p, std::memory_order_release);
  }
  consumer.join();
  CHECK(!outside);
  auto s = stats_of(pool);
  CHECK(s.allocations == kObjects);
  CHECK(s.frees == kObjects);
  CHECK(s.allocated_bytes == 0);
}

// Objects of every size, aligned or not, resized, freed by their thread or
// by the other, their pages reused for other size classes: no two live
// objects may ever overlap, which each object's fill pattern would show.
TEST_CASE("pool: mixed sizes and threads never hand out overlapping objects", "[seg]") {
  seg_pool *pool = seg_pool_create("mixed", nullptr);
  auto range = bounds_of(pool);
  struct Object {
    unsigned char *p;
    size_t size;
    unsigned char fill;
  };
  std::vector<Object> handoff[2];
  std::mutex handoff_lock;
  std::atomic<bool> corrupt{false}, outside{false};
  auto verify_and_free = [&](const Object &o) {
    for (size_t i = 0; i < o.size; i += 7)
      if (o.p[i] != o.fill)
        corrupt = true;
    seg_free(o.p);
  };
  auto worker = [&](unsigned self) {
    uint64_t state = 0x9e3779b97f4a7c15ull * (self + 1);
    auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
    std::vector<Object> live;
    for (int round = 0; round < 30; ++round) {
      // Phases of small and of larger objects, so pages change size class.
      size_t max_size = round % 3 == 0 ? 64 : round % 3 == 1 ? 1024 : 20000;
      for (int i = 0; i < 2000; ++i) {
        size_t size = 1 + next() % max_size;
        size_t align = next() % 4 == 0 ? size_t{16} << (next() % 6) : 0;
        auto *p = static_cast<unsigned char *>(align ? seg_aligned_alloc(pool, align, size)
                                                     : seg_malloc(pool, size));
        if (!range.contains(p) || (align && reinterpret_cast<uintptr_t>(p) % align))
          outside = true;
        auto fill = static_cast<unsigned char>(next());
        if (next() % 8 == 0) { // grow or shrink it first
          size = 1 + next() % (2 * max_size);
          p = static_cast<unsigned char *>(seg_realloc(p, size));
          if (!range.contains(p))
            outside = true;
        }
        memset(p, fill, size);
        live.push_back({p, size, fill});
      }
      // Free most, half of those through the other thread.
      std::vector<Object> to_other;
      while (live.size() > 500) {
        size_t k = next() % live.size();
        if (next() & 1)
          to_other.push_back(live[k]);
        else
          verify_and_free(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
      std::vector<Object> mine;
      {
        std::lock_guard<std::mutex> g(handoff_lock);
        handoff[1 - self].insert(handoff[1 - self].end(), to_other.begin(), to_other.end());
        mine.swap(handoff[self]);
      }
      for (const Object &o : mine)
        verify_and_free(o);
    }
    for (const Object &o : live)
      verify_and_free(o);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  for (auto &objects : handoff)
    for (const Object &o : objects)
      verify_and_free(o);
  CHECK(!corrupt);
  CHECK(!outside);
  auto s = stats_of(pool);
  CHECK(s.allocations == s.frees);
  CHECK(s.allocated_bytes == 0);
}

// More threads than cores, in two waves: each thread allocates, hands half
// of its objects to the others and frees what it is handed, and exits while
// others still hold its objects (its pages are abandoned to the pool, and
// the second wave adopts them).
TEST_CASE("pool: threads that exit leave their pages to the next ones, nothing overlaps", "[seg]") {
  seg_pool *pool = seg_pool_create("waves", nullptr);
  auto range = bounds_of(pool);
  constexpr unsigned kThreads = 8;
  struct Object {
    unsigned char *p;
    size_t size;
    unsigned char fill;
  };
  std::mutex lock;
  std::vector<Object> inbox[kThreads];
  std::atomic<bool> corrupt{false}, outside{false};
  auto check_and_free = [&](const Object &o) {
    for (size_t i = 0; i < o.size; i += 5)
      if (o.p[i] != o.fill)
        corrupt = true;
    seg_free(o.p);
  };
  auto wave = [&](unsigned seed) {
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        uint64_t state = 0x9e3779b97f4a7c15ull * (seed * kThreads + t + 1);
        auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
        std::vector<Object> mine;
        for (int round = 0; round < 20; ++round) {
          for (int i = 0; i < 500; ++i) {
            size_t size = next() % 16 == 0 ? 1 + next() % 5000 : 1 + next() % 1024;
            auto *p = static_cast<unsigned char *>(seg_malloc(pool, size));
            if (!range.contains(p))
              outside = true;
            auto fill = static_cast<unsigned char>(next());
            memset(p, fill, size);
            mine.push_back({p, size, fill});
          }
          std::vector<Object> received;
          {
            std::lock_guard<std::mutex> g(lock);
            for (size_t i = 0; i < mine.size(); i += 2)
              inbox[next() % kThreads].push_back(mine[i]);
            received.swap(inbox[t]);
          }
          for (size_t i = 1; i < mine.size(); i += 4)
            check_and_free(mine[i]);
          std::vector<Object> kept;
          for (size_t i = 3; i < mine.size(); i += 4)
            kept.push_back(mine[i]);
          mine.swap(kept);
          for (const Object &o : received)
            check_and_free(o);
        }
        std::lock_guard<std::mutex> g(lock); // left for the next wave to free
        inbox[(t + 1) % kThreads].insert(inbox[(t + 1) % kThreads].end(), mine.begin(), mine.end());
      });
    for (auto &t : threads)
      t.join();
  };
  wave(1);
  size_t mapped_after_first = stats_of(pool).mapped_bytes;
  wave(2);
  for (auto &objects : inbox)
    for (const Object &o : objects)
      check_and_free(o);
  CHECK(!corrupt);
  CHECK(!outside);
  auto s = stats_of(pool);
  CHECK(s.allocations == 2 * kThreads * 20 * 500);
  CHECK(s.frees == s.allocations);
  CHECK(s.allocated_bytes == 0);
  // The second wave lived in the pages the first one left.
  CHECK(s.mapped_bytes < 2 * mapped_after_first);
}

TEST_CASE("pool: realloc stays in the pool, in place and across size classes", "[seg]") {
  seg_pool *pool = seg_pool_create("realloc", nullptr);
  auto range = bounds_of(pool);
  auto *p = static_cast<unsigned char *>(seg_malloc(pool, 20));
  REQUIRE(p);
  for (int i = 0; i < 20; ++i)
    p[i] = static_cast<unsigned char>(i);
  // 20 -> 30 bytes fits the 32-byte class: in place.
  CHECK(seg_usable_size(p) == 32);
  CHECK(seg_realloc(p, 30) == p);
  // Beyond the class, then to a large and a huge size: moved, still ours, contents kept.
  for (size_t size : {size_t{100}, size_t{5000}, size_t{100000}, size_t{3} << 20}) {
    auto *q = static_cast<unsigned char *>(seg_realloc(p, size));
    REQUIRE(q);
    REQUIRE(range.contains(q));
    REQUIRE(seg_pool_of(q) == pool);
    REQUIRE(seg_usable_size(q) >= size);
    for (int i = 0; i < 20; ++i)
      REQUIRE(q[i] == i);
    p = q;
  }
  p = static_cast<unsigned char *>(seg_realloc(p, 10)); // shrink
  REQUIRE(range.contains(p));
  CHECK(p[9] == 9);
  CHECK(stats_of(pool).allocated_bytes == seg_usable_size(p));
  auto frees = stats_of(pool).frees;
  CHECK(seg_realloc(p, 0) == nullptr); // size 0 frees, as realloc does
  CHECK(stats_of(pool).frees == frees + 1);
  CHECK(stats_of(pool).allocated_bytes == 0);

  // Not a pool pointer: realloc() as usual.
  void *h = seg_realloc(nullptr, 64);
  REQUIRE(h);
  CHECK(seg_pool_of(h) == nullptr);
  h = seg_realloc(h, 4096);
  REQUIRE(h);
  CHECK(seg_pool_of(h) == nullptr);
  seg_free(h);
}

TEST_CASE("pool: aligned allocation", "[seg]") {
  seg_pool *pool = seg_pool_create("aligned", nullptr);
  auto range = bounds_of(pool);
  for (size_t align = 8; align <= (size_t{2} << 20); align *= 2) {
    for (size_t size : {size_t{1}, size_t{48}, align, 3 * align + 5}) {
      void *p = seg_aligned_alloc(pool, align, size);
      INFO("align " << align << " size " << size);
      REQUIRE(p);
      CHECK(aligned(p, align));
      CHECK(range.contains(p));
      seg_free(p);
    }
  }
  errno = 0;
  CHECK(seg_aligned_alloc(pool, 0, 16) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(seg_aligned_alloc(pool, 48, 16) == nullptr);
  CHECK(errno == EINVAL);

  // The pool's alignment option applies to every object: 48-byte objects on lines.
  seg_pool_options opts{};
  opts.alignment = 64;
  seg_pool *lines = seg_pool_create("aligned-64", &opts);
  for (int i = 0; i < 1000; ++i)
    REQUIRE(aligned(seg_malloc(lines, 48), 64));
  errno = 0;
  opts.alignment = 96;
  CHECK(seg_pool_create("aligned-96", &opts) == nullptr);
  CHECK(errno == EINVAL);
  // A pad larger than the pool's whole reserve could serve nothing.
  seg_pool_options huge_pad{};
  huge_pad.pad_to = size_t{1} << 40;
  errno = 0;
  CHECK(seg_pool_create("pad-1TiB", &huge_pad) == nullptr);
  CHECK(errno == EINVAL);
  // Nor one larger than the half of the range large objects come from.
  huge_pad.pad_to = size_t{40} << 30; // of the default 64 GiB
  errno = 0;
  CHECK(seg_pool_create("pad-40GiB", &huge_pad) == nullptr);
  CHECK(errno == EINVAL);
  // Nor one that half holds but jemalloc cannot serve from it: each padded
  // object takes its size class and a page (28 GiB is the most).
  huge_pad.pad_to = size_t{30} << 30;
  errno = 0;
  CHECK(seg_pool_create("pad-30GiB", &huge_pad) == nullptr);
  CHECK(errno == EINVAL);
  huge_pad.pad_to = size_t{28} << 30;
  seg_pool *padded = seg_pool_create("pad-28GiB", &huge_pad);
  CHECK(padded != nullptr);
  if (padded)
    seg_pool_destroy(padded);
}

TEST_CASE("pool: a limited address space gets a smaller default reserve", "[seg]") {
  // valgrind and ulimit -v refuse 64 GiB of address space: a pool that
  // asked for no particular reserve settles for less; one that asked for
  // 64 GiB does not get less than it asked.
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit limit = {size_t{40} << 30, size_t{40} << 30};
    if (setrlimit(RLIMIT_AS, &limit) != 0)
      _exit(10);
    seg_pool *pool = seg_pool_create("limited", nullptr);
    if (!pool)
      _exit(11);
    struct seg_pool_stats st;
    if (seg_pool_stats(pool, &st) != 0 || st.range_end - st.range_begin > (size_t{40} << 30))
      _exit(12);
    void *p = seg_malloc(pool, 100);
    if (!p || seg_pool_of(p) != pool)
      _exit(13);
    seg_pool_options big{};
    big.reserve_bytes = size_t{64} << 30;
    errno = 0;
    if (seg_pool_create("limited-64", &big) != nullptr || errno != ENOMEM)
      _exit(14);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("pool: pad_to sets the stride of consecutive objects", "[seg]") {
  struct Case {
    size_t pad, size, stride;
  };
  for (Case c : {Case{64, 48, 64}, Case{192, 128, 192}, Case{0, 48, 48}}) {
    seg_pool_options opts{};
    opts.pad_to = c.pad;
    std::string name = "pad-" + std::to_string(c.pad);
    seg_pool *pool = seg_pool_create(name.c_str(), &opts);
    REQUIRE(pool);
    auto *prev = static_cast<char *>(seg_malloc(pool, c.size));
    size_t strided = 0;
    for (int i = 0; i < 1000; ++i) {
      auto *p = static_cast<char *>(seg_malloc(pool, c.size));
      strided += static_cast<size_t>(p - prev) == c.stride;
      CHECK(seg_usable_size(p) >= std::max(c.pad, c.size));
      prev = p;
    }
    INFO("pad " << c.pad << " size " << c.size);
    CHECK(strided > 950); // all but slab boundaries
  }
}

TEST_CASE("pool: huge_pages backs the pool's range with 2 MiB pages where allowed", "[seg]") {
  seg_pool_options opts{};
  opts.huge_pages = 1;
  seg_pool *pool = seg_pool_create("huge", &opts);
  REQUIRE(pool);
  auto range = bounds_of(pool);
  CHECK(range.begin % (size_t{2} << 20) == 0);
  std::vector<void *> objects;
  for (int i = 0; i < 10000; ++i) {
    objects.push_back(seg_malloc(pool, 256));
    REQUIRE(range.contains(objects.back()));
  }
  FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (thp) { // a kernel with THP marks the range MADV_HUGEPAGE ("hg")
    fclose(thp);
    CHECK(seg_test::vm_flags_of(range.begin).find(" hg") != std::string::npos);
  }
  for (void *p : objects)
    seg_free(p);
}

TEST_CASE("pool: destroy releases the range; its pointers have no pool after", "[seg]") {
  seg_pool *pool = seg_pool_create("doomed", nullptr);
  auto range = bounds_of(pool);
  std::vector<void *> objects;
  for (int i = 0; i < 1000; ++i)
    objects.push_back(seg_malloc(pool, 100));
  CHECK(!seg_test::mapping_of(range.begin).empty());
  seg_pool_destroy(pool);
  CHECK(seg_test::mapping_of(range.begin).empty());
  CHECK(seg_test::mapping_of(range.end - 1).empty());
  for (void *p : objects)
    REQUIRE(seg_pool_of(p) == nullptr);
  struct seg_pool_stats s {};
  errno = 0;
  CHECK(seg_pool_stats(pool, &s) == -1);
  CHECK(errno == EINVAL);
  seg_pool_destroy(pool); // twice: ignored
  // The name is free again.
  seg_pool *again = seg_pool_create("doomed", nullptr);
  REQUIRE(again);
  void *p = seg_malloc(again, 100);
  CHECK(bounds_of(again).contains(p));
  seg_free(p);
}

TEST_CASE("pool: an exhausted pool answers NULL with ENOMEM and recovers", "[seg]") {
  seg_pool_options opts{};
  // Raised to the smallest, 6 MiB: 2 MiB of pages for objects up to 1 KiB,
  // 2 of arena metadata, 2 for larger objects.
  opts.reserve_bytes = size_t{4} << 20;
  seg_pool *pool = seg_pool_create("tiny", &opts);
  REQUIRE(pool);
  auto range = bounds_of(pool);
  CHECK(range.end - range.begin == size_t{6} << 20);
  void *large = seg_malloc(pool, 2000); // past the small classes: the arena's
  REQUIRE(large);
  CHECK(range.contains(large));
  seg_free(large);
  std::vector<void *> objects;
  void *p;
  while ((p = seg_malloc(pool, 1000)) != nullptr) {
    REQUIRE(range.contains(p));
    objects.push_back(p);
  }
  CHECK(errno == ENOMEM);
  CHECK(objects.size() > 1000);
  errno = 0;
  CHECK(seg_malloc(pool, size_t{100} << 20) == nullptr);
  CHECK(errno == ENOMEM);
  errno = 0;
  volatile size_t many = SIZE_MAX / 2; // n * size overflows
  CHECK(seg_calloc(pool, many, 4) == nullptr);
  CHECK(errno == ENOMEM);
  for (void *o : objects)
    seg_free(o);
  // Freed room is reused.
  for (size_t i = 0; i < objects.size(); ++i)
    REQUIRE(range.contains(objects[i] = seg_malloc(pool, 1000)));
  for (void *o : objects)
    seg_free(o);
}

// Objects past 1 KiB come from jemalloc's slabs (5 pages for 1280-byte
// objects, 7 for 3584): freed, they merged into spans too large for
// jemalloc to reuse for a slab, and a bounded pool whose objects were all
// freed answered ENOMEM on the third round of the same allocations.
TEST_CASE("pool: a bounded pool reuses what its larger objects freed", "[seg]") {
  seg_pool_options opts{};
  opts.reserve_bytes = size_t{64} << 20; // ~30 MiB for objects past 1 KiB
  seg_pool *pool = seg_pool_create("bounded", &opts);
  REQUIRE(pool);
  auto fill = [&](size_t size, size_t most, std::vector<void *> &out) {
    void *p;
    while (out.size() < most && (p = seg_malloc(pool, size)) != nullptr)
      out.push_back(p);
    return out.size();
  };
  auto free_all = [](std::vector<void *> &objects) {
    for (void *o : objects)
      seg_free(o);
    objects.clear();
  };
  std::vector<void *> objects;
  for (size_t size : {size_t{1025}, size_t{3100}}) {
    INFO("size " << size);
    const size_t n = (size_t{20} << 20) / size; // 20 MiB of them, well within the pool
    for (int round = 0; round < 4; ++round) {
      INFO("round " << round);
      CHECK(fill(size, n, objects) == n);
      free_all(objects);
    }
  }
  // Filled to exhaustion with one size, freed: another size gets nearly as
  // much room (all of it came back within the pool).
  size_t of_3000 = fill(3000, SIZE_MAX, objects) * 3072;
  free_all(objects);
  size_t of_1025 = fill(1025, SIZE_MAX, objects) * 1280;
  free_all(objects);
  CHECK(of_1025 > of_3000 * 9 / 10);
  seg_pool_destroy(pool);
}

TEST_CASE("pool: seg_free takes pointers from malloc", "[seg]") {
  void *p = malloc(64 * 1024); // above glibc's per-thread cache, below its mmap threshold
  CHECK(seg_pool_of(p) == nullptr);
  CHECK(seg_usable_size(p) == 0); // not a pool object
  size_t with = mallinfo2().uordblks;
  seg_free(p); // to free(): glibc's count of bytes in use drops by the chunk
  size_t without = mallinfo2().uordblks;
  CHECK(with - without >= 64 * 1024);
  seg_free(nullptr);
  CHECK(seg_usable_size(nullptr) == 0);
  CHECK(seg_pool_of(nullptr) == nullptr);
  CHECK(seg_pool_of(reinterpret_cast<void *>(~uintptr_t{0})) == nullptr);
}

TEST_CASE("pool: stats count objects, usable bytes and the range", "[seg]") {
  seg_pool *pool = seg_pool_create("counted", nullptr);
  std::vector<void *> objects;
  for (int i = 0; i < 100; ++i)
    objects.push_back(seg_malloc(pool, 40));    // 48-byte class
  objects.push_back(seg_calloc(pool, 10, 100)); // 1024-byte class
  auto s = stats_of(pool);
  CHECK(std::string(s.name) == "counted");
  CHECK(s.allocations == 101);
  CHECK(s.frees == 0);
  CHECK(s.allocated_bytes == 100 * 48 + 1024);
  CHECK(s.mapped_bytes >= s.allocated_bytes);
  CHECK(s.mapped_bytes < (size_t{64} << 20));
  for (int i = 0; i < 50; ++i)
    seg_free(objects[i]);
  std::thread([&] { // counted whichever thread frees
    for (int i = 50; i < 100; ++i)
      seg_free(objects[i]);
  })
      .join();
  s = stats_of(pool);
  CHECK(s.frees == 100);
  CHECK(s.allocated_bytes == 1024);
  auto *zeroed = static_cast<unsigned char *>(objects[100]);
  CHECK(std::all_of(zeroed, zeroed + 1000, [](unsigned char c) { return c == 0; }));
  seg_free(zeroed);
  CHECK(stats_of(pool).allocated_bytes == 0);
}

TEST_CASE("pool: pool creation: names, options and the pool limit", "[seg]") {
  seg_pool *a = seg_pool_create("same-name", nullptr);
  seg_pool_options other{};
  other.pad_to = 128;
  CHECK(seg_pool_create("same-name", &other) == a); // existing pool, unchanged
  errno = 0;
  CHECK(seg_pool_create("", nullptr) == nullptr);
  CHECK(errno == EINVAL);
  std::string long_name(200, 'x');
  errno = 0;
  CHECK(seg_pool_create(long_name.c_str(), nullptr) == nullptr);
  CHECK(errno == EINVAL);

  std::vector<seg_pool *> pools;
  seg_pool_options tiny{};
  tiny.reserve_bytes = size_t{4} << 20;
  for (int i = 0; i < 300; ++i) {
    seg_pool *p = seg_pool_create(("many-" + std::to_string(i)).c_str(), &tiny);
    if (!p) {
      CHECK(errno == ENOMEM);
      break;
    }
    pools.push_back(p);
  }
  CHECK(pools.size() == 255); // 256 with "same-name"
  for (seg_pool *p : pools)
    seg_pool_destroy(p);
  CHECK(seg_pool_create("after-many", &tiny) != nullptr);
}

// The BST study's int-lf: a 64-byte node and a 64-byte descriptor per insert.
// From one allocator the nodes land on every other line (half the L1 sets);
// from two pools consecutive nodes are adjacent and cover every set.
TEST_CASE("pool: int-lf's node and descriptor in separate pools cover all 64 L1 sets", "[seg]") {
  seg_pool *nodes = seg_pool_create("intlf-node", nullptr);
  seg_pool *descriptors = seg_pool_create("intlf-descriptor", nullptr);
  seg_pool *shared = seg_pool_create("intlf-shared", nullptr);
  constexpr size_t kInserts = 100000;
  auto measure = [&](seg_pool *node_pool, seg_pool *descriptor_pool, size_t *adjacent) {
    std::vector<size_t> sets(64);
    uintptr_t prev = 0;
    *adjacent = 0;
    for (size_t i = 0; i < kInserts; ++i) {
      auto node = reinterpret_cast<uintptr_t>(seg_malloc(node_pool, 64));
      void *descriptor = seg_malloc(descriptor_pool, 64); // never freed, as in int-lf
      REQUIRE(descriptor);
      *adjacent += node - prev == 64;
      ++sets[(node >> 6) % 64];
      prev = node;
    }
    return sets;
  };
  size_t adjacent = 0;
  auto sets = measure(nodes, descriptors, &adjacent);
  CHECK(adjacent == kInserts - 1);
  auto [fewest, most] = std::minmax_element(sets.begin(), sets.end());
  CHECK(*fewest > 0);
  CHECK(*most - *fewest <= 1); // every set, evenly
  // The same pattern from one pool: every other line, half the sets.
  sets = measure(shared, shared, &adjacent);
  CHECK(adjacent == 0);
  CHECK(std::count(sets.begin(), sets.end(), 0u) == 32);
}

// A key created after the pool (so after jemalloc's own key) whose destructor
// allocates from the pool at thread exit, in three rounds of destructors:
// jemalloc's per-thread data was torn down first, and it served those
// allocations from its arena 0, outside the pool: seg_pool_of() was NULL,
// and seg_free handed them to glibc's free, which aborted.
namespace {
seg_pool *g_exit_pool;
pthread_key_t g_exit_key;
std::atomic<int> g_exit_outside{0}, g_exit_allocations{0};
thread_local int tl_exit_rounds = 0;

// The first round's allocations come from the pool; a later round's, after
// jemalloc let go of the thread, from the pool or not at all (ENOMEM).
void allocate_at_exit(void *held) {
  seg_free(held);
  bool first = tl_exit_rounds++ == 0;
  for (size_t size : {24, 700, 5000, 100000, 4 << 20}) {
    errno = 0;
    void *p = seg_malloc(g_exit_pool, size);
    g_exit_allocations += 1;
    bool refused = !p && !first && errno == ENOMEM;
    if (!refused && (!p || seg_pool_of(p) != g_exit_pool))
      g_exit_outside += 1;
    seg_free(p);
  }
  void *next = seg_calloc(g_exit_pool, 1, 300);
  if (next && seg_pool_of(next) != g_exit_pool)
    g_exit_outside += 1;
  if (next && tl_exit_rounds < 3)
    pthread_setspecific(g_exit_key, next); // once more in the next round
  else
    seg_free(next);
}
} // namespace

TEST_CASE("pool: allocations in a key destructor at thread exit come from the pool", "[seg]") {
  g_exit_pool = seg_pool_create("key-destructors", nullptr);
  REQUIRE(g_exit_pool);
  seg_free(seg_malloc(g_exit_pool, 64)); // the engine and jemalloc are up
  REQUIRE(pthread_key_create(&g_exit_key, allocate_at_exit) == 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 100; ++i)
        seg_free(seg_malloc(g_exit_pool, 16 + static_cast<size_t>(i) * 40));
      pthread_setspecific(g_exit_key, seg_malloc(g_exit_pool, 300));
    });
  for (auto &t : threads)
    t.join();
  CHECK(g_exit_allocations >= 8 * 5);
  CHECK(g_exit_outside == 0); // the first round's all served from the pool, none from outside
  struct seg_pool_stats s;
  REQUIRE(seg_pool_stats(g_exit_pool, &s) == 0);
  CHECK(s.allocations == s.frees);
  pthread_key_delete(g_exit_key);
}

// A pool created with a pad_to serves it: one larger than the pool could
// ever serve is refused at creation. A 64 MiB pool took pad_to up to 32 MiB
// and then failed every allocation from 28 MiB + 1 on (ENOMEM).
TEST_CASE("pool: a pad_to the pool accepts is one it serves", "[seg]") {
  int n = 0;
  for (size_t reserve : {size_t{6} << 20, size_t{10} << 20, size_t{16} << 20, size_t{64} << 20}) {
    size_t largest_accepted = 0;
    for (size_t pad = reserve / 8; pad <= reserve; pad += 128 << 10) {
      for (size_t p : {pad, pad + 1}) {
        seg_pool_options o{};
        o.reserve_bytes = reserve;
        o.pad_to = p;
        std::string name = "pad-" + std::to_string(n++);
        errno = 0;
        seg_pool *pool = seg_pool_create(name.c_str(), &o);
        INFO("reserve " << reserve << " pad_to " << p);
        if (!pool) {
          CHECK(errno == EINVAL);
          continue;
        }
        largest_accepted = std::max(largest_accepted, p);
        void *x = seg_malloc(pool, 1);
        CHECK(x != nullptr);
        CHECK(seg_usable_size(x) >= p);
        seg_free(x);
        seg_pool_destroy(pool);
      }
    }
    INFO("reserve " << reserve);
    CHECK(largest_accepted >= reserve * 3 / 8 - (2 << 20)); // not refusing what it serves
  }
}
