// Allocates two record types from two call sites and keeps them live, for
// `memlayout record` and `memlayout report --types` in the structs tests.
#include "typed_nodes.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

typed::Node *make_node(long key) { return new typed::Node{key, nullptr, nullptr, key, {}}; }

typed::Desc *make_desc(int op, typed::Node *target) {
  auto *d = static_cast<typed::Desc *>(std::malloc(sizeof(typed::Desc)));
  if (d) {
    d->op = op;
    d->target = target;
  }
  return d;
}

int main() {
  constexpr int kRecords = 4000;
  std::vector<typed::Node *> nodes;
  std::vector<typed::Desc *> descs;
  nodes.reserve(kRecords);
  descs.reserve(kRecords);
  for (int i = 0; i < kRecords; ++i) {
    nodes.push_back(make_node(i));
    descs.push_back(make_desc(i, nodes.back()));
  }
  // new-expressions on the lines where a vector grows (not reserved): its
  // buffers are the vector's, not Twigs, whatever their size.
  std::vector<typed::Twig *> twigs;
  for (int i = 0; i < kRecords; ++i)
    twigs.push_back(new typed::Twig{i, nullptr, 0, i});
  long sum = 0;
  for (int i = 0; i < kRecords; ++i)
    sum += nodes[i]->key + descs[i]->op + twigs[i]->key;
  std::printf("%ld\n", sum);
  for (int i = 0; i < kRecords; ++i) {
    delete nodes[i];
    std::free(descs[i]);
    delete twigs[i];
  }
  return 0;
}
