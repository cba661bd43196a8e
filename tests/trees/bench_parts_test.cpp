// The pieces of memlayout-bench and ycsb-lite: key distributions, the prefill
// permutation, option parsing, the JSON writer.
#include "bench_options.h"
#include "key_permutation.h"
#include "random.h"
#include "zipf.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <vector>

using namespace memlayout::trees;
using namespace memlayout::trees::bench;

TEST_CASE("bench: Zipf ranks follow k^-theta", "[bench]") {
  for (double theta : {0.5, 0.99, 1.0, 1.5}) {
    INFO("theta " << theta);
    constexpr uint64_t n = 50;
    ZipfGenerator zipf(n, theta);
    Xoshiro256 rng(42);
    std::vector<double> seen(n + 1, 0);
    constexpr int samples = 400'000;
    for (int i = 0; i < samples; ++i) {
      uint64_t k = zipf(rng);
      REQUIRE(k >= 1);
      REQUIRE(k <= n);
      seen[k] += 1;
    }
    double norm = 0;
    for (uint64_t k = 1; k <= n; ++k)
      norm += std::pow(static_cast<double>(k), -theta);
    for (uint64_t k : {1u, 2u, 5u, 20u, 50u}) {
      double expected = samples * std::pow(static_cast<double>(k), -theta) / norm;
      // Within 5 standard deviations of a binomial count.
      CHECK(std::abs(seen[k] - expected) < 5 * std::sqrt(expected) + 1);
    }
  }
}

TEST_CASE("bench: Zipf over a large range stays in range and favours small ranks", "[bench]") {
  ZipfGenerator zipf(uint64_t{1} << 32, 0.99);
  Xoshiro256 rng(7);
  uint64_t top10 = 0;
  for (int i = 0; i < 100'000; ++i) {
    uint64_t k = zipf(rng);
    REQUIRE(k >= 1);
    REQUIRE(k <= (uint64_t{1} << 32));
    top10 += k <= 10;
  }
  // P(k <= 10) is about 0.13 for theta 0.99 over 2^32 ranks.
  CHECK(top10 > 10'000);
  CHECK(top10 < 16'000);
}

TEST_CASE("bench: key scrambling and the prefill permutation are bijections", "[bench]") {
  for (uint64_t n : {1u, 2u, 3u, 10u, 64u, 1000u, 65536u, 100'003u}) {
    INFO("n " << n);
    KeyScrambler scramble(n);
    KeyPermutation permute(n, 99);
    std::vector<char> hit_scrambled(n + 1, 0), hit_permuted(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t s = scramble(i + 1);
      REQUIRE(s >= 1);
      REQUIRE(s <= n);
      REQUIRE_FALSE(hit_scrambled[s]);
      hit_scrambled[s] = 1;
      uint64_t p = permute(i);
      REQUIRE(p < n);
      REQUIRE_FALSE(hit_permuted[p]);
      hit_permuted[p] = 1;
    }
  }
  // Different seeds, different orders; the same seed, the same order.
  KeyPermutation a(1000, 1), b(1000, 2), a2(1000, 1);
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same += a(i) == b(i);
    REQUIRE(a(i) == a2(i));
  }
  CHECK(same < 20);
}

namespace {
ParsedOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "memlayout-bench");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parse_bench_options(static_cast<int>(argv.size()), argv.data());
}
} // namespace

TEST_CASE("bench: options parse per the contract", "[bench]") {
  ParsedOptions p = parse({"--tree",      "ticket", "--threads", "3",       "--duration=0.5",
                           "--key-range", "1000",   "--prefill", "100",     "--ops",
                           "50/25/25",    "--dist", "zipf:0.8",  "--alloc", "segregated",
                           "--layout",    "fixed",  "--noise",   "--check", "--format",
                           "json",        "--seed", "9",         "--pin"});
  REQUIRE(p.error == "");
  REQUIRE(p.exit_status == -1);
  const BenchOptions &o = p.options;
  CHECK(o.tree == "ticket");
  CHECK(o.threads == 3);
  CHECK(o.duration_s == 0.5);
  CHECK(o.key_range == 1000);
  CHECK(o.prefill_keys() == 100);
  CHECK(o.mix.lookup == 50);
  CHECK(o.mix.insert == 25);
  CHECK(o.dist.zipf);
  CHECK(o.dist.theta == 0.8);
  CHECK(o.config.alloc == AllocPolicy::kSegregated);
  CHECK(o.config.layout == Layout::kFixed);
  CHECK(o.noise);
  CHECK(o.check);
  CHECK(o.format == OutputFormat::kJson);
  CHECK(o.seed == 9);
  CHECK(o.pin);

  ParsedOptions d = parse({"--tree", "ticket", "--key-range", "1000"});
  REQUIRE(d.error == "");
  CHECK(d.options.prefill_keys() == 500); // half the key range by default
  CHECK(parse({"--tree", "ticket", "--key-range", "1000", "--prefill", "0.25"})
            .options.prefill_keys() == 250);
}

TEST_CASE("bench: bad options are named in the error", "[bench]") {
  struct Case {
    std::vector<std::string> args;
    const char *names;
  };
  std::vector<Case> cases = {
      {{"--threads", "2"}, "--tree is required"},
      {{"--tree", "no-such-tree"}, "--tree: no tree named 'no-such-tree'"},
      {{"--tree", "ticket", "--threads", "0"}, "--threads"},
      {{"--tree", "ticket", "--threads", "two"}, "--threads"},
      {{"--tree", "ticket", "--duration", "-1"}, "--duration"},
      {{"--tree", "ticket", "--key-range", "0"}, "--key-range"},
      {{"--tree", "ticket", "--ops", "50/40"}, "--ops"},
      {{"--tree", "ticket", "--ops", "50/40/20"}, "--ops"},
      {{"--tree", "ticket", "--dist", "zipf:-1"}, "--dist"},
      {{"--tree", "ticket", "--dist", "normal"}, "--dist"},
      {{"--tree", "ticket", "--alloc", "tcmalloc"}, "--alloc"},
      {{"--tree", "ticket", "--layout", "padded"}, "--layout"},
      {{"--tree", "ticket", "--format", "xml"}, "--format"},
      {{"--tree", "ticket", "--prefill", "1.5"}, "--prefill"},
      {{"--tree", "ticket", "--key-range", "10", "--prefill", "11"}, "--prefill"},
      {{"--tree", "ticket", "--bogus", "1"}, "unknown option '--bogus'"},
      {{"--tree", "ticket", "--check=yes"}, "--check takes no value"},
      {{"--tree", "ticket", "--seed"}, "--seed: missing value"},
      {{"--tree", "ticket", "--duration", "0", "--duration", "0"},
       "--duration given 2 times: give it once"},
      {{"--tree", "ticket", "stray"}, "unexpected argument 'stray'"},
      {{"--tree", "ticket", "--htm", "lock"}, "apply to htm-bptree and euno-bptree, not ticket"},
      {{"--tree", "htm-bptree", "--key-bytes", "12"}, "--key-bytes: takes a key size"},
      {{"--tree", "ticket", "--ops", "50/0/0/50"}, "--ops: put and scan need an HTM tree"},
      {{"--tree", "htm-bptree", "--ops", "50/0/0/50", "--linearizable"},
       "--linearizable checks histories"},
  };
  for (const Case &c : cases) {
    ParsedOptions p = parse(c.args);
    INFO("expected an error containing: " << c.names);
    CHECK(p.exit_status == 2);
    CHECK_THAT(p.error, Catch::Contains(c.names));
  }
}
