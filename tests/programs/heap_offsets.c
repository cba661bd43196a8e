/* Prints where the C library's allocator placed this program's blocks, as
 * offsets that do not move with address randomization: main's from its
 * first block, each thread's from its own first block (threads one after
 * another, each on the arena the one before it left). Run alone and under
 * `memlayout record`, the output is the same when the recorder allocates
 * nothing from the program's heap (ldpreload/own_heap.h).
 *
 *   heap_offsets [THREADS]   (default 3) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const size_t sizes[] = {512, 40, 24, 100, 40, 1000, 24, 56};
#define N (sizeof sizes / sizeof sizes[0])

static void place(const char *who, char *line, size_t room) {
  void *blocks[N];
  int used = snprintf(line, room, "%s:", who);
  for (size_t i = 0; i < N; ++i) {
    blocks[i] = malloc(sizes[i]);
    if (i % 3 == 1) { /* some freed at once: the next ones may reuse them */
      free(blocks[i]);
      blocks[i] = malloc(sizes[i] / 2 + 8);
    }
    long off = (long)((uintptr_t)blocks[i] - (uintptr_t)blocks[0]);
    used += snprintf(line + used, room - (size_t)used, " %ld", off);
  }
  for (size_t i = 0; i < N; ++i)
    free(blocks[i]);
}

static void *thread(void *arg) {
  static char line[256];
  char who[16];
  snprintf(who, sizeof who, "thread %d", (int)(intptr_t)arg);
  place(who, line, sizeof line);
  puts(line);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 3;
  static char line[256];
  place("main", line, sizeof line);
  puts(line);
  for (int t = 0; t < threads; ++t) {
    pthread_t id;
    if (pthread_create(&id, NULL, thread, (void *)(intptr_t)t) != 0)
      return 1;
    pthread_join(id, NULL);
  }
  place("main again", line, sizeof line);
  puts(line);
  return 0;
}
