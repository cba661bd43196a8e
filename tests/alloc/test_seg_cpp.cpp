// The C++ front ends of <memlayout/seg.hpp>: allocator, pmr resource, class macro.
#include "seg_test_support.h"

#include <memlayout/seg.hpp>

#include <catch2/catch.hpp>

#include <list>
#include <map>
#include <memory_resource>
#include <scoped_allocator>
#include <set>
#include <string>
#include <vector>

using seg_test::bounds_of;
using seg_test::stats_of;

namespace {

struct index_nodes {
  static constexpr const char *name = "cxx-index-nodes";
};
struct other_nodes {
  static constexpr const char *name = "cxx-other-nodes";
};
struct padded_nodes {
  static constexpr const char *name = "cxx-padded-nodes";
  static constexpr seg_pool_options options{0, 64, 0, 0};
};
namespace deep {
struct unnamed_tag {};
// Tags whose spelling is longer than a pool name may be: two of them.
namespace a_namespace_with_a_name_long_enough_to_matter::and_another_one_nested_inside_it {
template <class T, int N> struct tag_template_with_a_long_name_for_pool_names {};
} // namespace a_namespace_with_a_name_long_enough_to_matter::and_another_one_nested_inside_it
using long_tag_a = a_namespace_with_a_name_long_enough_to_matter::and_another_one_nested_inside_it::
    tag_template_with_a_long_name_for_pool_names<std::pair<long, double>, 1>;
using long_tag_b = a_namespace_with_a_name_long_enough_to_matter::and_another_one_nested_inside_it::
    tag_template_with_a_long_name_for_pool_names<std::pair<long, double>, 2>;
} // namespace deep

template <class T, class Tag> using seg_alloc = memlayout::seg::allocator<T, Tag>;

struct node {
  MEMLAYOUT_SEG_CLASS("cxx-class-nodes");
  long key = 0;
  node *left = nullptr, *right = nullptr;
};
struct derived_node : node {
  char payload[200] = {};
};
struct alignas(128) wide_node {
  MEMLAYOUT_SEG_CLASS("cxx-wide-nodes");
  long key = 0;
};
class hidden_ctor_node {
public:
  MEMLAYOUT_SEG_CLASS("cxx-class-nodes");
  explicit hidden_ctor_node(bool fail) {
    if (fail)
      throw std::runtime_error("constructor failed");
  }
};

} // namespace

TEST_CASE("cxx: a std::map's nodes land in the allocator's pool", "[seg][cxx]") {
  using value = std::pair<const long, long>;
  std::map<long, long, std::less<long>, seg_alloc<value, index_nodes>> index;
  for (long i = 0; i < 10000; ++i)
    index[i * 7] = i;
  seg_pool *pool = seg_pool_create(index_nodes::name, nullptr);
  auto range = bounds_of(pool);
  for (auto &entry : index) // each pair lives inside its tree node
    REQUIRE(range.contains(&entry));
  CHECK(stats_of(pool).allocations == 10000);
  index.clear();
  CHECK(stats_of(pool).allocated_bytes == 0);

  // Rebinding keeps the Tag; equality follows the Tag.
  using node_alloc = std::allocator_traits<seg_alloc<value, index_nodes>>::rebind_alloc<double>;
  static_assert(std::is_same_v<node_alloc, seg_alloc<double, index_nodes>>);
  CHECK(seg_alloc<int, index_nodes>() == seg_alloc<double, index_nodes>());
  CHECK(seg_alloc<int, index_nodes>() != seg_alloc<int, other_nodes>());
}

TEST_CASE("cxx: Tags spelt longer than a pool name get pools of their own", "[seg][cxx]") {
  // Past 127 bytes, seg_pool_create refuses the name: the Tag's name is its
  // spelling's start and a hash of the whole, different for each Tag.
  std::vector<int, seg_alloc<int, deep::long_tag_a>> a(100, 1);
  std::vector<int, seg_alloc<int, deep::long_tag_b>> b(100, 2);
  seg_pool *pa = seg_pool_of(a.data()), *pb = seg_pool_of(b.data());
  REQUIRE(pa);
  REQUIRE(pb);
  CHECK(pa != pb);
  std::string na = stats_of(pa).name, nb = stats_of(pb).name;
  CHECK(na.size() == 127);
  CHECK(na.find("deep::a_namespace_with_a_name_long_enough_to_matter") != std::string::npos);
  CHECK(na.substr(0, 110) == nb.substr(0, 110));
  CHECK(na != nb);
}

TEST_CASE("cxx: allocator Tags name pools, or carry options", "[seg][cxx]") {
  std::vector<int, seg_alloc<int, deep::unnamed_tag>> numbers(1000, 7);
  seg_pool *pool = seg_pool_of(numbers.data());
  REQUIRE(pool);
  CHECK(std::string(stats_of(pool).name).find("unnamed_tag") != std::string::npos);

  std::list<char, seg_alloc<char, padded_nodes>> chars(100, 'x');
  seg_pool *padded = seg_pool_of(&chars.front());
  REQUIRE(padded);
  CHECK(std::string(stats_of(padded).name) == padded_nodes::name);
  CHECK(seg_usable_size(&chars.front()) >= 64); // pad_to from the Tag's options

  // Over-aligned types get their alignment.
  struct alignas(256) block {
    char bytes[256];
  };
  std::vector<block, seg_alloc<block, other_nodes>> blocks(10);
  CHECK(reinterpret_cast<uintptr_t>(blocks.data()) % 256 == 0);
  CHECK(seg_pool_of(blocks.data()) == seg_pool_create(other_nodes::name, nullptr));
}

TEST_CASE("cxx: memory_resource serves pmr containers from a pool", "[seg][cxx]") {
  memlayout::seg::memory_resource rows("cxx-pmr-rows");
  auto range = bounds_of(rows.get());
  std::pmr::vector<std::pmr::string> table(&rows);
  for (int i = 0; i < 1000; ++i)
    table.emplace_back(100, 'r'); // long strings: heap buffers from the resource too
  CHECK(range.contains(table.data()));
  for (auto &s : table)
    REQUIRE(range.contains(s.data()));
  std::pmr::list<int> aligned_list(&rows);
  void *big = rows.allocate(1000, 4096);
  CHECK(reinterpret_cast<uintptr_t>(big) % 4096 == 0);
  CHECK(range.contains(big));
  rows.deallocate(big, 1000, 4096);
  // Every size at every alignment up to 64, the default (16) included:
  // the 8-byte class alone is only 8-aligned.
  for (size_t align : {size_t{1}, size_t{8}, size_t{16}, size_t{32}, size_t{64}})
    for (size_t bytes = 1; bytes <= 200; ++bytes) {
      void *p = rows.allocate(bytes, align);
      INFO(bytes << " bytes at " << align);
      REQUIRE(reinterpret_cast<uintptr_t>(p) % align == 0);
      rows.deallocate(p, bytes, align);
    }
  for (int i = 0; i < 4; ++i) {
    void *p = rows.allocate(8); // alignof(std::max_align_t)
    CHECK(reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t) == 0);
  }

  memlayout::seg::memory_resource same(rows.get()), other("cxx-pmr-other");
  CHECK(rows.is_equal(same));
  CHECK(!rows.is_equal(other));
  CHECK(!rows.is_equal(*std::pmr::new_delete_resource()));

  seg_pool_options tiny{};
  tiny.reserve_bytes = size_t{4} << 20;
  memlayout::seg::memory_resource small("cxx-pmr-tiny", &tiny);
  CHECK_THROWS_AS(small.allocate(size_t{64} << 20), std::bad_alloc);
}

TEST_CASE("cxx: MEMLAYOUT_SEG_CLASS gives a class its pool for every new and delete",
          "[seg][cxx]") {
  seg_pool *pool = seg_pool_create("cxx-class-nodes", nullptr);
  auto range = bounds_of(pool);
  auto before = stats_of(pool);

  node *n = new node;
  CHECK(range.contains(n));
  node *arr = new node[10];
  CHECK(range.contains(arr));
  node *nt = new (std::nothrow) node;
  CHECK(range.contains(nt));
  node *derived = new derived_node; // inherited operators, larger size
  CHECK(range.contains(derived));
  alignas(node) unsigned char buffer[sizeof(node)];
  node *placed = new (buffer) node; // placement new still works
  CHECK(static_cast<void *>(placed) == buffer);
  placed->~node();
  delete n;
  delete[] arr;
  delete nt;
  delete static_cast<derived_node *>(derived);

  // A constructor that throws returns the memory to the pool.
  CHECK_THROWS_AS(new hidden_ctor_node(true), std::runtime_error);
  delete new hidden_ctor_node(false);
  auto after = stats_of(pool);
  CHECK(after.allocations - before.allocations == 6);
  CHECK(after.frees - before.frees == 6);
  CHECK(after.allocated_bytes == before.allocated_bytes);

  // Over-aligned class: the aligned forms.
  wide_node *w = new wide_node;
  wide_node *ws = new wide_node[3];
  CHECK(reinterpret_cast<uintptr_t>(w) % 128 == 0);
  CHECK(reinterpret_cast<uintptr_t>(ws) % 128 == 0);
  CHECK(std::string(memlayout::seg::pool::of(w).name()) == "cxx-wide-nodes");
  delete w;
  delete[] ws;
}

TEST_CASE("cxx: the pool handle", "[seg][cxx]") {
  memlayout::seg::pool p("cxx-handle");
  CHECK(p == memlayout::seg::pool("cxx-handle"));
  void *x = p.allocate(100, 64);
  CHECK(memlayout::seg::pool::of(x) == p);
  CHECK(reinterpret_cast<uintptr_t>(x) % 64 == 0);
  CHECK(p.stats().allocations == 1);
  memlayout::seg::pool::deallocate(x);
  CHECK(!memlayout::seg::pool::of(&p));
  seg_pool_options bad{};
  bad.alignment = 3;
  try {
    memlayout::seg::pool q("cxx-bad", &bad);
    FAIL("no exception");
  } catch (const std::system_error &e) {
    CHECK(e.code() == std::errc::invalid_argument);
    CHECK(std::string(e.what()).find("cxx-bad") != std::string::npos);
  }
  p.destroy();
  CHECK(!p);
}
