#include "htm_config.h"

#include <charconv>

namespace memlayout::trees::htm {
namespace {

bool parse_u32(std::string_view s, uint32_t *out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

} // namespace

const char *backend_name(Backend b) {
  switch (b) {
  case Backend::kRtm:
    return "rtm";
  case Backend::kEmulate:
    return "emulate";
  case Backend::kLock:
    return "lock";
  case Backend::kAuto:
    break;
  }
  return "auto";
}

bool parse_backend(std::string_view text, Backend *out) {
  if (text == "auto")
    *out = Backend::kAuto;
  else if (text == "rtm")
    *out = Backend::kRtm;
  else if (text == "emulate")
    *out = Backend::kEmulate;
  else if (text == "lock")
    *out = Backend::kLock;
  else
    return false;
  return true;
}

bool parse_l1_model(std::string_view text, L1Model *out, std::string *why) {
  L1Model m;
  size_t x = text.find('x');
  size_t plus = text.find('+');
  if (x == std::string_view::npos) {
    *why = "expected SETSxWAYS[+READ_LINES], such as 64x8 or 64x8+512";
    return false;
  }
  std::string_view ways = text.substr(x + 1, plus == std::string_view::npos ? plus : plus - x - 1);
  if (!parse_u32(text.substr(0, x), &m.sets) || !parse_u32(ways, &m.ways) ||
      (plus != std::string_view::npos &&
       !parse_u32(text.substr(plus + 1), &m.read_overflow_lines))) {
    *why = "expected SETSxWAYS[+READ_LINES], such as 64x8 or 64x8+512";
    return false;
  }
  if (m.sets == 0 || (m.sets & (m.sets - 1)) || m.sets > 1024) {
    *why = "the number of sets must be a power of two from 1 to 1024";
    return false;
  }
  if (m.ways == 0 || m.ways > 64) {
    *why = "ways must be from 1 to 64";
    return false;
  }
  if (m.read_overflow_lines > 65536) {
    *why = "the read tracker holds at most 65536 lines";
    return false;
  }
  *out = m;
  return true;
}

std::string l1_model_text(const L1Model &m) {
  std::string s = std::to_string(m.sets) + "x" + std::to_string(m.ways);
  if (m.read_overflow_lines)
    s += "+" + std::to_string(m.read_overflow_lines);
  return s;
}

bool parse_retry_policy(std::string_view text, RetryPolicy *out) {
  RetryPolicy p;
  size_t a = text.find('/');
  size_t b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (b == std::string_view::npos || !parse_u32(text.substr(0, a), &p.conflict) ||
      !parse_u32(text.substr(a + 1, b - a - 1), &p.capacity) ||
      !parse_u32(text.substr(b + 1), &p.other))
    return false;
  *out = p;
  return true;
}

} // namespace memlayout::trees::htm
