// <memlayout/seg.hpp> in a program built without exceptions, as some
// codebases are (-fno-exceptions): every front end compiles, and what it
// allocates comes from its pool.
#include <memlayout/seg.hpp>

#include <cstdio>
#include <map>
#include <memory_resource>
#include <vector>

struct noexcept_nodes {
  static constexpr const char *name = "noexceptions-nodes";
};

struct leaf {
  MEMLAYOUT_SEG_CLASS("noexceptions-leaves");
  long key = 0;
};

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char *what) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s\n", what);
      ++failures;
    }
  };
  std::vector<long, memlayout::seg::allocator<long, noexcept_nodes>> v(100, 1);
  expect(seg_pool_of(v.data()) != nullptr, "a vector's buffer comes from the Tag's pool");
  std::map<int, int, std::less<int>,
           memlayout::seg::allocator<std::pair<const int, int>, noexcept_nodes>>
      m;
  m[1] = 2;
  expect(seg_pool_of(&*m.begin()) != nullptr, "a map's nodes come from the Tag's pool");
  memlayout::seg::memory_resource rows("noexceptions-rows");
  std::pmr::vector<int> w(10, 3, &rows);
  expect(seg_pool_of(w.data()) != nullptr, "a pmr vector's buffer comes from the pool");
  leaf *l = new leaf;
  expect(seg_pool_of(l) != nullptr, "a class's objects come from its pool");
  delete l;
  return failures == 0 ? 0 : 1;
}
