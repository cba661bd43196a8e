#include "rules.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace memlayout::rules {
namespace {

constexpr const char kAnonymous[] = "(anonymous namespace)";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void set_error(ParseError *err, uint32_t line, uint32_t column, const char *fmt, const char *a,
               const char *b = "") {
  if (!err)
    return;
  err->line = line;
  err->column = column;
  std::snprintf(err->message, sizeof err->message, fmt, a, b);
}

bool equals(const char *s, size_t n, const char *word) {
  return std::strlen(word) == n && std::memcmp(s, word, n) == 0;
}

// Parses an unsigned decimal number with an optional k/K/m/M/g/G suffix.
bool parse_number(const char *s, size_t n, uint64_t *out) {
  if (n == 0)
    return false;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < n && is_digit(s[i]); ++i) {
    if (v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == 0)
    return false;
  if (i + 1 == n) {
    unsigned shift = 0;
    switch (s[i]) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      return false;
    }
    if (v > (UINT64_MAX >> shift))
      return false;
    v <<= shift;
  } else if (i != n) {
    return false;
  }
  *out = v;
  return true;
}

bool copy_value(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap)
    return false;
  std::memcpy(dst, s, n);
  dst[n] = 0;
  return true;
}

// A growing list of name components over a fixed buffer.
struct Scopes {
  static constexpr unsigned kMax = 32;
  const char *begin[kMax];
  size_t size[kMax];
  unsigned count = 0;
  bool overflow = false;
  void push(const char *s, size_t n) {
    if (count == kMax) {
      overflow = true;
      return;
    }
    begin[count] = s;
    size[count] = n;
    ++count;
  }
};

// Where the name proper of a demangled or written function lies: after a
// leading return type, before the parameter list.
void name_bounds(const char *s, size_t *name_start, size_t *name_end) {
  size_t n = without_clone_suffix(s, std::strlen(s));
  // The end of the name proper: the first '(' at depth 0 that does not open
  // "(anonymous namespace)".
  size_t end = n;
  int depth = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    if (c == '(' && depth == 0) {
      if (std::strncmp(s + i, kAnonymous, sizeof kAnonymous - 1) == 0) {
        i += sizeof kAnonymous - 2;
        continue;
      }
      end = i;
      break;
    }
    if (c == '<')
      ++depth;
    else if (c == '>' && depth > 0)
      --depth;
  }
  // A return type ends at the last space at depth 0 (not inside
  // "(anonymous namespace)" and not in "operator new").
  size_t start = 0;
  depth = 0;
  for (size_t i = 0; i < end; ++i) {
    char c = s[i];
    if (c == '<')
      ++depth;
    else if (c == '>' && depth > 0)
      --depth;
    else if (c == '(' && std::strncmp(s + i, kAnonymous, sizeof kAnonymous - 1) == 0)
      i += sizeof kAnonymous - 2;
    else if (c == ' ' && depth == 0 && !(i >= 8 && std::strncmp(s + i - 8, "operator", 8) == 0))
      start = i + 1;
  }
  *name_start = start;
  *name_end = end;
}

// Splits a demangled or written name into scopes: drops template arguments,
// the parameter list and anything after it, and a leading return type.
void split_demangled(const char *s, Scopes *out) {
  size_t start, end;
  name_bounds(s, &start, &end);
  int depth = 0;
  // Scopes separated by "::" at depth 0, each without its template arguments.
  size_t piece = start, piece_end = SIZE_MAX;
  for (size_t i = start; i <= end; ++i) {
    char c = i < end ? s[i] : ':';
    if (i < end && c == '(' && std::strncmp(s + i, kAnonymous, sizeof kAnonymous - 1) == 0) {
      i += sizeof kAnonymous - 2;
      continue;
    }
    if (c == '<') {
      if (depth++ == 0 && piece_end == SIZE_MAX)
        piece_end = i;
    } else if (c == '>' && depth > 0) {
      --depth;
    } else if (c == ':' && depth == 0 && (i == end || (i + 1 < end && s[i + 1] == ':'))) {
      size_t last = piece_end == SIZE_MAX ? i : piece_end;
      while (piece < last && is_space(s[piece]))
        ++piece;
      while (last > piece && is_space(s[last - 1]))
        --last;
      if (last > piece)
        out->push(s + piece, last - piece);
      i += 1;
      piece = i + 1;
      piece_end = SIZE_MAX;
    }
  }
}

// Itanium mangled names: the scopes of the function's <name>. Template
// arguments and substitutions are skipped; a substituted scope is pushed as
// "?" so it matches nothing, which errs on the side of not routing.
struct Demangler {
  const char *p;
  const char *end;
  Scopes *out;

  bool source_name(bool push) {
    size_t len = 0;
    if (!is_digit(*p))
      return false;
    while (p < end && is_digit(*p))
      len = len * 10 + static_cast<size_t>(*p++ - '0');
    if (len > static_cast<size_t>(end - p))
      return false;
    if (push) {
      if (len >= 12 && std::strncmp(p, "_GLOBAL__N_", 11) == 0)
        out->push(kAnonymous, sizeof kAnonymous - 1);
      else
        out->push(p, len);
    }
    p += len;
    return true;
  }

  // Skips "S_", "S0_", "St" and friends, or "T_", "T0_".
  bool skip_substitution() {
    ++p;
    if (p < end && *p >= 'a' && *p <= 'z') {
      ++p;
      return true;
    }
    while (p < end && *p != '_')
      ++p;
    if (p == end)
      return false;
    ++p;
    return true;
  }

  // Skips "[<number>]_", the discriminator that ends a closure's or an
  // unnamed type's name.
  bool skip_discriminator() {
    while (p < end && is_digit(*p))
      ++p;
    if (p == end || *p != '_')
      return false;
    ++p;
    return true;
  }

  // Skips a template argument list "I...E", source names included.
  bool skip_template_args() {
    int depth = 0;
    uint64_t closures = 0; // bit d: the level opened at depth d is a closure type's "Ul...E"
    while (p < end) {
      char c = *p;
      if (is_digit(c)) {
        if (!source_name(false))
          return false;
        continue;
      }
      // A lambda's closure type, "Ul <parameter types> E [<number>] _" (as
      // in Holder<main::{lambda(long)#1}>), and an unnamed type, "Ut
      // [<number>] _": their ends are not a level's.
      if (c == 'U' && p + 1 < end && (p[1] == 'l' || p[1] == 't')) {
        p += 2;
        if (p[-1] == 't') {
          if (!skip_discriminator())
            return false;
        } else if (depth < 63) {
          closures |= uint64_t{1} << ++depth;
        } else {
          return false;
        }
        continue;
      }
      if (c == 'E' && depth > 0 && depth < 64 &&
          (closures >> depth & 1)) { // deeper: no closure bit
        ++p;
        closures &= ~(uint64_t{1} << depth--);
        if (!skip_discriminator())
          return false;
        continue;
      }
      if (c == 'S' || c == 'T') {
        if (!skip_substitution())
          return false;
        continue;
      }
      if (c == 'D' && p + 1 < end) {
        p += 2;
        continue;
      }
      ++p;
      if (c == 'I' || c == 'N' || c == 'X' || c == 'L' || c == 'J' || c == 'Z')
        ++depth;
      else if (c == 'E' && --depth == 0)
        return true;
    }
    return false;
  }

  bool unqualified(bool *pushed) {
    *pushed = false;
    if (is_digit(*p)) {
      *pushed = true;
      return source_name(true);
    }
    if (*p == 'C' || (*p == 'D' && p + 1 < end && is_digit(p[1]))) {
      // Constructors and destructors are named after their class.
      bool dtor = *p == 'D';
      p += 2;
      if (out->count) {
        if (dtor)
          out->push("~?", 2);
        else
          out->push(out->begin[out->count - 1], out->size[out->count - 1]);
      }
      *pushed = true;
      return true;
    }
    if (*p >= 'a' && *p <= 'z' && p + 1 < end) {
      p += 2; // an operator
      out->push("operator", 8);
      *pushed = true;
      return true;
    }
    return false;
  }

  bool parse() {
    if (end - p < 3 || p[0] != '_' || p[1] != 'Z')
      return false;
    p += 2;
    if (*p == 'L')
      ++p;
    if (*p == 'N') {
      ++p;
      while (p < end && (*p == 'r' || *p == 'V' || *p == 'K' || *p == 'R' || *p == 'O'))
        ++p;
      while (p < end && *p != 'E') {
        if (*p == 'S') {
          if (p + 1 < end && p[1] == 't') {
            out->push("std", 3);
            p += 2;
          } else {
            if (!skip_substitution())
              return false;
            out->push("?", 1);
          }
          continue;
        }
        if (*p == 'I') {
          if (!skip_template_args())
            return false;
          continue;
        }
        if (*p == 'B') { // an ABI tag belongs to the scope before it
          ++p;
          if (!source_name(false))
            return false;
          continue;
        }
        if (*p == 'L') {
          ++p;
          continue;
        }
        bool pushed;
        if (!unqualified(&pushed))
          return false;
      }
      return p < end;
    }
    if (*p == 'S' && p + 1 < end && p[1] == 't') {
      out->push("std", 3);
      p += 2;
    }
    if (*p == 'Z') // a local name: a function inside a function
      return false;
    bool pushed;
    return unqualified(&pushed) && pushed;
  }
};

bool scopes_end_with(const Scopes &have, const Scopes &want) {
  if (want.count == 0 || want.count > have.count || have.overflow || want.overflow)
    return false;
  unsigned off = have.count - want.count;
  for (unsigned i = 0; i < want.count; ++i)
    if (have.size[off + i] != want.size[i] ||
        std::memcmp(have.begin[off + i], want.begin[i], want.size[i]) != 0)
      return false;
  return true;
}

bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

// The length of an overloaded operator's symbol at `i`, where "operator"
// ends just before it (`B::operator,(long)`, `operator<`, `operator()`), else
// 0: its brackets and commas are the name's.
size_t operator_symbol(const char *s, size_t i, size_t len) {
  constexpr size_t kWord = 8; // "operator"
  if (i < kWord || std::memcmp(s + i - kWord, "operator", kWord) != 0 ||
      (i > kWord &&
       (std::isalnum(static_cast<unsigned char>(s[i - kWord - 1])) || s[i - kWord - 1] == '_')))
    return 0;
  if (i + 1 < len && ((s[i] == '(' && s[i + 1] == ')') || (s[i] == '[' && s[i + 1] == ']')))
    return 2;
  if (s[i] == ',')
    return 1;
  size_t n = 0;
  while (i + n < len && n < 3 && s[i + n] && std::strchr("<>=!&|+-*/%^~", s[i + n]))
    ++n;
  return n;
}

} // namespace

bool parse_rule(const char *spec, size_t len, uint32_t line, Rule *out, ParseError *err) {
  std::memset(out, 0, sizeof *out);
  out->size_max = UINT64_MAX;
  out->source_line = line;
  bool any_match = false;
  unsigned seen = 0; // keys given so far, by their place in kKeys
  static constexpr const char *kKeys[] = {"function", "file", "size",  "type",
                                          "pool",     "pad",  "align", "hugepages"};
  // One rule is one line: a newline (or another control character) inside
  // one, from --segregate or a report's JSON, would write a rules file
  // that reads back as something else.
  for (size_t c = 0; c < len; ++c) {
    auto byte = static_cast<unsigned char>(spec[c]);
    if ((byte < 0x20 && !is_space(spec[c])) || byte == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", byte);
      set_error(err, line, static_cast<uint32_t>(c + 1),
                "a control character (%s) in the rule%s: one rule is one line", code, "");
      return false;
    }
  }
  size_t i = 0;
  while (i < len) {
    while (i < len && is_space(spec[i]))
      ++i;
    size_t key_begin = i;
    while (i < len && spec[i] != '=' && spec[i] != ',')
      ++i;
    size_t key_end = i;
    while (key_end > key_begin && is_space(spec[key_end - 1]))
      --key_end;
    const char *key = spec + key_begin;
    size_t key_len = key_end - key_begin;
    uint32_t column = static_cast<uint32_t>(key_begin + 1);
    char key_str[32];
    std::snprintf(key_str, sizeof key_str, "%.*s", static_cast<int>(key_len < 24 ? key_len : 24),
                  key);
    if (key_len == 0) {
      set_error(err, line, column, "expected key=value%s%s", "", "");
      return false;
    }
    if (i == len || spec[i] != '=') {
      set_error(err, line, column, "'%s' has no value (expected %s=VALUE)", key_str, key_str);
      return false;
    }
    ++i;
    // Function names may hold commas inside template arguments or
    // parameter lists: the value ends at a comma at depth 0.
    size_t value_begin = i;
    int depth = 0;
    while (i < len) {
      if (size_t op = operator_symbol(spec, i, len)) {
        i += op; // operator<, operator, and the like: the name's, not brackets or a key's end
        continue;
      }
      if (spec[i] == ',' && depth == 0)
        break;
      if (spec[i] == '<' || spec[i] == '(')
        ++depth;
      else if ((spec[i] == '>' || spec[i] == ')') && depth > 0)
        --depth;
      ++i;
    }
    size_t value_end = i;
    while (value_begin < value_end && is_space(spec[value_begin]))
      ++value_begin;
    while (value_end > value_begin && is_space(spec[value_end - 1]))
      --value_end;
    const char *value = spec + value_begin;
    size_t value_len = value_end - value_begin;
    uint32_t value_column = static_cast<uint32_t>(value_begin + 1);
    if (i < len && ++i == len) { // the comma, and nothing after it
      set_error(err, line, static_cast<uint32_t>(i),
                "the rule ends in a comma: a key=value is missing after it%s%s", "", "");
      return false;
    }
    if (value_len == 0) {
      set_error(err, line, value_column, "'%s' has an empty value", key_str);
      return false;
    }
    // "function=a pool=x": a blank, then a key and '=', inside a value is a
    // comma left out, not a name with a blank in it.
    for (size_t b = 0; b + 1 < value_len; ++b) {
      if (!is_space(value[b]) || is_space(value[b + 1]))
        continue;
      for (const char *k : kKeys) {
        size_t kl = std::strlen(k);
        if (b + 1 + kl < value_len && std::strncmp(value + b + 1, k, kl) == 0 &&
            value[b + 1 + kl] == '=') {
          set_error(err, line, static_cast<uint32_t>(value_column + b),
                    "a blank before '%s=': key=value pairs are separated by commas%s", k, "");
          return false;
        }
      }
    }
    char value_str[48];
    std::snprintf(value_str, sizeof value_str, "%.*s",
                  static_cast<int>(value_len < 40 ? value_len : 40), value);
    // A second pool= or size= would silently win over the first.
    for (unsigned k = 0; k < sizeof kKeys / sizeof *kKeys; ++k)
      if (equals(key, key_len, kKeys[k])) {
        if (seen >> k & 1) {
          set_error(err, line, column, "'%s' given twice: a rule takes each key once%s", key_str);
          return false;
        }
        seen |= 1u << k;
      }
    if (equals(key, key_len, "function")) {
      if (!copy_value(out->function, sizeof out->function, value, value_len)) {
        set_error(err, line, value_column, "function name too long%s%s", "", "");
        return false;
      }
      any_match = true;
    } else if (equals(key, key_len, "type")) {
      if (!copy_value(out->type, sizeof out->type, value, value_len)) {
        set_error(err, line, value_column, "type name too long%s%s", "", "");
        return false;
      }
      any_match = true;
    } else if (equals(key, key_len, "file")) {
      // path or path:line; a colon followed by digits only is the line.
      size_t path_len = value_len;
      const char *colon = static_cast<const char *>(std::memchr(value, ':', value_len));
      for (const char *c = value + value_len; c > value; --c)
        if (c[-1] == ':') {
          colon = c - 1;
          break;
        }
      if (colon) {
        size_t digits = static_cast<size_t>(value + value_len - colon - 1);
        uint64_t file_line = 0;
        if (!parse_number(colon + 1, digits, &file_line) || file_line == 0 ||
            file_line > UINT32_MAX || !is_digit(colon[digits])) {
          set_error(err, line, value_column + static_cast<uint32_t>(colon - value) + 1,
                    "bad line number in file=%s (expected PATH or PATH:LINE)%s", value_str);
          return false;
        }
        out->file_line = static_cast<uint32_t>(file_line);
        path_len = static_cast<size_t>(colon - value);
      }
      if (path_len == 0 || !copy_value(out->file, sizeof out->file, value, path_len)) {
        set_error(err, line, value_column, "bad path in file=%s%s", value_str);
        return false;
      }
      any_match = true;
    } else if (equals(key, key_len, "size")) {
      const char *dash = static_cast<const char *>(std::memchr(value, '-', value_len));
      uint64_t lo, hi;
      bool ok =
          dash ? parse_number(value, static_cast<size_t>(dash - value), &lo) &&
                     parse_number(dash + 1, static_cast<size_t>(value + value_len - dash - 1), &hi)
               : parse_number(value, value_len, &lo);
      if (!dash)
        hi = lo;
      if (!ok || lo > hi) {
        set_error(err, line, value_column, "bad size '%s' (expected N or A-B, A <= B)%s",
                  value_str);
        return false;
      }
      out->has_size = true;
      out->size_min = lo;
      out->size_max = hi;
      any_match = true;
    } else if (equals(key, key_len, "pool")) {
      for (size_t k = 0; k < value_len; ++k) {
        char c = value[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
                  c == '-' || c == '.' || c == ':';
        if (!ok) {
          set_error(err, line, value_column + static_cast<uint32_t>(k),
                    "pool name '%s' may hold only letters, digits and _ - . :%s", value_str);
          return false;
        }
      }
      if (!copy_value(out->pool, sizeof out->pool, value, value_len)) {
        set_error(err, line, value_column, "pool name longer than 63 characters%s%s", "", "");
        return false;
      }
    } else if (equals(key, key_len, "pad")) {
      if (!parse_number(value, value_len, &out->pad) || out->pad == 0 || out->pad > (1u << 20)) {
        set_error(err, line, value_column, "bad pad '%s' (expected bytes, 1 to 1M)%s", value_str);
        return false;
      }
    } else if (equals(key, key_len, "align")) {
      if (!parse_number(value, value_len, &out->align) || !is_power_of_two(out->align) ||
          out->align > (1u << 21)) {
        set_error(err, line, value_column, "bad align '%s' (expected a power of two up to 2M)%s",
                  value_str);
        return false;
      }
    } else if (equals(key, key_len, "hugepages")) {
      if (equals(value, value_len, "1") || equals(value, value_len, "yes") ||
          equals(value, value_len, "true"))
        out->huge_pages = true;
      else if (!(equals(value, value_len, "0") || equals(value, value_len, "no") ||
                 equals(value, value_len, "false"))) {
        set_error(err, line, value_column, "bad hugepages '%s' (expected 1 or 0)%s", value_str);
        return false;
      }
    } else {
      set_error(err, line, column,
                "unknown key '%s' (match keys: function, file, size, type; actions: pool, pad, "
                "align, hugepages)%s",
                key_str);
      return false;
    }
  }
  if (!any_match) {
    set_error(err, line, 1, "a rule needs a match key: function, file, size or type%s%s", "", "");
    return false;
  }
  if (!has_action(*out)) {
    set_error(err, line, 1, "a rule needs an action: pool, pad, align or hugepages%s%s", "", "");
    return false;
  }
  if (out->huge_pages && !out->pool[0]) {
    set_error(err, line, 1, "hugepages=1 needs pool=NAME (huge pages back a pool's range)%s%s", "",
              "");
    return false;
  }
  return true;
}

namespace {

// "wrapper" or "not-wrapper" when the line declares one, else nullptr.
const char *declaration(const char *s, size_t n) {
  for (const char *word : {"wrapper", "not-wrapper"}) {
    size_t w = std::strlen(word);
    size_t i = w;
    while (i < n && is_space(s[i]))
      ++i;
    if (n > w && std::strncmp(s, word, w) == 0 && i < n && s[i] == '=')
      return word;
  }
  return nullptr;
}

bool parse_declaration(const char *line_text, size_t len, size_t key_at, const char *word,
                       uint32_t line, RuleSet *set, ParseError *err) {
  size_t i = key_at + std::strlen(word);
  while (i < len && line_text[i] != '=')
    ++i;
  ++i; // '='
  while (i < len && is_space(line_text[i]))
    ++i;
  size_t value_end = len;
  while (value_end > i && is_space(line_text[value_end - 1]))
    --value_end;
  uint32_t column = static_cast<uint32_t>(i + 1);
  if (value_end == i) {
    set_error(err, line, column, "'%s' has an empty value (expected %s=FUNCTION)", word, word);
    return false;
  }
  bool stars_only = true;
  for (size_t k = i; k < value_end; ++k)
    stars_only &= line_text[k] == '*';
  if (stars_only) {
    set_error(err, line, column, "'%s=*' names every function (give a name, or a prefix and *)%s",
              word, "");
    return false;
  }
  int depth = 0;
  for (size_t k = i; k < value_end; ++k) {
    char c = line_text[k];
    if (c == '<' || c == '(')
      ++depth;
    else if ((c == '>' || c == ')') && depth > 0)
      --depth;
    else if (c == ',' && depth == 0) {
      set_error(err, line, static_cast<uint32_t>(k + 1),
                "a %s= line names one function and nothing else%s", word, "");
      return false;
    }
  }
  if (set->wrapper_count == kMaxWrappers) {
    set_error(err, line, 1, "more than %s wrapper declarations%s", "32");
    return false;
  }
  WrapperDecl &d = set->wrappers[set->wrapper_count];
  if (!copy_value(d.function, sizeof d.function, line_text + i, value_end - i)) {
    set_error(err, line, column, "function name too long%s%s", "", "");
    return false;
  }
  d.not_wrapper = word[0] == 'n';
  d.source_line = line;
  ++set->wrapper_count;
  return true;
}

} // namespace

bool parse_rules(const char *text, size_t len, RuleSet *set, ParseError *err) {
  uint32_t line = 0;
  size_t i = 0;
  // A UTF-8 byte order mark, as editors on Windows write: not part of a key.
  if (len >= 3 && std::memcmp(text, "\xEF\xBB\xBF", 3) == 0)
    i = 3;
  while (i < len) {
    ++line;
    size_t begin = i;
    while (i < len && text[i] != '\n')
      ++i;
    size_t end = i;
    if (i < len)
      ++i;
    // A comment starts at a '#' that begins the line or follows a blank: one
    // inside a word belongs to it, as in GCC's lambda names
    // (main::{lambda(long)#1}), which a rule must be able to spell.
    for (size_t h = begin; h < end; ++h)
      if (text[h] == '#' && (h == begin || is_space(text[h - 1]))) {
        end = h;
        break;
      }
    size_t first = begin;
    while (first < end && (is_space(text[first]) || text[first] == '\0'))
      ++first;
    if (first == end)
      continue;
    if (std::memchr(text + begin, '\0', end - begin)) {
      set_error(err, line, 1, "the line holds a NUL byte (not a text file?)%s%s", "", "");
      return false;
    }
    if (const char *decl = declaration(text + first, end - first); decl) {
      if (!parse_declaration(text + begin, end - begin, first - begin, decl, line, set, err))
        return false;
      continue;
    }
    if (set->count == kMaxRules) {
      set_error(err, line, 1, "more than %s rules%s", "64");
      return false;
    }
    ParseError e{};
    if (!parse_rule(text + begin, end - begin, line, &set->rules[set->count], &e)) {
      if (err)
        *err = e;
      return false;
    }
    ++set->count;
  }
  return true;
}

size_t format_rule(const Rule &r, char *buf, size_t cap) {
  size_t n = 0;
  bool first = true;
  auto put = [&](const char *key, const char *fmt, auto... v) {
    if (n >= cap)
      return;
    int w = std::snprintf(buf + n, cap - n, "%s%s=", first ? "" : ",", key);
    if (w < 0)
      return;
    n += static_cast<size_t>(w);
    if (n >= cap)
      return;
    w = std::snprintf(buf + n, cap - n, fmt, v...);
    if (w >= 0)
      n += static_cast<size_t>(w);
    first = false;
  };
  if (r.function[0])
    put("function", "%s", r.function);
  if (r.file[0]) {
    if (r.file_line)
      put("file", "%s:%u", r.file, r.file_line);
    else
      put("file", "%s", r.file);
  }
  if (r.has_size) {
    if (r.size_min == r.size_max)
      put("size", "%llu", static_cast<unsigned long long>(r.size_min));
    else
      put("size", "%llu-%llu", static_cast<unsigned long long>(r.size_min),
          static_cast<unsigned long long>(r.size_max));
  }
  if (r.type[0])
    put("type", "%s", r.type);
  if (r.pool[0])
    put("pool", "%s", r.pool);
  if (r.pad)
    put("pad", "%llu", static_cast<unsigned long long>(r.pad));
  if (r.align)
    put("align", "%llu", static_cast<unsigned long long>(r.align));
  if (r.huge_pages)
    put("hugepages", "%s", "1");
  if (n >= cap)
    return 0;
  return n;
}

size_t without_clone_suffix(const char *s, size_t n) {
  // Demangled, the suffix is a note after the parameters: " (.constprop.0)"
  // (LLVM), " [clone .constprop.0]" (GNU).
  for (const char *note : {" (.", " [clone ."})
    if (const char *at = std::strstr(s, note); at && static_cast<size_t>(at - s) < n)
      return static_cast<size_t>(at - s);
  static constexpr const char *kClones[] = {".constprop", ".isra",     ".part",
                                            ".cold",      ".lto_priv", ".localalias"};
  for (size_t i = 1; i < n; ++i) {
    if (s[i] != '.')
      continue;
    for (const char *c : kClones) {
      size_t len = std::strlen(c);
      if (n - i >= len && std::strncmp(s + i, c, len) == 0 && (i + len == n || s[i + len] == '.'))
        return i;
    }
  }
  return n;
}

size_t normalize_function(const char *function, char *buf, size_t cap) {
  Scopes s;
  split_demangled(function, &s);
  size_t n = 0;
  for (unsigned i = 0; i < s.count; ++i) {
    size_t need = s.size[i] + (i ? 2 : 0);
    if (n + need + 1 > cap)
      return 0;
    if (i) {
      buf[n++] = ':';
      buf[n++] = ':';
    }
    std::memcpy(buf + n, s.begin[i], s.size[i]);
    n += s.size[i];
  }
  if (s.overflow || cap == 0)
    return 0;
  buf[n] = 0;
  return n;
}

bool symbol_matches(const char *symbol, const char *want) {
  Scopes want_scopes;
  split_demangled(want, &want_scopes);
  Scopes have;
  if (symbol[0] == '_' && symbol[1] == 'Z') {
    // A clone suffix (".constprop.0", ".cold") follows the encoding.
    const char *end = symbol + std::strlen(symbol);
    Demangler d{symbol, end, &have};
    if (!d.parse())
      return false;
  } else {
    size_t n = std::strcspn(symbol, ".@");
    have.push(symbol, n);
  }
  return scopes_end_with(have, want_scopes);
}

bool demangled_matches(const char *demangled, const char *want) {
  Scopes have, want_scopes;
  split_demangled(demangled, &have);
  split_demangled(want, &want_scopes);
  return scopes_end_with(have, want_scopes);
}

namespace {

bool has_qualifiers(const char *key) {
  for (const char *p = key; *p; ++p) {
    if (*p == '(' && std::strncmp(p, kAnonymous, sizeof kAnonymous - 1) == 0) {
      p += sizeof kAnonymous - 2;
      continue;
    }
    if (*p == '<' || *p == '(')
      return true;
  }
  return false;
}

// The name without return type, without its parameter list unless
// keep_params, and without white space; false when it does not fit.
bool canonical_name(const char *s, bool keep_params, char *out, size_t cap) {
  size_t start, end;
  name_bounds(s, &start, &end);
  if (keep_params)
    end = without_clone_suffix(s, std::strlen(s));
  size_t n = 0;
  for (size_t i = start; i < end; ++i) {
    if (is_space(s[i]))
      continue;
    if (n + 1 >= cap)
      return false;
    out[n++] = s[i];
  }
  out[n] = 0;
  return true;
}

bool key_has_params(const char *key) {
  size_t start, end;
  name_bounds(key, &start, &end);
  return key[end] == '(';
}

} // namespace

size_t function_name_offset(const char *demangled) {
  size_t start, end;
  name_bounds(demangled, &start, &end);
  return start;
}

bool function_key_matches(const char *demangled, const char *key) {
  if (!has_qualifiers(key)) {
    char want[kMaxName];
    return normalize_function(key, want, sizeof want) && demangled_matches(demangled, want);
  }
  bool params = key_has_params(key);
  char have[2 * kMaxName], want[kMaxName];
  if (!canonical_name(demangled, params, have, sizeof have) ||
      !canonical_name(key, params, want, sizeof want))
    return false;
  size_t h = std::strlen(have), w = std::strlen(want);
  if (w == 0 || w > h || std::strcmp(have + h - w, want) != 0)
    return false;
  return h == w || (h - w >= 2 && have[h - w - 1] == ':' && have[h - w - 2] == ':');
}

bool rule_covers(const Rule &first, const Rule &later) {
  auto key = [](const char *a, const char *b) { return !a[0] || std::strcmp(a, b) == 0; };
  if (!key(first.function, later.function) || !key(first.file, later.file) ||
      !key(first.type, later.type))
    return false;
  if (first.file[0] && first.file_line && first.file_line != later.file_line)
    return false;
  return !first.has_size ||
         (later.has_size && first.size_min <= later.size_min && later.size_max <= first.size_max);
}

unsigned first_covering_rule(const RuleSet &set, unsigned i) {
  for (unsigned j = 0; j < i && j < set.count; ++j)
    if (rule_covers(set.rules[j], set.rules[i]))
      return j;
  return i;
}

} // namespace memlayout::rules
