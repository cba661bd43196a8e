// The one size-class table (alloc/size_class.h) against the real allocators
// it models: a wrong class would make every recorded usable size wrong.
#include "mlje.h"
#include "size_class.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <malloc.h>
#include <vector>

using memlayout::glibc_usable_from_header;
using memlayout::glibc_usable_size;
using memlayout::jemalloc_size_class;

TEST_CASE("size classes: jemalloc_size_class is jemalloc 5.3's nallocx", "[alloc]") {
  for (size_t n = 0; n <= (size_t{4} << 20); n += n < 20000 ? 1 : n < (1 << 20) ? 61 : 4093) {
    INFO("request " << n);
    REQUIRE(jemalloc_size_class(n) == mlje_nallocx(n ? n : 1, 0));
  }
}

TEST_CASE("size classes: what jemalloc hands out is the class", "[alloc]") {
  for (size_t n : {1, 8, 9, 48, 49, 100, 129, 1000, 14336, 14337, 100000, 3 << 20}) {
    void *p = mlje_malloc(n);
    REQUIRE(p);
    CHECK(mlje_sallocx(p, 0) == jemalloc_size_class(n));
    mlje_free(p);
  }
}

TEST_CASE("size classes: glibc's usable size, predicted and read from the header", "[alloc]") {
  // glibc may hand out up to 31 bytes more than the class (a remainder too
  // small to split off a free chunk): the chunk header always tells, the
  // prediction is the floor and the common case. This is why the recorder
  // reads the header and stores the difference when there is one.
  size_t total = 0, predicted = 0;
  std::vector<void *> kept;
  for (size_t n = 0; n < 100000; n += n < 4096 ? 1 : 97) {
    INFO("request " << n);
    void *p = std::malloc(n);
    REQUIRE(p);
    size_t usable = malloc_usable_size(p);
    CHECK(glibc_usable_from_header(p) == usable);
    CHECK(usable >= glibc_usable_size(n));
    CHECK(usable - glibc_usable_size(n) < 32);
    predicted += usable == glibc_usable_size(n);
    ++total;
    if (n % 3)
      kept.push_back(p); // a mix of fresh chunks and reuse
    else
      std::free(p);
  }
  CHECK(predicted * 10 > total * 9);
  for (void *p : kept)
    std::free(p);
  // Mmapped chunks: the prediction no longer holds, the header still does.
  void *big = std::malloc(size_t{4} << 20);
  REQUIRE(big);
  CHECK(glibc_usable_from_header(big) == malloc_usable_size(big));
  CHECK(glibc_usable_size(size_t{4} << 20) != malloc_usable_size(big));
  std::free(big);
}
