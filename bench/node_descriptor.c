/* int-lf's allocation pattern (the BST study): every insert allocates a
 * 64-byte node and a 64-byte operation descriptor, back to back, and
 * descriptors are never freed. Under jemalloc both land in the 64-byte class
 * and the nodes end up on every other line.
 *
 *   node_descriptor [N]   (default 100000 pairs) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
  long key;
  struct node *left, *right;
  void *op;
  char pad[32];
};
struct descriptor {
  long kind;
  void *node, *expected, *update;
  char pad[32];
};

__attribute__((noinline, noclone)) struct node *mlr_new_node(long key) {
  struct node *n = malloc(sizeof *n);
  if (!n)
    abort();
  n->key = key;
  n->left = n->right = NULL;
  n->op = NULL;
  return n;
}

__attribute__((noinline, noclone)) struct descriptor *mlr_new_descriptor(struct node *n) {
  struct descriptor *d = malloc(sizeof *d);
  if (!d)
    abort();
  d->kind = 1;
  d->node = n;
  d->expected = d->update = NULL;
  return d;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  struct node **nodes = calloc((size_t)n, sizeof *nodes);
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    nodes[i] = mlr_new_node(i);
    nodes[i]->op = mlr_new_descriptor(nodes[i]);
  }
  for (long i = 0; i < n; ++i)
    sum += nodes[i]->key;
  printf("%ld\n", sum);
  return 0;
}
