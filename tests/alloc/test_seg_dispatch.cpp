// Under `memlayout record` the interposer exports its engine as a Dispatch
// table and libmemlayout_seg forwards every call to it. This program plays
// the interposer: it exports a table of its own, and the library must use it.
#include "seg_core.h"

#include <catch2/catch.hpp>

#include <cstdlib>

namespace {

int g_calls[10];
seg_pool *const kFakePool = reinterpret_cast<seg_pool *>(0x1000);

seg_pool *fake_create(const char *, const seg_pool_options *) { return ++g_calls[0], kFakePool; }
void *fake_malloc(seg_pool *, size_t size) { return ++g_calls[1], malloc(size); }
void *fake_calloc(seg_pool *, size_t n, size_t size) { return ++g_calls[2], calloc(n, size); }
void *fake_aligned(seg_pool *, size_t align, size_t size) {
  return ++g_calls[3], aligned_alloc(align, size);
}
void *fake_realloc(void *p, size_t size) { return ++g_calls[4], realloc(p, size); }
void fake_free(void *p) { ++g_calls[5], free(p); }
seg_pool *fake_pool_of(const void *) { return ++g_calls[6], kFakePool; }
size_t fake_usable(const void *) { return ++g_calls[7], 12345; }
int fake_stats(const seg_pool *, struct seg_pool_stats *s) {
  s->name = "forwarded";
  return ++g_calls[8], 0;
}
void fake_destroy(seg_pool *) { ++g_calls[9]; }

} // namespace

extern "C" __attribute__((visibility("default")))
const memlayout::seg::Dispatch memlayout_seg_dispatch_impl = {
    fake_create, fake_malloc,  fake_calloc, fake_aligned, fake_realloc,
    fake_free,   fake_pool_of, fake_usable, fake_stats,   fake_destroy};

TEST_CASE("dispatch: with an interposer's table present, every call goes there", "[seg]") {
  seg_pool *pool = seg_pool_create("anything", nullptr);
  CHECK(pool == kFakePool);
  void *a = seg_malloc(pool, 10);
  void *b = seg_calloc(pool, 2, 10);
  void *c = seg_aligned_alloc(pool, 64, 64);
  a = seg_realloc(a, 100);
  CHECK(seg_pool_of(a) == kFakePool);
  CHECK(seg_usable_size(a) == 12345);
  struct seg_pool_stats s {};
  CHECK(seg_pool_stats(pool, &s) == 0);
  CHECK(std::string(s.name) == "forwarded");
  seg_free(a);
  seg_free(b);
  seg_free(c);
  seg_pool_destroy(pool);
  for (int i = 0; i < 10; ++i) {
    INFO("entry " << i);
    CHECK(g_calls[i] == (i == 5 ? 3 : 1));
  }
}
