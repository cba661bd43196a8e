// The generic suite every registered tree passes, in both layouts and both
// allocation policies: a deterministic single-thread run checked operation by
// operation against std::map, and concurrent stress runs whose final contents
// must equal what the successful operations imply.
//
// Test cases are registered at start-up from the tree registry, one per tree,
// layout, policy and check ("generic ticket/fixed/segregated: ..."), so CTest
// lists and times each on its own. The sanitized builds (Thread- and
// AddressSanitizer, MEMLAYOUT_TREE_TESTS_SANITIZED) run only the concurrent
// checks, with fewer operations, and leave out the segregated policy, whose
// jemalloc is not instrumented.
#include "epoch.h"
#include "map.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace memlayout::trees;

namespace {

// What a test stores for a key: lookups can tell a right value from a stale one.
Value value_of(Key key, uint64_t salt = 0) {
  return static_cast<Value>((static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL) ^ salt);
}

std::string layout_name(Layout l) { return l == Layout::kBaseline ? "baseline" : "fixed"; }
std::string alloc_name(AllocPolicy a) {
  return a == AllocPolicy::kMalloc ? "malloc" : "segregated";
}

struct Combo {
  const TreeInfo *tree;
  TreeConfig config;
  std::string label() const {
    return std::string(tree->name) + "/" + layout_name(config.layout) + "/" +
           alloc_name(config.alloc);
  }
};

// Contents in visiting order, and whether the order was strictly ascending.
std::vector<std::pair<Key, Value>> contents(const ConcurrentMap &m, bool *ascending) {
  std::vector<std::pair<Key, Value>> out;
  *ascending = true;
  m.for_each([&](Key k, Value v) {
    if (!out.empty() && out.back().first >= k)
      *ascending = false;
    out.emplace_back(k, v);
  });
  return out;
}

void check_matches(const ConcurrentMap &m, const std::map<Key, Value> &expected) {
  bool ascending = false;
  auto got = contents(m, &ascending);
  CHECK(ascending);
  CHECK(got.size() == expected.size());
  std::vector<std::pair<Key, Value>> want(expected.begin(), expected.end());
  CHECK(got == want);
  CHECK(m.check_structure() == "");
}

[[maybe_unused]] void single_thread_against_std_map(const Combo &c) {
  std::unique_ptr<ConcurrentMap> m = c.tree->make(c.config);
  REQUIRE(m);
  std::map<Key, Value> ref;
  std::mt19937_64 rng(20240605);
  constexpr Key kRange = 512;
  std::uniform_int_distribution<Key> key_of(1, kRange);

  // Random mix on a small range, so inserts and removes often fail.
  for (int i = 0; i < 20'000; ++i) {
    Key k = key_of(rng);
    unsigned op = rng() % 100;
    INFO("operation " << i << " key " << k);
    if (op < 40) {
      Value v = value_of(k, i);
      bool inserted = ref.emplace(k, v).second;
      REQUIRE(m->insert(k, v) == inserted);
    } else if (op < 75) {
      REQUIRE(m->remove(k) == (ref.erase(k) == 1));
    } else {
      Value v = -1;
      auto it = ref.find(k);
      REQUIRE(m->lookup(k, &v) == (it != ref.end()));
      if (it != ref.end())
        REQUIRE(v == it->second);
    }
    if (i % 2000 == 0)
      check_matches(*m, ref);
  }
  check_matches(*m, ref);

  // Ascending and descending runs (degenerate shapes for unbalanced trees,
  // rotations for balanced ones), and the ends of the key range.
  for (Key k = 1000; k < 3000; ++k)
    REQUIRE(m->insert(k, value_of(k)) == ref.emplace(k, value_of(k)).second);
  for (Key k = 6000; k > 4000; --k)
    REQUIRE(m->insert(k, value_of(k)) == ref.emplace(k, value_of(k)).second);
  for (Key k : {kMinKey, kMaxKey, kMinKey + 1, kMaxKey - 1}) {
    REQUIRE(m->insert(k, value_of(k)) == ref.emplace(k, value_of(k)).second);
    REQUIRE_FALSE(m->insert(k, 0));
  }
  Value v = 0;
  REQUIRE(m->lookup(kMaxKey, &v));
  REQUIRE(v == value_of(kMaxKey));
  check_matches(*m, ref);

  // Remove everything, in random order: deletions of nodes with two
  // children, of the root, of leaves.
  std::vector<Key> keys;
  for (const auto &[k, val] : ref)
    keys.push_back(k);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("removing key " << keys[i]);
    REQUIRE(m->remove(keys[i]));
    REQUIRE_FALSE(m->remove(keys[i]));
    ref.erase(keys[i]);
    if (i % 1000 == 0)
      check_matches(*m, ref);
  }
  check_matches(*m, ref);
  REQUIRE_FALSE(m->lookup(keys.front(), &v));
  m.reset();
  CHECK(retired_pending() == 0);
}

// Threads run a random mix on `key_range` keys (half prefilled), each
// counting, per key, its successful inserts minus removes. At the end a key's
// prefill + counts must be 0 or 1, and 1 exactly when the tree holds it.
void concurrent_accounting(const Combo &c, Key key_range, int threads, int ops_per_thread) {
  std::unique_ptr<ConcurrentMap> m = c.tree->make(c.config);
  REQUIRE(m);
  std::vector<int> prefill(key_range + 1, 0);
  std::mt19937_64 rng(7);
  for (Key k = 1; k <= key_range; ++k)
    if (rng() % 2)
      prefill[k] = m->insert(k, value_of(k)) ? 1 : 0;

  std::vector<std::vector<int>> delta(threads, std::vector<int>(key_range + 1, 0));
  std::atomic<int> ready{0};
  std::atomic<uint64_t> wrong_values{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 r(1000 + t);
      std::vector<int> &d = delta[t];
      uint64_t wrong = 0;
      ready.fetch_add(1);
      while (ready.load() < threads)
        std::this_thread::yield();
      for (int i = 0; i < ops_per_thread; ++i) {
        Key k = static_cast<Key>(r() % key_range) + 1;
        unsigned op = r() % 100;
        if (op < 35) {
          d[k] += m->insert(k, value_of(k));
        } else if (op < 70) {
          d[k] -= m->remove(k);
        } else {
          Value v = 0;
          if (m->lookup(k, &v) && v != value_of(k))
            ++wrong;
        }
      }
      wrong_values.fetch_add(wrong);
    });
  }
  for (auto &w : workers)
    w.join();

  CHECK(wrong_values.load() == 0);
  std::map<Key, Value> expected;
  int bad_sums = 0;
  for (Key k = 1; k <= key_range; ++k) {
    int sum = prefill[k];
    for (int t = 0; t < threads; ++t)
      sum += delta[t][k];
    if (sum != 0 && sum != 1)
      ++bad_sums;
    if (sum == 1)
      expected.emplace(k, value_of(k));
  }
  CHECK(bad_sums == 0);
  check_matches(*m, expected);
  for (Key k = 1; k <= key_range; ++k) {
    Value v = 0;
    bool present = m->lookup(k, &v);
    if (present != expected.contains(k)) {
      FAIL_CHECK("lookup(" << k << ") disagrees with for_each");
      break;
    }
  }
  m.reset();
  CHECK(retired_pending() == 0);
}

class ComboTest : public Catch::ITestInvoker {
public:
  using Body = void (*)(const Combo &);
  ComboTest(Combo c, Body body) : combo_(c), body_(body) {}
  void invoke() const override {
    INFO("tree " << combo_.label());
    body_(combo_);
  }

private:
  Combo combo_;
  Body body_;
};

// Operations per thread. ThreadSanitizer makes every atomic load a call, so
// its deep traversals of 4096 keys get the fewest.
#ifdef MEMLAYOUT_TREE_TESTS_SANITIZED
constexpr int kSmallRangeOps = 30'000, kLargeRangeOps = 3'000;
#else
constexpr int kSmallRangeOps = 160'000, kLargeRangeOps = 40'000;
#endif

void stress_small_range(const Combo &c) { concurrent_accounting(c, 64, 4, kSmallRangeOps); }
void stress_large_range(const Combo &c) { concurrent_accounting(c, 4096, 4, kLargeRangeOps); }

struct Check {
  const char *name;
  ComboTest::Body body;
};
constexpr Check kChecks[] = {
#ifndef MEMLAYOUT_TREE_TESTS_SANITIZED
    {"single thread against std::map", single_thread_against_std_map},
#endif
    {"4 threads on 64 keys, per-key accounting", stress_small_range},
    {"4 threads on 4096 keys, per-key accounting", stress_large_range},
};

// Catch keeps its own copies of the names; the registrars must live on.
bool register_generic_tests() {
  static std::vector<std::unique_ptr<Catch::AutoReg>> registrars;
  std::vector<AllocPolicy> policies = {AllocPolicy::kMalloc};
#ifndef MEMLAYOUT_TREE_TESTS_SANITIZED
  policies.push_back(AllocPolicy::kSegregated);
#endif
  for (const TreeInfo &tree : all_trees())
    for (Layout layout : {Layout::kBaseline, Layout::kFixed})
      for (AllocPolicy alloc : policies)
        for (const Check &check : kChecks) {
          Combo combo{&tree, TreeConfig{layout, alloc, {}}};
          std::string name = "generic " + combo.label() + ": " + check.name;
          std::string tags = "[generic][" + std::string(tree.name) + "]";
          registrars.push_back(std::make_unique<Catch::AutoReg>(
              new ComboTest(combo, check.body), Catch::SourceLineInfo(__FILE__, __LINE__),
              Catch::StringRef(), Catch::NameAndTags{name, tags}));
        }
  return true;
}
const bool registered = register_generic_tests();

} // namespace

TEST_CASE("generic: the registry lists trees by unique name and finds them", "[generic]") {
  REQUIRE_FALSE(all_trees().empty());
  for (const TreeInfo &t : all_trees()) {
    CHECK(find_tree(t.name) == &t);
    CHECK_FALSE(t.description.empty());
    CHECK(t.make != nullptr);
  }
  CHECK(find_tree("no-such-tree") == nullptr);
  CHECK(registered);
}
