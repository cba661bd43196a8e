/* A program annotated with <memlayout/memlayout.h>: phases named with
 * memlayout_mark, objects named with memlayout_tag. Runs the same with and
 * without the recorder.
 *
 *   annotated LOG */
#define _GNU_SOURCE
#include "ml_log.h"

#include <memlayout/memlayout.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

struct tree_node {
  struct tree_node *left, *right;
  long key;
};

NOINLINE struct tree_node *mla_make_node(long key) {
  struct tree_node *n = malloc(sizeof *n);
  n->left = n->right = NULL;
  n->key = key;
  memlayout_tag(n, "TreeNode");
  ml_log_alloc("malloc", "mla_make_node", n, sizeof *n, 0, 0);
  return n;
}

static struct tree_node *insert(struct tree_node *root, long key) {
  if (!root)
    return mla_make_node(key);
  if (key < root->key)
    root->left = insert(root->left, key);
  else
    root->right = insert(root->right, key);
  return root;
}

static long sum_and_free(struct tree_node *n) {
  if (!n)
    return 0;
  long s = n->key + sum_and_free(n->left) + sum_and_free(n->right);
  free(n);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LOG\n", argv[0]);
    return 2;
  }
  memlayout_mark("start");
  struct tree_node *root = NULL;
  for (long i = 0; i < 200; ++i)
    root = insert(root, (i * 7919) % 1009);
  memlayout_mark("built");
  long s = sum_and_free(root);
  memlayout_mark("freed");
  printf("annotated: sum %ld\n", s);
  return ml_log_write(argv[1]) == 0 ? 0 : 1;
}
