// The interposed allocation entry points. Each one forwards to the real
// allocator and records what it returned; nested calls (from libc inside the
// recorder, from signal handlers mid-record) pass straight through.
//
// Every entry point of glibc's and the C++ runtime's is defined here: one left
// out would hand out memory we never saw, or free ours behind our back.
#include "lifecycle.h"
#include "own_heap.h"
#include "real_alloc.h"
#include "recorder.h"
#include "rule_router.h"
#include "sys.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <new>

using namespace memlayout::preload;
using memlayout::trace::Api;
namespace seg = memlayout::seg;

namespace {

bool begin_slow(ThreadState &ts, uintptr_t sp) {
  if (ts.busy) {
    if (busy_left_behind(ts, sp))
      count_lost_event();
    return false;
  }
  if (!initialize())
    return false;
  ts.busy_sp = sp;
  ts.busy = 1;
  return true;
}

// Enters the recorder for one event. On true the caller records and then
// clears ts.busy; on false it only forwards.
inline bool begin(ThreadState &ts) {
  uintptr_t sp = stack_pointer(); // the entry point's: begin is inline
  if (ML_LIKELY(!ts.busy && g_state.load(std::memory_order_relaxed) == State::kRecording)) {
    ts.busy_sp = sp;
    ts.busy = 1;
    return true;
  }
  return begin_slow(ts, sp);
}

bool have_real() {
  if (ML_LIKELY(g_real.malloc != nullptr))
    return true;
  if (!tl_state.busy)
    initialize();
  return g_real.malloc != nullptr;
}

// An allocation we do not record. Made while memlayout works (the C library
// on its behalf, before the real allocator is known, a signal handler
// meanwhile) it comes from memlayout's own heap, so that the program's heap
// is laid out as without us (own_heap.h); otherwise, or where that heap
// cannot serve it, from the program's allocator.
template <class Allocate> void *forward(size_t size, size_t align, bool zero, Allocate allocate) {
  if (tl_state.busy || !have_real())
    if (void *p = own_heap::allocate(size, align, zero))
      return p;
  if (!have_real()) {
    errno = ENOMEM;
    return nullptr;
  }
  return allocate();
}

void *forward_malloc(size_t n) {
  return forward(n, 16, false, [n] { return g_real.malloc(n); });
}

bool mul_overflows(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }

struct Placed {
  void *p;
  size_t usable;
  bool in_pool;
};

// Where a rule puts n bytes: in its pool, or in the program's allocator
// padded and aligned (`align` already the rule's where that is more).
// {nullptr, 0} when there is no memory.
Placed place_routed(Api api, const Route &r, seg::Pool *pool, size_t n, size_t align, bool zero) {
  size_t size = n < r.pad ? r.pad : n;
  if (api == Api::kPvalloc) { // its contract: whole pages, at least one, all of them usable
    size_t page = sys::page_size();
    if (size > SIZE_MAX - page) {
      return {nullptr, 0, false};
    }
    size = size ? (size + page - 1) / page * page : page;
  }
  void *p;
  size_t usable;
  if (pool) {
    p = seg::pool_alloc(pool, size, align);
    // A thread late in its exit may find the pool unable to serve it
    // (seg_alloc.cpp): the program's own allocator serves it, as it would
    // without the rule.
    if (!p && seg::jemalloc_let_go())
      pool = nullptr;
  }
  if (pool) {
    if (p && zero)
      memset(p, 0, size);
    usable = p ? seg::pool_usable_size(p) : 0;
  } else {
    if (align > alignof(max_align_t))
      p = g_real.memalign(align, size);
    else
      p = g_real.malloc(size);
    if (p && zero)
      memset(p, 0, size);
    usable = p && g_real.usable_size ? g_real.usable_size(p) : size;
  }
  return {p, usable, pool != nullptr};
}

// An allocation a rule matched. Recorded with the pool's name as its tag.
[[gnu::noinline]] void *routed_alloc(ThreadState &ts, Api api, const Route &r, size_t n,
                                     size_t align, bool zero, const UnwindStart &start) {
  if (align < r.align)
    align = r.align;
  seg::Pool *pool = route_pool(r, ts);
  auto [p, usable, in_pool] = place_routed(api, r, pool, n, align, zero);
  if (!p) {
    errno = ENOMEM;
    return nullptr;
  }
  count_routed(r, n);
  if (begin(ts)) {
    record_alloc(ts, api, p, n, align, start, usable < n ? n : usable);
    if (in_pool)
      record_tag(ts, p, r.name, true);
    ts.busy = 0;
  }
  return p;
}

// A block of the program's allocator grown (or shrunk) where a rule names the
// site: it moves to where the rule puts it, as realloc may move any block. A
// string builder's buffer is born in one function and grown in another; the
// report groups it where it was last grown, and a rule naming that function
// would otherwise route nothing. Recorded as the old block's free and the
// new one's allocation, as a pool's realloc is. Only where the allocator
// says how many bytes the old block holds (realloc_impl checks).
[[gnu::noinline]] void *routed_realloc(ThreadState &ts, Api api, const Route &r, void *old,
                                       size_t n, const UnwindStart &start) {
  seg::Pool *pool = route_pool(r, ts);
  auto [p, usable, in_pool] = place_routed(api, r, pool, n, r.align, false);
  if (!p) {
    errno = ENOMEM;
    return nullptr; // the old block stays the program's
  }
  size_t had = g_real.usable_size(old);
  memcpy(p, old, had < n ? had : n);
  count_routed(r, n);
  if (begin(ts)) {
    record_free(ts, api, old);
    record_alloc(ts, api, p, n, r.align, start, usable < n ? n : usable);
    if (in_pool)
      record_tag(ts, p, r.name, true);
    ts.busy = 0;
  }
  g_real.free(old);
  return p;
}

// The rule for this allocation, if rules are loaded and it is not one of our
// own (made while recording).
inline const Route *route_of(const ThreadState &ts, size_t n, const UnwindStart &start) {
  if (ML_LIKELY(!g_routing) || ts.busy)
    return nullptr;
  return route_for(start, n);
}

[[gnu::always_inline]] inline void *alloc_impl(Api api, size_t n, const UnwindStart &start) {
  ThreadState &ts = tl_state;
  if (const Route *r = route_of(ts, n, start); ML_UNLIKELY(r != nullptr))
    return routed_alloc(ts, api, *r, n, 0, false, start);
  if (!begin(ts))
    return forward_malloc(n);
  void *p = g_real.malloc(n);
  if (ML_LIKELY(p != nullptr))
    record_alloc(ts, api, p, n, 0, start);
  ts.busy = 0;
  return p;
}

// `allocate` is the real allocator's own entry point, so alignments it
// accepts or refuses (glibc rounds odd ones up, jemalloc refuses them) come
// out exactly as without us; `size` is what the program asked for.
template <class Allocate>
inline void *aligned_impl(Api api, size_t align, size_t size, Allocate allocate,
                          const UnwindStart &start) {
  ThreadState &ts = tl_state;
  // Alignments the real allocator would refuse keep its answer.
  if (const Route *r = route_of(ts, size, start);
      ML_UNLIKELY(r != nullptr) && align && !(align & (align - 1)))
    return routed_alloc(ts, api, *r, size, align, false, start);
  if (!begin(ts))
    return have_real() ? allocate() : own_heap::allocate(size, align, false);
  void *p = allocate();
  if (p)
    record_alloc(ts, api, p, size, align, start);
  ts.busy = 0;
  return p;
}

[[gnu::noinline]] void pool_free(ThreadState &ts, Api api, void *p) {
  if (begin(ts)) {
    record_free(ts, api, p);
    ts.busy = 0;
  }
  seg::pool_free(p);
}

inline bool from_pool(const void *p) {
  return ML_UNLIKELY(g_pools_exist.load(std::memory_order_relaxed)) && seg::pool_of(p);
}

[[gnu::always_inline]] inline void free_impl(Api api, void *p) {
  if (!p)
    return;
  if (ML_UNLIKELY(own_heap::contains(p)))
    return own_heap::release(p);
  ThreadState &ts = tl_state;
  if (from_pool(p))
    return pool_free(ts, api, p);
  if (begin(ts)) {
    record_free(ts, api, p);
    ts.busy = 0;
  }
  g_real.free(p);
}

// realloc of a pool object stays in its pool.
[[gnu::noinline]] void *pool_realloc(ThreadState &ts, Api api, void *old, size_t n,
                                     const UnwindStart &start) {
  if (n == 0) {
    pool_free(ts, api, old);
    return nullptr;
  }
  void *p = seg::pool_realloc(old, n);
  if (p && begin(ts)) {
    record_free(ts, api, old);
    record_alloc(ts, api, p, n, 0, start, seg::pool_usable_size(p));
    if (seg::Pool *pool = seg::pool_of(p))
      record_tag(ts, p, seg::pool_name(pool), true);
    ts.busy = 0;
  }
  return p;
}

void *realloc_impl(Api api, void *old, size_t n, const UnwindStart &start) {
  ThreadState &ts = tl_state;
  if (ML_UNLIKELY(own_heap::contains(old))) {
    // Grown while memlayout works it stays in memlayout's heap; grown by
    // the program, it moves to the program's allocator and is recorded.
    bool record = begin(ts);
    void *p = record ? g_real.malloc(n ? n : 1) : forward_malloc(n ? n : 1);
    if (p) {
      size_t keep = own_heap::usable(old);
      memcpy(p, old, keep < n ? keep : n);
      own_heap::release(old);
      if (record)
        record_alloc(ts, api, p, n, 0, start);
    }
    if (record)
      ts.busy = 0;
    return p;
  }
  if (old && from_pool(old))
    return pool_realloc(ts, api, old, n, start);
  if (!old || (n && g_real.usable_size))
    if (const Route *r = route_of(ts, n, start); ML_UNLIKELY(r != nullptr))
      return old ? routed_realloc(ts, api, *r, old, n, start)
                 : routed_alloc(ts, api, *r, n, 0, false, start);
  if (!begin(ts)) {
    if (!old)
      return forward_malloc(n);
    if (have_real())
      return g_real.realloc(old, n);
    errno = ENOMEM;
    return nullptr;
  }
  void *p = g_real.realloc(old, n);
  if (p) {
    if (old)
      record_realloc(ts, api, old, p, n, start);
    else
      record_alloc(ts, api, p, n, 0, start);
  } else if (old && n == 0) {
    record_free(ts, api, old); // realloc(p, 0) freed p
  }
  ts.busy = 0;
  return p;
}

// operator new's failure path belongs to the C++ runtime: new_handler loop
// and std::bad_alloc. Forward there instead of reimplementing it.
template <class F> F next_operator(const char *mangled) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, mangled));
}

[[noreturn]] void no_runtime() { abort(); }

} // namespace

#define ML_START MEMLAYOUT_UNWIND_START()

ML_EXPORT void *malloc(size_t n) { return alloc_impl(Api::kMalloc, n, ML_START); }

ML_EXPORT void free(void *p) { free_impl(Api::kFree, p); }
ML_EXPORT void cfree(void *p) { free_impl(Api::kCfree, p); }

ML_EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (mul_overflows(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  ThreadState &ts = tl_state;
  if (const Route *r = route_of(ts, total, ML_START); ML_UNLIKELY(r != nullptr))
    return routed_alloc(ts, Api::kCalloc, *r, total, 0, true, ML_START);
  if (!begin(ts))
    return forward(total, 16, true, [n, size] { return g_real.calloc(n, size); });
  void *p = g_real.calloc(n, size);
  if (p)
    record_alloc(ts, Api::kCalloc, p, total, 0, ML_START);
  ts.busy = 0;
  return p;
}

ML_EXPORT void *realloc(void *old, size_t n) {
  return realloc_impl(Api::kRealloc, old, n, ML_START);
}

ML_EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  size_t total;
  if (mul_overflows(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc_impl(Api::kReallocArray, old, total, ML_START);
}

ML_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  int rc = EINVAL;
  if (align < sizeof(void *) || (align & (align - 1)))
    return EINVAL; // as every allocator answers, and nothing to record
  if (const Route *r = route_of(tl_state, n, ML_START); ML_UNLIKELY(r != nullptr)) {
    void *p;
    {
      sys::KeepErrno keep; // posix_memalign returns its error and leaves errno alone
      p = routed_alloc(tl_state, Api::kPosixMemalign, *r, n, align, false, ML_START);
    }
    if (!p)
      return ENOMEM;
    *out = p;
    return 0;
  }
  aligned_impl(
      Api::kPosixMemalign, align, n,
      [&]() -> void * {
        void *p = nullptr;
        rc = g_real.posix_memalign(&p, align, n);
        return rc == 0 ? (*out = p) : nullptr;
      },
      ML_START);
  return rc;
}

ML_EXPORT void *aligned_alloc(size_t align, size_t n) {
  return aligned_impl(
      Api::kAlignedAlloc, align, n, [&] { return g_real.aligned_alloc(align, n); }, ML_START);
}

ML_EXPORT void *memalign(size_t align, size_t n) {
  return aligned_impl(
      Api::kMemalign, align, n, [&] { return g_real.memalign(align, n); }, ML_START);
}

ML_EXPORT void *valloc(size_t n) {
  return aligned_impl(
      Api::kValloc, sys::page_size(), n, [&] { return g_real.valloc(n); }, ML_START);
}

ML_EXPORT void *pvalloc(size_t n) {
  return aligned_impl(
      Api::kPvalloc, sys::page_size(), n, [&] { return g_real.pvalloc(n); }, ML_START);
}

ML_EXPORT size_t malloc_usable_size(void *p) {
  if (!p)
    return 0;
  if (own_heap::contains(p))
    return own_heap::usable(p);
  if (from_pool(p))
    return seg::pool_usable_size(p);
  return have_real() && g_real.usable_size ? g_real.usable_size(p) : 0;
}

// ---- C++ ---------------------------------------------------------------------

#define ML_CXX_EXPORT __attribute__((visibility("default")))

ML_CXX_EXPORT void *operator new(size_t n) {
  if (void *p = alloc_impl(Api::kNew, n, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t)>("_Znwm");
  return next ? next(n) : (no_runtime(), nullptr);
}
ML_CXX_EXPORT void *operator new[](size_t n) {
  if (void *p = alloc_impl(Api::kNewArray, n, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t)>("_Znam");
  return next ? next(n) : (no_runtime(), nullptr);
}
ML_CXX_EXPORT void *operator new(size_t n, const std::nothrow_t &nt) noexcept {
  if (void *p = alloc_impl(Api::kNewNothrow, n, ML_START))
    return p;
  static auto next =
      next_operator<void *(*)(size_t, const std::nothrow_t &)>("_ZnwmRKSt9nothrow_t");
  return next ? next(n, nt) : nullptr;
}
ML_CXX_EXPORT void *operator new[](size_t n, const std::nothrow_t &nt) noexcept {
  if (void *p = alloc_impl(Api::kNewArrayNothrow, n, ML_START))
    return p;
  static auto next =
      next_operator<void *(*)(size_t, const std::nothrow_t &)>("_ZnamRKSt9nothrow_t");
  return next ? next(n, nt) : nullptr;
}
ML_CXX_EXPORT void *operator new(size_t n, std::align_val_t a) {
  if (void *p = aligned_impl(
          Api::kNewAligned, static_cast<size_t>(a), n,
          [&] { return g_real.memalign(static_cast<size_t>(a), n); }, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t, std::align_val_t)>("_ZnwmSt11align_val_t");
  return next ? next(n, a) : (no_runtime(), nullptr);
}
ML_CXX_EXPORT void *operator new[](size_t n, std::align_val_t a) {
  if (void *p = aligned_impl(
          Api::kNewArrayAligned, static_cast<size_t>(a), n,
          [&] { return g_real.memalign(static_cast<size_t>(a), n); }, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t, std::align_val_t)>("_ZnamSt11align_val_t");
  return next ? next(n, a) : (no_runtime(), nullptr);
}
ML_CXX_EXPORT void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &nt) noexcept {
  if (void *p = aligned_impl(
          Api::kNewAlignedNothrow, static_cast<size_t>(a), n,
          [&] { return g_real.memalign(static_cast<size_t>(a), n); }, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t, std::align_val_t, const std::nothrow_t &)>(
      "_ZnwmSt11align_val_tRKSt9nothrow_t");
  return next ? next(n, a, nt) : nullptr;
}
ML_CXX_EXPORT void *operator new[](size_t n, std::align_val_t a,
                                   const std::nothrow_t &nt) noexcept {
  if (void *p = aligned_impl(
          Api::kNewArrayAlignedNothrow, static_cast<size_t>(a), n,
          [&] { return g_real.memalign(static_cast<size_t>(a), n); }, ML_START))
    return p;
  static auto next = next_operator<void *(*)(size_t, std::align_val_t, const std::nothrow_t &)>(
      "_ZnamSt11align_val_tRKSt9nothrow_t");
  return next ? next(n, a, nt) : nullptr;
}

ML_CXX_EXPORT void operator delete(void *p) noexcept { free_impl(Api::kDelete, p); }
ML_CXX_EXPORT void operator delete[](void *p) noexcept { free_impl(Api::kDeleteArray, p); }
ML_CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept {
  free_impl(Api::kDelete, p);
}
ML_CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept {
  free_impl(Api::kDeleteArray, p);
}
ML_CXX_EXPORT void operator delete(void *p, size_t) noexcept { free_impl(Api::kDeleteSized, p); }
ML_CXX_EXPORT void operator delete[](void *p, size_t) noexcept {
  free_impl(Api::kDeleteArraySized, p);
}
ML_CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept {
  free_impl(Api::kDeleteAligned, p);
}
ML_CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept {
  free_impl(Api::kDeleteArrayAligned, p);
}
ML_CXX_EXPORT void operator delete(void *p, size_t, std::align_val_t) noexcept {
  free_impl(Api::kDeleteSizedAligned, p);
}
ML_CXX_EXPORT void operator delete[](void *p, size_t, std::align_val_t) noexcept {
  free_impl(Api::kDeleteArraySizedAligned, p);
}
ML_CXX_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  free_impl(Api::kDeleteAligned, p);
}
ML_CXX_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  free_impl(Api::kDeleteArrayAligned, p);
}
