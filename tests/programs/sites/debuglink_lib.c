// A library shipped stripped, its debug info in a file of its own that
// .gnu_debuglink names (objcopy --only-keep-debug, then --strip-all
// --add-gnu-debuglink), with no build-id to find it by: a static
// constructor the report names from that file, and rules must too.
#include <stdlib.h>

struct entry {
  long key;
  struct entry *next;
  char payload[40];
};

__attribute__((noinline)) static struct entry *new_entry(long key) {
  struct entry *e = malloc(sizeof *e);
  if (!e)
    abort();
  e->key = key;
  e->next = NULL;
  return e;
}

long debuglink_build(int n) {
  struct entry *head = NULL;
  for (int i = 0; i < n; i++) {
    struct entry *e = new_entry(i);
    e->next = head;
    head = e;
  }
  long sum = 0;
  while (head) {
    struct entry *next = head->next;
    sum += head->key;
    free(head);
    head = next;
  }
  return sum;
}
