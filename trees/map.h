// The interface every tree of the study implements: a concurrent map of
// 64-bit keys to 64-bit values, plus what the harness and the tests need to
// check it when no operation is running.
#pragma once

#include "htm/htm_config.h"
#include "record_alloc.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::trees {

using Key = int64_t;
using Value = int64_t;

// Keys users may store: trees keep sentinels outside this range.
inline constexpr Key kMinKey = 1;
inline constexpr Key kMaxKey = (Key{1} << 62) - 1;

// baseline: the published implementation's record layout (padding to 64
// bytes, pthread mutexes where it used them, search fields scattered).
// fixed: the study's recommendations (spin locks, search fields first, no
// padding, lean lookups). See ../shared/notes.md and docs/trees.md.
enum class Layout { kBaseline, kFixed };

struct TreeConfig {
  Layout layout = Layout::kBaseline;
  AllocPolicy alloc = AllocPolicy::kMalloc;
  htm::HtmTreeOptions htm; // the HTM trees only (htm-bptree, euno-bptree)
};

class ConcurrentMap {
public:
  virtual ~ConcurrentMap() = default;
  // Thread-safe operations. Each may be called from any thread; a thread
  // runs them inside the reclamation epoch the tree enters itself.
  virtual bool lookup(Key key, Value *value) = 0; // true and *value when present
  virtual bool insert(Key key, Value value) = 0;  // false when key is present
  virtual bool remove(Key key) = 0;               // false when key is absent

  // Quiescent only (no operation in flight): visits keys in ascending order.
  virtual void for_each(const std::function<void(Key, Value)> &visit) const = 0;
  // Quiescent only: the tree's structural invariants (search order, balance
  // bounds, no marked or pending records left, ...). Empty when they hold,
  // else what is wrong.
  virtual std::string check_structure() const = 0;

  // The record kinds the tree allocates (node, descriptor, ...) and its
  // allocator, for the harness's per-kind figures.
  virtual const RecordAllocator &records() const = 0;
};

using TreeFactory = std::unique_ptr<ConcurrentMap> (*)(const TreeConfig &);

struct TreeInfo {
  std::string_view name;        // as on the command line: "int-lf"
  std::string_view description; // "Howley & Jones lock-free internal BST"
  TreeFactory make;
};

// Every tree of this library, in the design's order.
const std::vector<TreeInfo> &all_trees();
// nullptr when no tree has that name.
const TreeInfo *find_tree(std::string_view name);

} // namespace memlayout::trees
