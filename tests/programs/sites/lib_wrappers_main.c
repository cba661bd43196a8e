/* Typed constructors over the wrappers of lib_wrappers.c, linked as a shared
 * library (mlt_lib_wrappers_main) or built in (mlt_one_file_wrappers).
 *
 *   PROGRAM [N]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>

void *grab_mem(size_t n);
void *grab_zero(size_t n);

struct node {
  long key;
  struct node *left, *right;
};
struct desc {
  long op;
  void *target;
  long extra;
};

__attribute__((noinline)) struct node *make_node(long k) {
  struct node *n = grab_mem(sizeof *n);
  n->key = k;
  n->left = n->right = 0;
  return n;
}

__attribute__((noinline)) struct desc *make_desc(long k) {
  struct desc *d = grab_zero(sizeof *d);
  d->op = k;
  return d;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  struct node **nodes = grab_mem(sizeof *nodes * (size_t)n);
  struct desc **descs = grab_mem(sizeof *descs * (size_t)n);
  for (int i = 0; i < n; i++) {
    nodes[i] = make_node(i);
    descs[i] = make_desc(i);
  }
  long sum = 0;
  for (int i = 0; i < n; i++)
    sum += nodes[i]->key + descs[i]->op;
  printf("%d %ld\n", n, sum);
  return 0;
}
