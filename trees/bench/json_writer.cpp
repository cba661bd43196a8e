#include "json_writer.h"

#include <cmath>
#include <cstdio>

namespace memlayout::trees::bench {

void JsonWriter::open(char c) {
  separate();
  out_ << c;
  first_.push_back(true);
}

void JsonWriter::close(char c) {
  first_.pop_back();
  out_ << c;
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (first_.empty())
    return;
  if (!first_.back())
    out_ << ',';
  first_.back() = false;
}

void JsonWriter::value(double d) {
  separate();
  if (!std::isfinite(d)) {
    out_ << "null"; // JSON has no NaN or infinity
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", d);
  out_ << buf;
}

void JsonWriter::write_string(std::string_view s) {
  out_ << '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out_ << "\\\"";
      break;
    case '\\':
      out_ << "\\\\";
      break;
    case '\n':
      out_ << "\\n";
      break;
    case '\t':
      out_ << "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ << buf;
      } else {
        out_ << ch;
      }
    }
  }
  out_ << '"';
}

} // namespace memlayout::trees::bench
