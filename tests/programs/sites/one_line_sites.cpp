// Two containers filled on one source line, as loaders write them: a list
// node (56 bytes) and a map node (48), which glibc serves from one chunk
// size. Two allocating calls, one line: two call sites.
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>

struct Item {
  long id, a, b, c, d;
};

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::list<Item> items;
  std::map<long, long> by_id;
  // clang-format off
  for (long i = 0; i < n; ++i) {
    items.push_back(Item{i, i, i, i, i}); by_id.emplace(i, i); // the line
  }
  // clang-format on
  std::printf("%zu %zu\n", items.size(), by_id.size());
  return 0;
}
