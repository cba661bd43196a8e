// A minimal streaming JSON writer for the harness's results: objects, arrays,
// strings, numbers, in the order written. No dependency (the benchmarks are
// recorded with memlayout: the less the binary allocates besides the tree,
// the cleaner the trace).
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

namespace memlayout::trees::bench {

class JsonWriter {
public:
  explicit JsonWriter(std::ostream &out) : out_(out) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // Inside an object: the next value's key.
  void key(std::string_view k) {
    separate();
    write_string(k);
    out_ << ':';
    after_key_ = true;
  }
  void value(std::string_view s) {
    separate();
    write_string(s);
  }
  void value(const char *s) { value(std::string_view(s)); }
  void value(bool b) {
    separate();
    out_ << (b ? "true" : "false");
  }
  void value(double d);
  void value(uint64_t n) {
    separate();
    out_ << n;
  }
  void value(int64_t n) {
    separate();
    out_ << n;
  }
  void value(int n) { value(static_cast<int64_t>(n)); }
  void value(unsigned n) { value(static_cast<uint64_t>(n)); }
  void null() {
    separate();
    out_ << "null";
  }
  template <class T> void field(std::string_view k, const T &v) {
    key(k);
    value(v);
  }

private:
  void open(char c);
  void close(char c);
  void separate();
  void write_string(std::string_view s);

  std::ostream &out_;
  std::vector<bool> first_; // per open container: nothing written in it yet
  bool after_key_ = false;
};

} // namespace memlayout::trees::bench
