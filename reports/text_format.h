// Numbers for people, shared by the text and HTML renderers.
#pragma once

#include <cstdio>
#include <string>

namespace memlayout::cli {

// printf of one number into a string.
inline std::string fmt(const char *format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

// 1536 -> "1.5 KiB".
inline std::string human_bytes(double v) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  return fmt(i ? "%.1f " : "%.0f ", v) + unit[i];
}

} // namespace memlayout::cli
