// memlayout-replay-worker OPS RESULTS: executes a recorded allocation sequence
// (replay_ops.h) against the real allocator, each recorded thread on a thread
// of its own taking its turn in the recorded order, so per-thread caches and
// arenas behave as they did. Started by `memlayout replay` in a fresh process:
// nothing else allocates here, as in the program it stands for.
#include "mlje.h"
#include "replay_ops.h"
#include "seg_core.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace memlayout::replay;
namespace seg = memlayout::seg;

namespace {

const OpsHeader *g_header;
const OpsRoute *g_routes;
const Op *g_ops;
OpResult *g_results;
seg::Pool *g_pools[256];
std::atomic<uint64_t> g_next{0};
std::atomic<bool> g_go{false}; // the other threads wait while main pads its heap
pthread_t *g_threads;          // [1, threads): started by main, joined by it
bool *g_joined;
bool g_jemalloc;

void *real_alloc(size_t size, size_t align) {
  if (g_jemalloc)
    return align > 16 ? mlje_aligned_alloc(align, (size + align - 1) / align * align)
                      : mlje_malloc(size);
  return align > 16 ? memalign(align, size) : malloc(size);
}
void real_free(void *p) { g_jemalloc ? mlje_free(p) : free(p); }
void *real_realloc(void *p, size_t size) {
  return g_jemalloc ? mlje_realloc(p, size) : realloc(p, size);
}
size_t real_usable(void *p) {
  return g_jemalloc ? mlje_malloc_usable_size(p) : malloc_usable_size(p);
}

// An op's new block: where its rule puts it (the interposer's place_routed),
// or the allocator's.
void *place(const Op &op) {
  if (op.route == kNoRoute)
    return real_alloc(op.size ? op.size : 1, op.align);
  const OpsRoute &r = g_routes[op.route];
  size_t size = op.size < r.pad ? r.pad : op.size;
  size_t align = op.align < r.align ? r.align : op.align;
  return g_pools[op.route] ? seg::pool_alloc(g_pools[op.route], size ? size : 1, align)
                           : real_alloc(size ? size : 1, align);
}

void execute(uint64_t i) {
  const Op &op = g_ops[i];
  OpResult &out = g_results[i];
  switch (op.kind) {
  case OpKind::kAlloc: {
    void *p = place(op);
    out.addr = reinterpret_cast<uintptr_t>(p);
    if (p)
      out.usable = seg::pool_of(p) ? seg::pool_usable_size(p) : real_usable(p);
    break;
  }
  case OpKind::kFree: {
    if (op.ref == kNoRef)
      break;
    void *p = reinterpret_cast<void *>(g_results[op.ref].addr);
    if (!p)
      break;
    if (seg::pool_of(p))
      seg::pool_free(p);
    else
      real_free(p);
    break;
  }
  case OpKind::kRealloc: {
    void *old = op.ref == kNoRef ? nullptr : reinterpret_cast<void *>(g_results[op.ref].addr);
    void *p;
    if (old && seg::pool_of(old)) {
      p = seg::pool_realloc(old, op.size);
    } else if (old && op.route != kNoRoute) { // moved where its rule puts it, as by run
      p = place(op);
      if (p) {
        size_t had = real_usable(old);
        std::memcpy(p, old, had < op.size ? had : op.size);
        real_free(old);
      }
    } else {
      p = old ? real_realloc(old, op.size) : place(op);
    }
    out.addr = reinterpret_cast<uintptr_t>(p);
    if (p)
      out.usable = seg::pool_of(p) ? seg::pool_usable_size(p) : real_usable(p);
    break;
  }
  case OpKind::kExit:
    break; // run_thread's: the thread ends, main joins it
  }
}

// glibc only, after the threads are started: their DTVs came from the main
// heap (OpsHeader::main_first_page_offset says why that matters). Nothing
// has been freed yet, so both allocations here come from the heap's top: a
// probe shows where the top is, and a pad puts the next chunk's user address
// at the recorded page offset. Both stay allocated; the pad is less than a
// page and a chunk.
void *volatile g_pads[2]; // kept, so the allocations are not elided
void pad_main_heap(uint32_t page_offset) {
  constexpr uintptr_t kHeader = 16, kProbeChunk = 32; // malloc(24): a 32-byte chunk
  void *probe = malloc(24);
  g_pads[0] = probe;
  if (!probe)
    return;
  uintptr_t next_user = reinterpret_cast<uintptr_t>(probe) - kHeader + kProbeChunk + kHeader;
  uintptr_t gap = (page_offset - next_user) & 4095; // a multiple of 16, as both are
  if (gap == 0)
    return;
  if (gap < 32) // the smallest chunk
    gap += 4096;
  g_pads[1] = malloc(gap - 8); // a chunk of exactly `gap` bytes
}

// Takes this thread's turns: the op at the shared position runs on the thread
// that made it; the others wait (spinning briefly, then yielding the CPU).
void *run_thread(void *arg) {
  auto thread = static_cast<uint16_t>(reinterpret_cast<uintptr_t>(arg));
  uint64_t n = g_header->ops;
  while (!g_go.load(std::memory_order_acquire))
    sched_yield();
  unsigned spins = 0;
  for (;;) {
    uint64_t i = g_next.load(std::memory_order_acquire);
    if (i >= n)
      break;
    const Op &op = g_ops[i];
    if (op.kind == OpKind::kExit && op.thread == thread)
      return nullptr; // main takes the op once this thread is gone
    if (op.kind == OpKind::kExit && thread == 0) {
      pthread_join(g_threads[op.thread], nullptr);
      g_joined[op.thread] = true;
      g_next.store(i + 1, std::memory_order_release);
      continue;
    }
    if (op.thread != thread) {
      if (++spins < 64)
        __builtin_ia32_pause();
      else
        sched_yield();
      continue;
    }
    spins = 0;
    execute(i);
    g_next.store(i + 1, std::memory_order_release);
  }
  return nullptr;
}

void *map_file(const char *path, bool writable, size_t *size) {
  int fd = open(path, writable ? O_RDWR : O_RDONLY);
  if (fd < 0)
    return nullptr;
  struct stat st;
  void *p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    *size = static_cast<size_t>(st.st_size);
    p = mmap(nullptr, *size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  }
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

int fail(const char *what, const char *detail) {
  std::fprintf(stderr, "memlayout-replay-worker: %s%s%s\n", what, detail ? ": " : "",
               detail ? detail : "");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3)
    return fail("usage: memlayout-replay-worker OPS RESULTS (started by memlayout replay)",
                nullptr);
  size_t ops_size = 0, results_size = 0;
  auto *base = static_cast<const unsigned char *>(map_file(argv[1], false, &ops_size));
  if (!base || ops_size < sizeof(OpsHeader))
    return fail("cannot read the ops file", argv[1]);
  g_header = reinterpret_cast<const OpsHeader *>(base);
  if (std::memcmp(g_header->magic, kOpsMagic, sizeof kOpsMagic) || g_header->routes > 64 ||
      g_header->main_first_page_offset > 4096 || g_header->threads == 0 ||
      g_header->threads > 65535 ||
      ops_size !=
          sizeof(OpsHeader) + g_header->routes * sizeof(OpsRoute) + g_header->ops * sizeof(Op))
    return fail("not a replay ops file", argv[1]);
  g_routes = reinterpret_cast<const OpsRoute *>(base + sizeof(OpsHeader));
  g_ops =
      reinterpret_cast<const Op *>(base + sizeof(OpsHeader) + g_header->routes * sizeof(OpsRoute));
  g_results = static_cast<OpResult *>(map_file(argv[2], true, &results_size));
  if (!g_results || results_size != g_header->ops * sizeof(OpResult))
    return fail("cannot map the results file", argv[2]);
  for (uint64_t i = 0; i < g_header->ops; ++i)
    if (g_ops[i].thread >= g_header->threads || g_ops[i].kind > OpKind::kExit ||
        (g_ops[i].kind == OpKind::kExit && g_ops[i].thread == 0) ||
        (g_ops[i].route != kNoRoute && g_ops[i].route >= g_header->routes) ||
        (g_ops[i].ref != kNoRef && g_ops[i].ref >= i))
      return fail("a malformed op in", argv[1]);
  // A thread ends once: after its end it has no op. (Not from the heap the
  // replay lays out.)
  void *flags =
      mmap(nullptr, g_header->threads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (flags == MAP_FAILED)
    return fail("out of memory", nullptr);
  auto *ended = static_cast<bool *>(flags);
  for (uint64_t i = 0; i < g_header->ops; ++i) {
    if (ended[g_ops[i].thread])
      return fail("an op of a thread after its end in", argv[1]);
    if (g_ops[i].kind == OpKind::kExit)
      ended[g_ops[i].thread] = true;
  }
  munmap(flags, g_header->threads);
  g_jemalloc = g_header->allocator == static_cast<uint32_t>(ReplayAllocator::kJemalloc);
  for (uint32_t r = 0; r < g_header->routes; ++r) {
    const OpsRoute &route = g_routes[r];
    if (!route.pool[0] || memchr(route.pool, 0, sizeof route.pool) == nullptr)
      continue;
    seg::PoolOptions o;
    o.alignment = route.align;
    o.pad_to = route.pad;
    o.huge_pages = route.huge_pages != 0;
    g_pools[r] = seg::pool_create(route.pool, o);
    if (!g_pools[r]) {
      // No std::string: libstdc++ would allocate at start-up, in the heap
      // the replay lays out.
      char why[256];
      std::snprintf(why, sizeof why, "%s: %s%s", route.pool, std::strerror(errno),
                    errno == ENOMEM ? " (a pool reserves 1 GiB of address space or more: "
                                      "is it limited, ulimit -v?)"
                                    : "");
      return fail("cannot create the pool", why);
    }
  }
  // Thread 0 is the recorded main thread: it runs here, the others on their own.
  uint32_t threads = g_header->threads;
  void *ids = mmap(nullptr, threads * (sizeof(pthread_t) + 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ids == MAP_FAILED)
    return fail("out of memory", nullptr);
  g_threads = static_cast<pthread_t *>(ids);
  g_joined = reinterpret_cast<bool *>(g_threads + threads);
  for (uint32_t t = 1; t < threads; ++t)
    if (pthread_create(&g_threads[t], nullptr, run_thread, reinterpret_cast<void *>(uintptr_t{t})))
      return fail("cannot start a thread", std::strerror(errno));
  if (!g_jemalloc && threads > 1 && g_header->main_first_page_offset)
    pad_main_heap(g_header->main_first_page_offset - 1);
  g_go.store(true, std::memory_order_release);
  run_thread(nullptr);
  for (uint32_t t = 1; t < threads; ++t)
    if (!g_joined[t])
      pthread_join(g_threads[t], nullptr);
  if (msync(g_results, results_size, MS_SYNC) != 0)
    return fail("cannot write the results", std::strerror(errno));
  return 0;
}
