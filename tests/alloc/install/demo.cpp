// Uses the installed C++ header: a std::map whose nodes are in a pool.
#include <memlayout/seg.hpp>

#include <cstdio>
#include <map>

struct tree_nodes {
  static constexpr const char *name = "tree-nodes";
};

int main() {
  std::map<int, int, std::less<int>,
           memlayout::seg::allocator<std::pair<const int, int>, tree_nodes>>
      tree;
  for (int i = 0; i < 100; ++i)
    tree[i] = i;
  seg_pool *pool = seg_pool_of(&*tree.begin());
  if (!pool)
    return 1;
  std::printf("c++: %s ok\n", memlayout::seg::pool(pool).name());
  return 0;
}
