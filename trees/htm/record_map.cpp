#include "record_map.h"

#include <sys/mman.h>

#include <mutex>
#include <new>

namespace memlayout::trees::htm {

namespace {
constexpr size_t kChunk = 1 << 20;
}

MmapResource::~MmapResource() { release(); }

void MmapResource::release() {
  while (chunks_) {
    Chunk *next = chunks_->next;
    munmap(chunks_, chunks_->size);
    chunks_ = next;
  }
  used_ = 0;
}

void *MmapResource::do_allocate(size_t bytes, size_t align) {
  size_t at = (used_ + align - 1) / align * align;
  if (!chunks_ || at + bytes > chunks_->size) {
    size_t size = std::max(kChunk, bytes + sizeof(Chunk) + align);
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw std::bad_alloc();
    chunks_ = new (p) Chunk{chunks_, size};
    at = (sizeof(Chunk) + align - 1) / align * align;
  }
  used_ = at + bytes;
  return reinterpret_cast<char *>(chunks_) + at;
}

void RecordMap::add(const void *p, size_t size, uint32_t kind) {
  auto base = reinterpret_cast<uint64_t>(p);
  std::unique_lock g(mutex_);
  by_base_[base] = Hit{kind, base, size};
}

void RecordMap::clear() {
  std::unique_lock g(mutex_);
  by_base_.clear();
  memory_.release();
}

bool RecordMap::find(uint64_t addr, Hit *hit) const {
  std::shared_lock g(mutex_);
  auto it = by_base_.upper_bound(addr);
  if (it == by_base_.begin())
    return false;
  --it;
  if (addr >= it->second.base + it->second.size)
    return false;
  *hit = it->second;
  return true;
}

} // namespace memlayout::trees::htm
