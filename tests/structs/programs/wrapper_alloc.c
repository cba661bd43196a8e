/* Allocation through the program's own wrappers, built -O2 -g as users
   build theirs, for `memlayout structs` and `report --types` in the
   structs tests:
   - fl_get, a free list of no allocator's name, has two callers: the
     report looks through it (detected), and the type map's site
     `struct entry *e = fl_get(&entries)` types entry_new's group;
   - zcalloc has one caller: it stays the site, and the map's site at its
     call in create_client types its calloc's objects, 40-byte clients
     holding a lock, two to a line pair. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
  unsigned long hash; /* 0 */
  struct entry *next; /* 8 */
  long key;           /* 16 */
  long value;         /* 24 */
  char tag[40];       /* 32: 72 bytes */
};

typedef struct client {
  pthread_spinlock_t lock;
  int fd;
  long peak;
  char name[24]; /* 40 bytes */
} client;

struct freelist {
  void *head;
  size_t size;
};

static void *fl_get(struct freelist *fl) {
  if (fl->head) {
    void *p = fl->head;
    fl->head = *(void **)p;
    return p;
  }
  void *p = malloc(fl->size);
  if (!p)
    abort();
  return p;
}

static void fl_put(struct freelist *fl, void *p) {
  *(void **)p = fl->head;
  fl->head = p;
}

void *zcalloc(size_t n) {
  void *p = calloc(1, n);
  if (!p)
    abort();
  return p;
}

static struct freelist entries = {0, sizeof(struct entry)};
static struct freelist scratch = {0, 72};

#define ENTRIES 5000
#define CLIENTS 2000
static struct entry *table[ENTRIES];
static client *clients[CLIENTS];

static struct entry *entry_new(long k, long v) {
  struct entry *e = fl_get(&entries);
  e->hash = (unsigned long)k * 0x9e3779b97f4a7c15ul;
  e->key = k;
  e->value = v;
  memset(e->tag, 0, sizeof e->tag);
  return e;
}

static client *create_client(int fd) {
  client *c = zcalloc(sizeof(client));
  pthread_spin_init(&c->lock, 0);
  c->fd = fd;
  return c;
}

int main(void) {
  for (long i = 0; i < ENTRIES; i++) {
    table[i] = entry_new(i, i * 3);
    char *buf = fl_get(&scratch);
    snprintf(buf, 72, "k%ld", i);
    fl_put(&scratch, buf);
  }
  for (int i = 0; i < CLIENTS; i++)
    clients[i] = create_client(i);
  long sum = 0;
  for (long i = 0; i < ENTRIES; i++)
    sum += table[i]->value;
  printf("%ld %d\n", sum, clients[CLIENTS - 1]->fd);
  return 0;
}
