/* Howley & Jones' lock-free internal BST as benchmark suites write it, cut
 * down to its allocation pattern: every insert allocates a node and an
 * operation record through the suite's pool, back to back. Records are built
 * by static inline constructors that the compiler folds into bst_add.
 *
 *   bst_* [N [LOOKUPS]]   N inserts of random keys (default 100000), then
 *                         LOOKUPS searches of random keys (default 0) */
#include "bst_pool.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct node {
  long key;
  long value;
  struct node *left, *right;
  struct operation *op;
  long pad[2];
} node_t;

typedef struct operation {
  int kind;
  node_t *dest;
  node_t *expected;
  node_t *update;
  long seq;
  long pad[3];
} operation_t;

static inline node_t *create_node(long key, long value) {
  node_t *n = pool_get(sizeof *n);
  n->key = key;
  n->value = value;
  n->left = n->right = NULL;
  n->op = NULL;
  return n;
}

static inline operation_t *create_child_op(node_t *dest, node_t *expected, node_t *update) {
  operation_t *op = pool_get(sizeof *op);
  op->kind = 1;
  op->dest = dest;
  op->expected = expected;
  op->update = update;
  op->seq = 0;
  return op;
}

static node_t *root;

int bst_add(long key, long value) {
  node_t **at = &root, *parent = NULL;
  while (*at) {
    parent = *at;
    if (key == parent->key)
      return 0;
    at = key < parent->key ? &parent->left : &parent->right;
  }
  node_t *n = create_node(key, value);
  operation_t *op = create_child_op(parent, NULL, n);
  n->op = op;
  *at = n;
  return 1;
}

static int bst_contains(long key) {
  const node_t *n = root;
  while (n && n->key != key)
    n = key < n->key ? n->left : n->right;
  return n != NULL;
}

static long sum_keys(const node_t *n) {
  long s = 0;
  while (n) {
    s += n->key + sum_keys(n->left);
    n = n->right;
  }
  return s;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  long lookups = argc > 2 ? atol(argv[2]) : 0;
  uint64_t x = 88172645463325252ull;
  long added = 0, found = 0;
  for (long i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    added += bst_add((long)(x % (uint64_t)(4 * n)), (long)i);
  }
  for (long i = 0; i < lookups; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    found += bst_contains((long)(x % (uint64_t)(4 * n)));
  }
  printf("%ld keys, sum %ld, %zu bytes, %ld found\n", added, sum_keys(root), pool_allocated(),
         found);
  return 0;
}
