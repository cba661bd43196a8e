// Which record of an HTM tree holds an address: the tree adds each record
// it allocates, and the abort accounting asks, for a line that aborted a
// transaction, which record kind it belongs to and at which offset.
// Allocation is rare (nodes are allocated outside transactions, ahead of
// need) and lookups happen only on aborts, so one reader-writer lock is
// enough. The map's own nodes come from mmap'd memory, not malloc: they must
// not sit between the records whose layout is being measured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <shared_mutex>

namespace memlayout::trees::htm {

// Memory straight from mmap, in 1 MiB chunks, returned to the system when
// the resource goes.
class MmapResource final : public std::pmr::memory_resource {
public:
  MmapResource() = default;
  ~MmapResource() override;
  MmapResource(const MmapResource &) = delete;
  MmapResource &operator=(const MmapResource &) = delete;
  void release();

private:
  void *do_allocate(size_t bytes, size_t align) override;
  void do_deallocate(void *, size_t, size_t) override {} // freed all at once
  bool do_is_equal(const memory_resource &o) const noexcept override { return this == &o; }

  struct Chunk {
    Chunk *next;
    size_t size;
  };
  Chunk *chunks_ = nullptr;
  size_t used_ = 0; // in the newest chunk
};

class RecordMap {
public:
  void add(const void *p, size_t size, uint32_t kind);
  void clear();

  struct Hit {
    uint32_t kind = 0;
    uint64_t base = 0, size = 0;
  };
  // The record containing addr; false when none does.
  bool find(uint64_t addr, Hit *hit) const;

private:
  mutable std::shared_mutex mutex_;
  MmapResource memory_;
  std::pmr::map<uint64_t, Hit> by_base_{&memory_};
};

} // namespace memlayout::trees::htm
