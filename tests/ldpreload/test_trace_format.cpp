// The trace format's codecs, as the recorder writes them and a reader reads
// them.
#include "trace_format.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

using namespace memlayout::trace;

namespace {

std::vector<uint64_t> interesting_values() {
  std::vector<uint64_t> v = {0, 1, 2, 126, 127, 128, 129, 255, 256};
  for (unsigned bits = 7; bits < 64; bits += 7)
    for (int64_t d : {-2, -1, 0, 1})
      v.push_back((uint64_t{1} << bits) + static_cast<uint64_t>(d));
  v.push_back(~uint64_t{0});
  v.push_back(~uint64_t{0} >> 1);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; ++i)
    v.push_back(rng() >> (rng() % 64));
  return v;
}

} // namespace

TEST_CASE("trace format: the branch-free varint writes put_varint's bytes", "[format]") {
  for (uint64_t v : interesting_values()) {
    INFO("value " << v);
    uint8_t a[32], b[32];
    std::memset(a, 0xee, sizeof a);
    std::memset(b, 0xee, sizeof b);
    size_t na = static_cast<size_t>(put_varint(a, v) - a);
    size_t nb = static_cast<size_t>(put_varint_branchless(b, v) - b);
    REQUIRE(na == nb);
    CHECK(std::memcmp(a, b, na) == 0);
    Cursor c{b, b + nb};
    CHECK(c.varint() == v);
    CHECK(c.at_end());
    CHECK_FALSE(c.bad);
  }
}

TEST_CASE("trace format: a varint followed by more bytes decodes the same", "[format]") {
  // With 8 bytes readable the cursor takes its branch-free path.
  for (uint64_t v : interesting_values()) {
    INFO("value " << v);
    uint8_t b[32];
    std::memset(b, 0xff, sizeof b);
    size_t n = static_cast<size_t>(put_varint(b, v) - b);
    Cursor c{b, b + sizeof b};
    CHECK(c.varint() == v);
    CHECK(c.p == b + n);
    CHECK_FALSE(c.bad);
  }
}

TEST_CASE("trace format: zigzag keeps small moves either way small", "[format]") {
  for (int64_t d :
       {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{-64}, int64_t{63}, INT64_MIN, INT64_MAX})
    CHECK(unzigzag(zigzag(d)) == d);
  CHECK(zigzag(-1) == 1);
  CHECK(zigzag(1) == 2);
  uint8_t buf[16];
  CHECK(put_varint(buf, zigzag(-64)) - buf == 1);
}

TEST_CASE("trace format: sizes cost no byte when the model predicts them", "[format]") {
  CHECK(predicted_usable(UsableModel::kGlibc, 24) == 24);
  CHECK(predicted_usable(UsableModel::kGlibc, 25) == 40);
  CHECK(predicted_usable(UsableModel::kJemalloc, 129) == 160);
  CHECK(predicted_usable(UsableModel::kNone, 129) == 129);
}

TEST_CASE("trace format: a cursor past its end reads zeros and says so", "[format]") {
  uint8_t one[] = {0x80}; // a continuation byte with nothing after it
  Cursor c{one, one + 1};
  CHECK(c.varint() == 0);
  CHECK(c.bad);
  uint8_t eleven[11];
  std::memset(eleven, 0xff, sizeof eleven);
  Cursor d{eleven, eleven + sizeof eleven};
  d.varint();
  CHECK(d.bad); // more than 10 bytes is not a varint we wrote
}
