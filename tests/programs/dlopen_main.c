/* Loads a plugin with dlopen and lets it allocate.
 *
 *   dlopen_main PLUGIN LOG [deepbind] [close] [reload=N]
 *
 * deepbind: dlopen with RTLD_DEEPBIND; close: dlclose the plugin before
 * exiting; reload=N: first N rounds of loading the plugin, making one
 * record (not logged), destroying it and closing the plugin, as programs
 * that load plugins on demand do. stdout: what the plugin returned. */
#define _GNU_SOURCE
#include "ml_log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PLUGIN LOG [deepbind] [close]\n", argv[0]);
    return 2;
  }
  int deepbind = 0, close_it = 0, reloads = 0;
  for (int i = 3; i < argc; ++i) {
    deepbind |= !strcmp(argv[i], "deepbind");
    close_it |= !strcmp(argv[i], "close");
    if (!strncmp(argv[i], "reload=", 7))
      reloads = atoi(argv[i] + 7);
  }
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
