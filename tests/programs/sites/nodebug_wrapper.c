/* A service built without debug information (-O2 -g0), as Debian ships
 * redis-server: its own allocation wrapper xalloc (counts bytes, aborts on
 * NULL, as zmalloc does) serves the functions that make its objects,
 * new_conn and new_buf. Only the recorded stacks show that xalloc is a
 * wrapper: without DWARF nothing reads its code. noinline stands for what
 * the real program's size does: such functions stay calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t g_used;

__attribute__((noinline)) void *xalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fputs("out of memory\n", stderr);
    abort();
  }
  g_used += n;
  return p;
}

struct buf {
  size_t len;
  char data[88];
};

struct conn {
  int fd;
  int state;
  char peer[40];
  struct buf *in;
};

__attribute__((noinline)) struct conn *new_conn(int fd) {
  struct conn *c = xalloc(sizeof *c);
  memset(c, 0, sizeof *c);
  c->fd = fd;
  snprintf(c->peer, sizeof c->peer, "10.0.%d.%d:6379", fd >> 8 & 255, fd & 255);
  return c;
}

__attribute__((noinline)) struct buf *new_buf(const char *text) {
  struct buf *b = xalloc(sizeof *b);
  b->len = strlen(text);
  memcpy(b->data, text, b->len + 1);
  return b;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  struct conn **conns = calloc((size_t)n, sizeof *conns);
  if (!conns)
    return 1;
  for (int i = 0; i < n; ++i) {
    conns[i] = new_conn(i);
    conns[i]->in = new_buf("PING\r\n");
  }
  size_t bytes = 0;
  for (int i = 0; i < n; ++i)
    bytes += conns[i]->in->len + strlen(conns[i]->peer);
  printf("%d connections, %zu bytes of text, %zu allocated\n", n, bytes, g_used);
  for (int i = 0; i < n; ++i) {
    free(conns[i]->in);
    free(conns[i]);
  }
  free(conns);
  return 0;
}
