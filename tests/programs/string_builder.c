/* Field-shaped C: a growable string buffer (as redis's sds, git's strbuf),
 * born small in one function and grown by realloc in another. A report
 * groups each buffer under the site that last grew it; a rule naming that
 * site must route the buffers when they grow there.
 *
 *   string_builder [RECORDS]   (default 20000)
 * Prints a checksum of every record's text: the same whether or not the
 * buffers were moved into a pool. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sbuf {
  char *data;
  size_t len, cap;
};

struct record {
  long id;
  double score;
  struct sbuf text;
  struct record *next;
};

static void die(void) {
  fputs("out of memory\n", stderr);
  exit(1);
}

static void sb_init(struct sbuf *sb) {
  sb->cap = 16;
  sb->len = 0;
  sb->data = malloc(sb->cap);
  if (!sb->data)
    die();
  sb->data[0] = 0;
}

static inline void sb_grow(struct sbuf *sb, size_t need) {
  if (sb->len + need + 1 <= sb->cap)
    return;
  size_t cap = sb->cap;
  while (cap < sb->len + need + 1)
    cap *= 2;
  char *grown = realloc(sb->data, cap);
  if (!grown)
    die();
  sb->data = grown;
  sb->cap = cap;
}

static void sb_appendf(struct sbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  sb_grow(sb, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000;
  struct record *head = NULL;
  for (long i = 0; i < n; ++i) {
    struct record *r = malloc(sizeof *r);
    if (!r)
      die();
    r->id = i;
    r->score = (double)(i % 977) / 7.0;
    sb_init(&r->text);
    sb_appendf(&r->text, "record %ld", i);
    sb_appendf(&r->text, " score=%.3f", r->score);
    if (i % 3 == 0)
      sb_appendf(&r->text, " tags=%s,%s", "alpha", i % 2 ? "odd" : "even");
    r->next = head;
    head = r;
  }
  unsigned long sum = 0;
  long records = 0;
  for (struct record *r = head; r; r = r->next, ++records)
    for (size_t k = 0; k < r->text.len; ++k)
      sum = sum * 131 + (unsigned char)r->text.data[k];
  printf("%ld records, checksum %lu\n", records, sum);
  while (head) {
    struct record *next = head->next;
    free(head->text.data);
    free(head);
    head = next;
  }
  return 0;
}
