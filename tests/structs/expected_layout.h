/* Layout facts measured by the compiler that builds the tests, for
   comparison with what memlayout structs reports. Shared by C and C++. */
#ifndef MEMLAYOUT_TEST_EXPECTED_LAYOUT_H
#define MEMLAYOUT_TEST_EXPECTED_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct expected_record {
  const char *name;
  size_t size, align;
};

struct expected_field {
  const char *record, *field;
  size_t offset, size;
};

struct expected_bits {
  const char *record, *field;
  unsigned bit_offset, bit_size;
};

/* The set bits of an object's bytes, as bit positions from its start
   (little endian: bit i of the object is bit i % 8 of byte i / 8). */
struct expected_bits set_bits(const char *record, const char *field, const void *object,
                              size_t size);

/* tests/structs/fixtures/c_layouts.h, as the C compiler lays it out. */
extern const struct expected_record c_records[];
extern const size_t c_record_count;
extern const struct expected_field c_fields[];
extern const size_t c_field_count;
/* struct list's bit-fields, measured by setting each in a zeroed object. */
void c_bitfields(struct expected_bits out[2]);

#ifdef __cplusplus
}
#endif

#endif
