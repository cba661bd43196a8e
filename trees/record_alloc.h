// Where a tree's records come from: the allocation policy of the study's
// experiments. Every record kind (node, descriptor, info, ...) is allocated
// through here by name, so `memlayout report` names its group after the kind:
// with kMalloc by the tree's own allocating function (alloc_node, ...), with
// kSegregated by the pool "<tree>.<kind>".
#pragma once

#include <memlayout/seg.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace memlayout::trees {

enum class AllocPolicy {
  kMalloc,     // the process's malloc: records interleave with everything else
  kSegregated, // one memlayout pool per record kind
};

class RecordAllocator {
public:
  using Kind = unsigned;

  RecordAllocator(std::string_view tree, AllocPolicy policy) : tree_(tree), policy_(policy) {}
  RecordAllocator(const RecordAllocator &) = delete;
  RecordAllocator &operator=(const RecordAllocator &) = delete;
  // Pools are process-wide by name and outlive the tree (other trees of the
  // same kind may share them), so nothing is destroyed here.
  ~RecordAllocator() = default;

  // Registers a record kind ("node"); call once per kind, in the tree's
  // constructor. With kSegregated it opens the pool "<tree>.<kind>".
  Kind add_kind(std::string_view kind, size_t record_size) {
    Kind k = static_cast<Kind>(kinds_.size());
    KindInfo info{std::string(kind), record_size, nullptr};
    if (policy_ == AllocPolicy::kSegregated) {
      std::string pool = tree_ + "." + info.name;
      info.pool = seg_pool_create(pool.c_str(), nullptr);
      if (!info.pool)
        throw std::bad_alloc();
    }
    kinds_.push_back(std::move(info));
    return k;
  }

  // Inlined into the tree's allocating function, so that function (named
  // after the kind) is the allocation site `memlayout report` shows.
  [[gnu::always_inline]] inline void *allocate(Kind k, size_t size) const {
    seg_pool *pool = kinds_[k].pool;
    void *p = pool ? seg_malloc(pool, size) : std::malloc(size);
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  [[gnu::always_inline]] inline void *allocate_aligned(Kind k, size_t align, size_t size) const {
    seg_pool *pool = kinds_[k].pool;
    void *p = pool ? seg_aligned_alloc(pool, align, size)
                   : std::aligned_alloc(align, (size + align - 1) / align * align);
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  [[gnu::always_inline]] inline void deallocate(Kind k, void *p) const {
    if (kinds_[k].pool)
      seg_free(p);
    else
      std::free(p);
  }

  AllocPolicy policy() const { return policy_; }
  const std::string &tree() const { return tree_; }
  size_t kind_count() const { return kinds_.size(); }
  const std::string &kind_name(Kind k) const { return kinds_[k].name; }
  size_t record_size(Kind k) const { return kinds_[k].size; }
  seg_pool *pool(Kind k) const { return kinds_[k].pool; }

private:
  struct KindInfo {
    std::string name;
    size_t size;
    seg_pool *pool;
  };
  std::string tree_;
  AllocPolicy policy_;
  std::vector<KindInfo> kinds_;
};

} // namespace memlayout::trees
