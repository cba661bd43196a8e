/* A program with an allocator of its own, defined under the standard names
 * (as some embedded databases and games link one): every allocation, libc's
 * included, goes to it, none to the recorder's malloc.
 *
 *   own_malloc   (allocates 200 blocks from a static arena) */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) unsigned char g_arena[1 << 20];
static size_t g_used;

void *malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof g_arena - g_used)
    return NULL;
  void *p = g_arena + g_used;
  g_used += n;
  return p;
}
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t size) {
  if (size && n > (size_t)-1 / size)
    return NULL;
  void *p = malloc(n * size);
  if (p)
    memset(p, 0, n * size);
  return p;
}
void *realloc(void *p, size_t n) {
  void *q = malloc(n);
  if (q && p)
    memcpy(q, p, n); /* the arena is contiguous: reading past the old block is safe */
  return q;
}

int main(void) {
  void *kept[200];
  for (int i = 0; i < 200; ++i)
    kept[i] = malloc(48);
  printf("own allocator: %zu bytes in use, last block %s\n", g_used, kept[199] ? "ok" : "none");
  return 0;
}
