/* Records and index entries made by a stripped library
 * (stripped_wrappers.c), one of each per key, interleaved as int-lf's nodes
 * and descriptors are: both 64 bytes.
 *
 *   PROGRAM [N]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>

struct record;
struct index_entry;
void *xmalloc_like(size_t n);
void *db_malloc_zero(size_t n);
struct record *lib_new_record(long key);
struct index_entry *lib_new_index(long key, struct record *rec);
size_t lib_bytes(void);

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  struct record **records = xmalloc_like(sizeof *records * (size_t)n);
  struct index_entry **index = db_malloc_zero(sizeof *index * (size_t)n);
  for (int i = 0; i < n; i++) {
    records[i] = lib_new_record(i);
    index[i] = lib_new_index(i, records[i]);
  }
  printf("%d %zu\n", n, lib_bytes());
  return 0;
}
