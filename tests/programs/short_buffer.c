/* A peak whose largest object no memory snapshot saw: records that stay,
 * and a 1 MiB buffer (glibc maps it on its own) filled and freed before the
 * process ends, as a request's scratch buffer is. The recorder's snapshots
 * come as resident memory grows and at the end, when the buffer's pages
 * are gone: no frame is known for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct record {
  long key;
  char name[24];
};

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  struct record **records = calloc((size_t)n, sizeof *records);
  if (!records)
    return 1;
  for (int i = 0; i < n; ++i) {
    records[i] = malloc(sizeof **records);
    records[i]->key = i;
    snprintf(records[i]->name, sizeof records[i]->name, "record %d", i);
  }
  size_t size = (size_t)1 << 20;
  unsigned char *scratch = malloc(size);
  if (!scratch)
    return 1;
  memset(scratch, 7, size);
  unsigned long sum = 0;
  for (size_t i = 0; i < size; i += 4096)
    sum += scratch[i];
  free(scratch);
  for (int i = 0; i < n; ++i)
    sum += (unsigned long)records[i]->key;
  printf("%d records, checksum %lu\n", n, sum);
  for (int i = 0; i < n; ++i)
    free(records[i]);
  free(records);
  return 0;
}
