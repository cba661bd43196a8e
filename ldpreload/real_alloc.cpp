#include "real_alloc.h"

#include "mlje.h"
#include "sys.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>

namespace memlayout::preload {

ML_HOT_DATA RealAllocator g_real;
ML_HOT_DATA trace::UsableModel g_usable_model = trace::UsableModel::kNone;

namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

// glibc's pvalloc and jemalloc's missing one both reduce to this; defining it
// ourselves keeps pvalloc from handing out memory of another allocator.
void *pvalloc_via_memalign(size_t n) {
  size_t ps = sys::page_size();
  size_t r = round_up(n ? n : 1, ps);
  if (r < n) {
    errno = ENOMEM;
    return nullptr;
  }
  return g_real.memalign(ps, r);
}
void *valloc_via_memalign(size_t n) { return g_real.memalign(sys::page_size(), n); }

// jemalloc 5.3's memalign, valloc and realloc fail without setting errno (its
// malloc, calloc, aligned_alloc and posix_memalign keep the contract). The C
// and POSIX contract, which glibc keeps and programs test, is EINVAL for an
// alignment that is not a power of two and ENOMEM for no memory: set it, so
// that jemalloc mode answers like jemalloc and fails like malloc.
void *je_memalign(size_t align, size_t n) {
  void *p = mlje_memalign(align, n);
  if (!p)
    errno = align && !(align & (align - 1)) ? ENOMEM : EINVAL;
  return p;
}
void *je_valloc(size_t n) {
  void *p = mlje_valloc(n);
  if (!p)
    errno = ENOMEM;
  return p;
}
// realloc(p, 0) frees p and returns NULL with errno alone (jemalloc's
// opt.zero_realloc, as glibc does): not a failure.
void *je_realloc(void *old, size_t n) {
  void *p = mlje_realloc(old, n);
  if (!p && n)
    errno = ENOMEM;
  return p;
}

template <class F> void next(F *slot, const char *name) {
  *slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

void resolve_real_allocator(AllocatorMode mode) {
  if (mode == AllocatorMode::kJemalloc) {
    g_real = RealAllocator{mlje_malloc,          mlje_free,
                           mlje_calloc,          je_realloc,
                           je_memalign,          mlje_posix_memalign,
                           mlje_aligned_alloc,   je_valloc,
                           pvalloc_via_memalign, mlje_malloc_usable_size};
    g_usable_model = trace::UsableModel::kJemalloc;
    return;
  }
  RealAllocator r{};
  next(&r.malloc, "malloc");
  next(&r.free, "free");
  next(&r.calloc, "calloc");
  next(&r.realloc, "realloc");
  next(&r.memalign, "memalign");
  next(&r.posix_memalign, "posix_memalign");
  next(&r.aligned_alloc, "aligned_alloc");
  next(&r.valloc, "valloc");
  next(&r.pvalloc, "pvalloc");
  next(&r.usable_size, "malloc_usable_size");
  if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.memalign || !r.posix_memalign ||
      !r.aligned_alloc) {
    // No allocator after us (a static or freestanding program): use jemalloc
    // rather than crash.
    sys::warn("no allocator found after the preload; serving from jemalloc");
    resolve_real_allocator(AllocatorMode::kJemalloc);
    return;
  }
  g_real = r;
  // The program's allocator is glibc's own when malloc resolves into libc.
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(r.malloc), &info) && info.dli_fname &&
      strstr(info.dli_fname, "/libc.so.6") && dlsym(RTLD_NEXT, "__libc_malloc") == r.malloc)
    g_usable_model = trace::UsableModel::kGlibc;
  if (!g_real.valloc)
    g_real.valloc = valloc_via_memalign;
  if (!g_real.pvalloc)
    g_real.pvalloc = pvalloc_via_memalign;
}

} // namespace memlayout::preload
