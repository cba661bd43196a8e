// Functions only this file sees, as C++ code has them: static ones and ones
// in an anonymous namespace. GCC gives their DWARF no linkage name; their
// symbols carry the parameter lists that reports name them by and rules
// may name (`function=fill(Shelf*, int)`), one of them cloned by IPA.
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Shelf {
  std::vector<long *> items;
};

static __attribute__((noinline)) void fill(Shelf *s, int n) {
  for (int i = 0; i < n; ++i)
    s->items.push_back(new long[13]);
}

namespace {
__attribute__((noinline)) void stock(Shelf &s, int n, int width) {
  for (int i = 0; i < n; ++i)
    s.items.push_back(new long[width]);
}
} // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 100;
  Shelf shelf;
  shelf.items.reserve(static_cast<size_t>(3 * n));
  fill(&shelf, n);
  stock(shelf, n, 11); // a constant width: the call may go to a .constprop clone
  stock(shelf, n, 11);
  long sum = 0;
  for (long *p : shelf.items)
    sum += p[0] = 1;
  std::printf("%ld\n", sum);
  for (long *p : shelf.items)
    delete[] p;
}
