/* Loads a plugin with dlopen and lets it allocate.
 *
 *   dlopen_main PLUGIN LOG [deepbind] [close] [reload=N] [allocators=T]
 *
 * deepbind: dlopen with RTLD_DEEPBIND; close: dlclose the plugin before
 * exiting; reload=N: first N rounds of loading the plugin, making one
 * record (not logged), destroying it and closing the plugin, as programs
 * that load plugins on demand do; allocators=T: T threads allocate through
 * mlp_main_make while the reloads run (each reload relabels the code for
 * the rules under their lookups), their count on stdout. stdout: what the
 * plugin returned. */
#define _GNU_SOURCE
#include "ml_log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int g_reloading = 1;
static void *volatile g_sink;

__attribute__((noinline, noclone)) void *mlp_main_make(void) {
  void *p = malloc(48);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void *allocate_while_reloading(void *count) {
  long n = 0;
  while (atomic_load(&g_reloading)) {
    g_sink = mlp_main_make();
    free(g_sink);
    ++n;
  }
  *(long *)count = n;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PLUGIN LOG [deepbind] [close]\n", argv[0]);
    return 2;
  }
  int deepbind = 0, close_it = 0, reloads = 0, allocators = 0;
  for (int i = 3; i < argc; ++i) {
    deepbind |= !strcmp(argv[i], "deepbind");
    close_it |= !strcmp(argv[i], "close");
    if (!strncmp(argv[i], "reload=", 7))
      reloads = atoi(argv[i] + 7);
    if (!strncmp(argv[i], "allocators=", 11))
      allocators = atoi(argv[i] + 11);
  }
  pthread_t threads[16];
  long counts[16] = {0};
  if (allocators > 16)
    allocators = 16;
  for (int i = 0; i < allocators; ++i)
    pthread_create(&threads[i], NULL, allocate_while_reloading, &counts[i]);
  for (int i = 0; i < reloads; ++i) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *(*make)(const char *) = h ? (void *(*)(const char *))dlsym(h, "mlp_plugin_make") : NULL;
    void (*destroy)(void *) = h ? (void (*)(void *))dlsym(h, "mlp_plugin_destroy") : NULL;
    if (!make || !destroy) {
      fprintf(stderr, "reload %d: %s\n", i, dlerror());
      return 1;
    }
    destroy(make("reloaded"));
    dlclose(h);
  }
  atomic_store(&g_reloading, 0);
  long made = 0;
  for (int i = 0; i < allocators; ++i) {
    pthread_join(threads[i], NULL);
    made += counts[i];
  }
  if (allocators)
    printf("mlp_main_make: %ld\n", made);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | (deepbind ? RTLD_DEEPBIND : 0));
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void *(*make)(const char *) = (void *(*)(const char *))dlsym(h, "mlp_plugin_make");
  size_t (*size_of)(void) = (size_t(*)(void))dlsym(h, "mlp_plugin_record_size");
  void (*destroy)(void *) = (void (*)(void *))dlsym(h, "mlp_plugin_destroy");
  if (!make || !size_of || !destroy) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 1;
  }
  void *records[16];
  for (int i = 0; i < 16; ++i) {
    char name[32];
    snprintf(name, sizeof name, "record-%d", i);
    records[i] = make(name);
    if (!records[i])
      return 1;
    ml_log_alloc("malloc", "mlp_plugin_make", records[i], size_of(), 0, 0);
  }
  /* Freed on both sides of the library boundary. */
  for (int i = 0; i < 16; ++i) {
    ml_log_free("free", records[i]);
    if (i % 2)
      free(records[i]);
    else
      destroy(records[i]);
  }
  printf("plugin: 16 records of %zu bytes%s\n", size_of(), deepbind ? " (deepbind)" : "");
  if (close_it && dlclose(h) != 0) {
    fprintf(stderr, "dlclose: %s\n", dlerror());
    return 1;
  }
  return ml_log_write(argv[2]) == 0 ? 0 : 1;
}
