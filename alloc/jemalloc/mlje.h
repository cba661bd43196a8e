/* The renamed jemalloc 5.3 API linked into memlayout's libraries (see
 * alloc/CMakeLists.txt). Only what memlayout calls is declared. */
#ifndef MEMLAYOUT_MLJE_H
#define MEMLAYOUT_MLJE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void *mlje_malloc(size_t size);
void *mlje_calloc(size_t n, size_t size);
void *mlje_realloc(void *ptr, size_t size);
void mlje_free(void *ptr);
void *mlje_memalign(size_t align, size_t size);
int mlje_posix_memalign(void **out, size_t align, size_t size);
void *mlje_aligned_alloc(size_t align, size_t size);
void *mlje_valloc(size_t size);
size_t mlje_malloc_usable_size(void *ptr);
void *mlje_mallocx(size_t size, int flags);
void *mlje_rallocx(void *ptr, size_t size, int flags);
void mlje_dallocx(void *ptr, int flags);
void mlje_sdallocx(void *ptr, size_t size, int flags);
size_t mlje_sallocx(const void *ptr, int flags);
size_t mlje_nallocx(size_t size, int flags);
int mlje_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
#ifdef __cplusplus
}
#endif
#endif
