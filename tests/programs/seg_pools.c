/* The int-lf pattern with the fix in code: nodes and descriptors from two
 * memlayout pools (libmemlayout_seg). A second thread frees half the nodes,
 * so pool frees cross threads. Rows go to two tables' pools from one call
 * site, as a storage engine's allocator that takes its pool as an argument.
 *
 *   seg_pools [N]   (default 20000 pairs) */
#include <errno.h>
#include <memlayout/seg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

static struct node **nodes;
static long count;

static void *free_odd_nodes(void *arg) {
  (void)arg;
  for (long i = 1; i < count; i += 2) {
    seg_free(nodes[i]);
    nodes[i] = NULL;
  }
  return NULL;
}

int main(int argc, char **argv) {
  count = argc > 1 ? atol(argv[1]) : 20000;
  seg_pool *node_pool = seg_pool_create("nodes", NULL);
  seg_pool *desc_pool = seg_pool_create("descriptors", NULL);
  if (!node_pool || !desc_pool)
    return 1;
  nodes = calloc((size_t)count, sizeof *nodes);
  for (long i = 0; i < count; ++i) {
    nodes[i] = seg_malloc(node_pool, sizeof(struct node));
    nodes[i]->key = i;
    struct descriptor *d = seg_malloc(desc_pool, sizeof *d);
    d->node = nodes[i];
    nodes[i]->op = d;
    if (seg_pool_of(nodes[i]) != node_pool || seg_pool_of(d) != desc_pool)
      return 2;
  }
  seg_pool *tables[2] = {seg_pool_create("table-a", NULL), seg_pool_create("table-b", NULL)};
  void **rows = calloc((size_t)count, sizeof *rows);
  if (!tables[0] || !tables[1] || !rows)
    return 5;
  /* Every other pair of rows on a line of its own (aligned): a pool's
   * aligned objects are its objects as well. */
  for (long i = 0; i < count; ++i)
    rows[i] = i & 2 ? seg_aligned_alloc(tables[i & 1], 64, 40) : seg_malloc(tables[i & 1], 40);
  pthread_t t;
  pthread_create(&t, NULL, free_odd_nodes, NULL);
  pthread_join(t, NULL);
  long sum = 0;
  for (long i = 0; i < count; i += 2)
    sum += nodes[i]->key;
  struct seg_pool_stats st;
  if (seg_pool_stats(node_pool, &st) != 0)
    return 3;
  /* The API's contract holds whoever serves it (the library, or the
   * interposer under memlayout): alignment 0 is not a power of two. */
  errno = 0;
  if (seg_aligned_alloc(node_pool, 0, 16) != NULL || errno != EINVAL)
    return 4;
  /* The tables go with their rows, none of them freed one by one. */
  seg_pool_destroy(tables[0]);
  seg_pool_destroy(tables[1]);
  free(rows);
  printf("%ld %llu\n", sum, (unsigned long long)st.frees);
  return 0;
}
