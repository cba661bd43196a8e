// Pool lifecycle: create (range, arena on hooks), look up, stats, destroy.
#include "seg_pool.h"

#include "seg_engine.h"
#include "seg_extent_hooks.h"
#include "seg_owner.h"
#include "seg_tcache.h"
#include "size_class.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/prctl.h>
#include <sys/resource.h>

namespace memlayout::seg {

constinit Pool g_pools[kMaxPools];

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Small objects take the first half of the range (whole 2 MiB blocks); the
// arena's metadata takes the first 2 MiB block of the rest. The smallest pool
// keeps a block for small objects, the metadata's and one for larger objects.
constexpr size_t kMinReserve = 3 * kHugePage;
// The least a pool with the default reserve settles for where the address
// space is limited.
constexpr size_t kFallbackReserveMin = size_t{1} << 30;
constexpr size_t kMaxAlignment = size_t{1} << 30;

// Slots whose arena jemalloc would not destroy: its hooks still point here.
bool g_wrecked[kMaxPools];

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// jemalloc grows a retained arena by ever larger steps (2 MiB, 2.5, 3, ...);
// capped, a pool carves its range in modest pieces and a small reservation
// is not spent on one big step.
size_t grow_limit(size_t reserve) {
  size_t limit = reserve / 16;
  return limit < kHugePage ? kHugePage : limit > 8 * kHugePage ? 8 * kHugePage : limit;
}

// Whether a pool of `reserve` bytes can serve objects padded to `pad_to`.
// Padded objects are large ones, from the half of the range that is not the
// small objects' pages, less the arena's metadata block; jemalloc maps each
// as its size class and a page more (its cache-oblivious offset). Measured:
// a 64 MiB pool serves 28 MiB and not 28 MiB + 1, a 6 MiB one 1.75 MiB.
bool pad_fits(size_t pad_to, size_t reserve) {
  constexpr size_t kPage = 4096;
  size_t large = reserve - reserve / 2 / kHugePage * kHugePage - kHugePage;
  return pad_to <= large && jemalloc_size_class(pad_to) + kPage <= large;
}

bool arena_ctl(unsigned arena, const char *name, void *newp, size_t newlen) {
  size_t mib[3], miblen = 3;
  if (mlje_mallctlnametomib(name, mib, &miblen) != 0)
    return false;
  mib[1] = arena;
  return mlje_mallctlbymib(mib, miblen, nullptr, nullptr, newp, newlen) == 0;
}

// "[anon:seg:NAME]" in /proc/PID/maps, where the kernel names mappings.
void name_mapping(const Pool *pool) {
  char label[80] = "seg:";
  size_t n = 4;
  for (const char *c = pool->name; *c && n + 1 < sizeof label; ++c)
    label[n++] = (*c > ' ' && *c < 127 && !strchr("\\`$[]", *c)) ? *c : '_';
  label[n] = '\0';
  prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, pool->range.begin(), pool->range.size(), label);
}

Pool *find_locked(const char *name) {
  for (Pool &pool : g_pools)
    if (pool.live.load(std::memory_order_relaxed) && !strcmp(pool.name, name))
      return &pool;
  return nullptr;
}

Pool *free_slot_locked() {
  for (unsigned i = 0; i < kMaxPools; ++i)
    if (!g_pools[i].live.load(std::memory_order_relaxed) && !g_wrecked[i])
      return &g_pools[i];
  return nullptr;
}

bool valid_name(const char *name) {
  return name && *name && strnlen(name, kMaxNameLength + 1) <= kMaxNameLength;
}

} // namespace

bool is_live_pool(const Pool *pool) {
  uintptr_t p = reinterpret_cast<uintptr_t>(pool), first = reinterpret_cast<uintptr_t>(g_pools);
  return p >= first && p < first + sizeof g_pools && (p - first) % sizeof(Pool) == 0 &&
         pool->live.load(std::memory_order_acquire);
}

Pool *pool_create(const char *name, const PoolOptions &options) {
  if (!valid_name(name) || (options.alignment & (options.alignment - 1)) ||
      options.alignment > kMaxAlignment || options.reserve_bytes > Range::kMaxBytes) {
    errno = EINVAL;
    return nullptr;
  }
  size_t reserve = options.reserve_bytes ? options.reserve_bytes : kDefaultReserve;
  // Reserved address space counts against RLIMIT_AS: under a limit, a pool
  // that asked for no particular reserve takes an eighth of it at most, and
  // leaves the program the rest.
  if (rlimit as{};
      !options.reserve_bytes && getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    reserve = std::min<size_t>(reserve, static_cast<size_t>(as.rlim_cur / 8));
  reserve = round_up(reserve < kMinReserve ? kMinReserve : reserve, kHugePage);
  if (!pad_fits(options.pad_to, reserve)) {
    errno = EINVAL;
    return nullptr;
  }

  EngineLock lock;
  if (!engine_start_locked())
    return nullptr;
  if (Pool *existing = find_locked(name))
    return existing;
  Pool *pool = free_slot_locked();
  if (!pool) {
    errno = ENOMEM;
    return nullptr;
  }
  // 1 GiB-aligned: the owner table's granule, and 2 MiB pages fit. Where
  // the address space is limited (valgrind, ulimit -v), a pool that asked
  // for no particular reserve takes what it can get, down to 1 GiB.
  bool reserved = pool->range.reserve(reserve, kOwnerGranule, options.huge_pages);
  const size_t fallback_min = std::min(reserve, kFallbackReserveMin);
  while (!reserved && !options.reserve_bytes && reserve > fallback_min &&
         pad_fits(options.pad_to, std::max(reserve / 2, fallback_min))) {
    reserve = std::max(reserve / 2, fallback_min);
    reserved = pool->range.reserve(reserve, kOwnerGranule, options.huge_pages);
  }
  if (!reserved)
    return nullptr;
  // Small objects' pages take the first half, jemalloc's extents the rest.
  size_t small = reserve / 2 / kHugePage * kHugePage;
  if (!small_area_init(pool, small)) {
    pool->range.release();
    errno = ENOMEM;
    return nullptr;
  }
  pool->range.keep_front(small);
  pool->index = static_cast<unsigned>(pool - g_pools);
  memcpy(pool->name, name, strlen(name) + 1);
  name_mapping(pool);
  init_extent_hooks(pool);
  extent_hooks_t *hooks = &pool->hooks.hooks;
  unsigned arena = 0;
  size_t len = sizeof arena;
  if (mlje_mallctl("arenas.create", &arena, &len, &hooks, sizeof hooks) != 0) {
    small_area_release(pool);
    pool->range.release();
    errno = ENOMEM;
    return nullptr;
  }
  size_t limit = grow_limit(reserve);
  arena_ctl(arena, "arena.0.retain_grow_limit", &limit, sizeof limit);
  pool->arena = arena;
  pool->arena_flags = MALLOCX_ARENA(arena);
  pool->alloc_flags =
      pool->arena_flags | (options.alignment ? lg_align_flags(options.alignment) : 0);
  pool->alignment = options.alignment;
  pool->pad_to = options.pad_to;
  pool->huge_pages = options.huge_pages;
  pool->shared_allocations.store(0, std::memory_order_relaxed);
  pool->shared_frees.store(0, std::memory_order_relaxed);
  pool->shared_live_bytes.store(0, std::memory_order_relaxed);
  pool->generation.fetch_add(1, std::memory_order_release);
  pool->live.store(true, std::memory_order_release);
  owner_publish(pool);
  return pool;
}

bool pool_purge(Pool *pool) { return arena_ctl(pool->arena, "arena.0.purge", nullptr, 0); }

void pool_destroy(Pool *pool) {
  EngineLock lock;
  if (!is_live_pool(pool))
    return;
  owner_withdraw(pool);
  pool->live.store(false, std::memory_order_release);
  pool->generation.fetch_add(1, std::memory_order_release);
  // jemalloc requires every cache that holds the arena's objects flushed
  // before the arena goes.
  thread_caches_drop_pool(pool);
  if (arena_ctl(pool->arena, "arena.0.destroy", nullptr, 0)) {
    pool->range.release();
    small_area_release(pool);
  } else
    g_wrecked[pool->index] = true; // its range stays mapped for jemalloc
  pool->name[0] = '\0';
}

Pool *pool_by_name(const char *name) {
  if (!valid_name(name))
    return nullptr;
  EngineLock lock;
  return find_locked(name);
}

const char *pool_name(const Pool *pool) { return pool->name; }

unsigned pool_index(const Pool *pool) { return pool->index; }

bool pool_stats(const Pool *pool, struct seg_pool_stats *out) {
  EngineLock lock;
  if (!out || !is_live_pool(pool)) {
    errno = EINVAL;
    return false;
  }
  int64_t live_bytes = 0;
  thread_caches_sum(pool, &out->allocations, &out->frees, &live_bytes);
  out->name = pool->name;
  out->range_begin = pool->range.begin();
  out->range_end = pool->range.begin() + pool->range.size();
  out->mapped_bytes = pool->range.held_bytes() + small_area_held(pool);
  out->allocated_bytes = live_bytes > 0 ? static_cast<size_t>(live_bytes) : 0;
  return true;
}

} // namespace memlayout::seg
