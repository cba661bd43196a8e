/* Typed constructors whose whole body is the allocation: at -O2 GCC turns
 * `return malloc(...)` into a jump, so new_node and new_desc leave no frame
 * and every allocation's first frame returns into main. The DWARF call site
 * at that return address says which constructor main called: it is the site.
 * A 48-byte node and a 48-byte descriptor per insert, allocated alternately.
 *
 *   mlt_tail_ctors [N]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>

struct node {
  long key;
  struct node *left, *right;
  long pad[3];
};
struct desc {
  long op;
  void *target;
  long pad[4];
};

__attribute__((noinline)) struct node *new_node(void) { return malloc(sizeof(struct node)); }
__attribute__((noinline)) struct desc *new_desc(void) { return malloc(sizeof(struct desc)); }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  struct node **nodes = malloc(sizeof *nodes * (size_t)n);
  struct desc **descs = malloc(sizeof *descs * (size_t)n);
  for (int i = 0; i < n; i++) {
    nodes[i] = new_node();
    nodes[i]->key = i;
    descs[i] = new_desc();
    descs[i]->op = i;
  }
  long sum = 0;
  for (int i = 0; i < n; i++)
    sum += nodes[i]->key + descs[i]->op;
  printf("%d %ld\n", n, sum);
  return 0;
}
