/* fixtures/c_layouts.h as gcc lays it out in C. */
#include "expected_layout.h"
#include "fixtures/c_layouts.h"

#include <string.h>

#define RECORD(T, NAME)                                                                            \
  { NAME, sizeof(T), _Alignof(T) }
#define FIELD(T, NAME, F)                                                                          \
  { NAME, #F, offsetof(T, F), sizeof(((T *)0)->F) }

const struct expected_record c_records[] = {
    RECORD(pair_t, "pair_t"),          RECORD(struct list, "list"),
    RECORD(struct c_outer, "c_outer"), RECORD(struct c_inner, "c_inner"),
    RECORD(union c_val, "c_val"),      RECORD(struct flex, "flex"),
    RECORD(struct c_tagged, "c_tagged"),
};
const size_t c_record_count = sizeof c_records / sizeof c_records[0];

const struct expected_field c_fields[] = {
    FIELD(pair_t, "pair_t", a),
    FIELD(pair_t, "pair_t", b),
    FIELD(pair_t, "pair_t", c),
    FIELD(struct list, "list", next),
    FIELD(struct list, "list", p),
    FIELD(struct list, "list", name),
    FIELD(struct c_outer, "c_outer", in),
    FIELD(struct c_outer, "c_outer", z),
    FIELD(struct c_inner, "c_inner", x),
    FIELD(struct c_inner, "c_inner", y),
    FIELD(union c_val, "c_val", l),
    FIELD(union c_val, "c_val", s),
    FIELD(struct flex, "flex", n),
    FIELD(struct flex, "flex", tag),
    /* A flexible array member takes no bytes of its own. */
    {"flex", "data", offsetof(struct flex, data), 0},
    FIELD(struct c_tagged, "c_tagged", tag),
    FIELD(struct c_tagged, "c_tagged", i),
    FIELD(struct c_tagged, "c_tagged", d),
    FIELD(struct c_tagged, "c_tagged", c1),
    FIELD(struct c_tagged, "c_tagged", ptr),
    FIELD(struct c_tagged, "c_tagged", u),
    FIELD(struct c_tagged, "c_tagged", u.n),
    FIELD(struct c_tagged, "c_tagged", u.cc),
    FIELD(struct c_tagged, "c_tagged", b),
};
const size_t c_field_count = sizeof c_fields / sizeof c_fields[0];

struct expected_bits set_bits(const char *record, const char *field, const void *object,
                              size_t size) {
  struct expected_bits b = {record, field, 0, 0};
  const unsigned char *bytes = object;
  int seen = 0;
  for (size_t i = 0; i < size * 8; ++i)
    if (bytes[i / 8] >> (i % 8) & 1) {
      if (!seen)
        b.bit_offset = (unsigned)i;
      seen = 1;
      ++b.bit_size;
    }
  return b;
}

void c_bitfields(struct expected_bits out[2]) {
  struct list l;
  memset(&l, 0, sizeof l);
  l.flags = 0xF;
  out[0] = set_bits("list", "flags", &l, sizeof l);
  memset(&l, 0, sizeof l);
  l.kind = 0xFFF;
  out[1] = set_bits("list", "kind", &l, sizeof l);
}
