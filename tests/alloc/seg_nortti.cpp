// <memlayout/seg.hpp> built without RTTI, as some codebases are: two
// memory_resources over one pool still compare equal (a pmr container
// moved between them moves its buffer instead of copying it).
#include <memlayout/seg.hpp>

#include <cstdio>
#include <memory_resource>
#include <vector>

int main() {
  memlayout::seg::memory_resource rows("nortti-rows"), rows_again("nortti-rows");
  memlayout::seg::memory_resource other("nortti-other");
  std::pmr::monotonic_buffer_resource unrelated;
  int failures = 0;
  auto expect = [&](bool ok, const char *what) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s\n", what);
      ++failures;
    }
  };
  expect(rows.is_equal(rows_again), "two resources over one pool are equal");
  expect(rows == rows_again, "operator== agrees");
  expect(!rows.is_equal(other), "resources over two pools differ");
  expect(!rows.is_equal(unrelated), "another kind of resource differs");
  std::pmr::vector<long> v(1000, 7, &rows);
  const long *data = v.data();
  std::pmr::vector<long> w(&rows_again);
  w = std::move(v);
  expect(w.data() == data, "move assignment between equal resources takes the buffer");
  return failures == 0 ? 0 : 1;
}
