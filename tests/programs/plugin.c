/* A library loaded with dlopen that allocates on its own account. */
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct plugin_record {
  char name[48];
  long values[8];
};

NOINLINE __attribute__((visibility("default"))) void *mlp_plugin_make(const char *name) {
  struct plugin_record *r = malloc(sizeof *r);
  if (!r)
    return NULL;
  memset(r, 0, sizeof *r);
  strncpy(r->name, name, sizeof r->name - 1);
  return r;
}

__attribute__((visibility("default"))) size_t mlp_plugin_record_size(void) {
  return sizeof(struct plugin_record);
}

__attribute__((visibility("default"))) void mlp_plugin_destroy(void *r) { free(r); }
