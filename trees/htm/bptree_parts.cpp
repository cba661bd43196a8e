#include "htm/bptree_parts.h"

#include <algorithm>
#include <stdexcept>

namespace memlayout::trees::htm {

void zero_record(uint8_t *p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8)
    __atomic_store_n(reinterpret_cast<uint64_t *>(p + i), uint64_t{0}, __ATOMIC_RELAXED);
  for (size_t i = n & ~size_t{7}; i < n; ++i)
    __atomic_store_n(p + i, uint8_t{0}, __ATOMIC_RELAXED);
}

namespace {
// Filler bytes derived from the key or value, so a copy that lost its tail
// would be told apart by a test reading them.
void write_filler(const Tx &tx, uint8_t *at, uint32_t bytes, uint64_t seed) {
  uint64_t word[32];
  for (auto &w : word)
    w = seed * 0x9e3779b97f4a7c15ULL;
  for (uint32_t done = 0; done < bytes;) {
    uint32_t part = std::min<uint32_t>(bytes - done, sizeof word);
    tx.write(at + done, word, part);
    done += part;
  }
}
} // namespace

void KeyCodec::write_key(const Tx &tx, uint8_t *at, Key k) const {
  tx.store(reinterpret_cast<Key *>(at), k);
  if (key_bytes > 8)
    write_filler(tx, at + 8, key_bytes - 8, static_cast<uint64_t>(k));
}

void KeyCodec::write_value(const Tx &tx, uint8_t *at, Value v) const {
  tx.store(reinterpret_cast<Value *>(at), v);
  if (value_bytes > 8)
    write_filler(tx, at + 8, value_bytes - 8, static_cast<uint64_t>(v));
}

bool KeyCodec::filler_intact(const uint8_t *at) const {
  return key_bytes == 8 || *reinterpret_cast<const uint64_t *>(at + 8) ==
                               static_cast<uint64_t>(plain_key(at)) * 0x9e3779b97f4a7c15ULL;
}

void KeyCodec::copy(const Tx &tx, uint8_t *to, const uint8_t *from, uint32_t bytes) const {
  uint8_t buf[512];
  for (uint32_t done = 0; done < bytes;) {
    uint32_t part = std::min<uint32_t>(bytes - done, sizeof buf);
    tx.read(from + done, part, buf);
    tx.write(to + done, buf, part);
    done += part;
  }
}

InnerShape InnerShape::make(bool fixed, uint32_t node_bytes, uint32_t key_bytes) {
  InnerShape s;
  s.key_bytes = key_bytes;
  s.fanout = std::max<uint32_t>(3, node_bytes / (key_bytes + 8));
  if (!fixed) {
    s.count_off = 0;
    s.keys_off = 8;
    s.children_off = s.keys_off + s.fanout * key_bytes;
    s.bytes = s.children_off + (s.fanout + 1) * 8;
  } else {
    s.count_off = 0;
    s.keys_off = 64;
    s.children_off = line_round(s.keys_off + s.fanout * key_bytes);
    s.bytes = line_round(s.children_off + (s.fanout + 1) * 8);
  }
  return s;
}

SpareRecords::SpareRecords() : pools_(new std::vector<uint8_t *>[kMaxThreads]) {}
SpareRecords::~SpareRecords() = default;

void SpareRecords::fill(size_t n, const Allocate &allocate) {
  std::vector<uint8_t *> &pool = mine();
  while (pool.size() < n)
    pool.push_back(allocate());
}

void SpareRecords::consume(size_t used) {
  std::vector<uint8_t *> &pool = mine();
  pool.erase(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(used));
}

std::vector<uint8_t *> SpareRecords::drain() {
  std::vector<uint8_t *> all;
  for (uint32_t i = 0; i < kMaxThreads; ++i) {
    all.insert(all.end(), pools_[i].begin(), pools_[i].end());
    pools_[i].clear();
  }
  return all;
}

uint8_t *SpareCursor::take() {
  std::vector<uint8_t *> &pool = pool_.mine();
  if (used_ < pool.size())
    return pool[used_++];
  if (tx_.mode() == Mode::kDirect)
    return allocate_(); // the fallback path: no transaction to disturb
  tx_.abort_need_records();
}

uint32_t InnerLevels::child_index(const Tx &tx, const uint8_t *node, Key key) const {
  uint32_t lo = 0, hi = tx.load(s_.count(node));
  if (hi > s_.fanout) // a zombie's view (it aborts at its next access); stay in bounds
    hi = s_.fanout;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (codec_.read_key(tx, s_.key_at(node, mid)) <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void InnerLevels::insert_at(const Tx &tx, uint8_t *node, uint32_t pos, Key sep,
                            uint8_t *right) const {
  uint32_t c = tx.load(s_.count(node));
  for (uint32_t i = c; i > pos; --i) {
    codec_.copy(tx, s_.key_at(node, i), s_.key_at(node, i - 1), s_.key_bytes);
    tx.store(s_.child_slot(node, i + 1), tx.load(s_.child_slot(node, i)));
  }
  codec_.write_key(tx, s_.key_at(node, pos), sep);
  tx.store(s_.child_slot(node, pos + 1), right);
  tx.store(s_.count(node), c + 1);
}

void InnerLevels::insert_separator(const Tx &tx, Path &path, int level, Key sep, uint8_t *right,
                                   uint8_t **root, uint32_t *height, SpareCursor &spares) const {
  for (;; --level) {
    if (level < 0) { // the root split: a new root above it
      uint8_t *nr = spares.take();
      uint8_t *old = tx.load(root);
      tx.store(s_.count(nr), 1u);
      codec_.write_key(tx, s_.key_at(nr, 0), sep);
      tx.store(s_.child_slot(nr, 0), old);
      tx.store(s_.child_slot(nr, 1), right);
      tx.store(root, nr);
      tx.store(height, tx.load(height) + 1);
      return;
    }
    uint8_t *node = path.node[level];
    uint32_t pos = path.index[level];
    uint32_t c = tx.load(s_.count(node));
    if (c < s_.fanout) {
      insert_at(tx, node, pos, sep, right);
      return;
    }
    // Split: keys[mid] goes up, the keys and children after it move right.
    uint8_t *nn = spares.take();
    uint32_t mid = c / 2;
    Key up = codec_.read_key(tx, s_.key_at(node, mid));
    for (uint32_t i = mid + 1; i < c; ++i)
      codec_.copy(tx, s_.key_at(nn, i - mid - 1), s_.key_at(node, i), s_.key_bytes);
    for (uint32_t i = mid + 1; i <= c; ++i)
      tx.store(s_.child_slot(nn, i - mid - 1), tx.load(s_.child_slot(node, i)));
    tx.store(s_.count(nn), c - mid - 1);
    tx.store(s_.count(node), mid);
    if (pos <= mid)
      insert_at(tx, node, pos, sep, right);
    else
      insert_at(tx, nn, pos - mid - 1, sep, right);
    sep = up;
    right = nn;
  }
}

void InnerLevels::init(uint8_t *node) const { zero_record(node, s_.bytes); }

uint8_t *InnerLevels::descend(const Tx &tx, uint8_t *const *root, const uint32_t *height, Key key,
                              Path *path, Key *hi) const {
  uint8_t *n = tx.load(root);
  uint32_t h = std::min<uint32_t>(tx.load(height), kMaxDepth);
  *hi = 0;
  for (uint32_t d = 0; d < h; ++d) {
    uint32_t idx = child_index(tx, n, key);
    if (idx < tx.load(s_.count(n)))
      *hi = codec_.read_key(tx, s_.key_at(n, idx));
    if (path) {
      path->node[d] = n;
      path->index[d] = idx;
    }
    n = child(tx, n, idx);
  }
  if (path)
    path->depth = static_cast<int>(h);
  return n;
}

void InnerLevels::walk(uint8_t *root, uint32_t height,
                       const std::function<void(uint8_t *, Key, Key)> &leaf,
                       std::string &errors) const {
  struct Item {
    uint8_t *node;
    uint32_t height;
    Key lo, hi;
  };
  std::vector<Item> stack{{root, height, kMinKey, 0}};
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    if (it.height == 0) {
      leaf(it.node, it.lo, it.hi);
      continue;
    }
    check(it.node, it.lo, it.hi ? it.hi : kMaxKey + 1, errors);
    uint32_t c = *s_.count(it.node);
    if (c == 0 || c > s_.fanout)
      continue;
    // Children pushed right to left: leaves come out in key order.
    for (uint32_t i = c + 1; i-- > 0;) {
      Key lo = i == 0 ? it.lo : KeyCodec::plain_key(s_.key_at(it.node, i - 1));
      Key hi = i == c ? it.hi : KeyCodec::plain_key(s_.key_at(it.node, i));
      stack.push_back({*s_.child_slot(it.node, i), it.height - 1, lo, hi});
    }
  }
}

void InnerLevels::free_all(uint8_t *root, uint32_t height,
                           const std::function<void(uint8_t *)> &free_leaf,
                           const std::function<void(uint8_t *)> &free_inner) const {
  std::vector<std::pair<uint8_t *, uint32_t>> stack{{root, height}};
  while (!stack.empty()) {
    auto [n, h] = stack.back();
    stack.pop_back();
    if (h == 0) {
      free_leaf(n);
      continue;
    }
    for (uint32_t i = 0; i <= *s_.count(n); ++i)
      stack.push_back({*s_.child_slot(n, i), h - 1});
    free_inner(n);
  }
}

void check_tree_options(const HtmTreeOptions &o) {
  if (o.key_bytes < 8 || o.key_bytes > 1024 || o.key_bytes % 8)
    throw std::invalid_argument("key size must be a multiple of 8 from 8 to 1024 bytes");
  if (o.value_bytes < 8 || o.value_bytes > 4096 || o.value_bytes % 8)
    throw std::invalid_argument("payload size must be a multiple of 8 from 8 to 4096 bytes");
  if (o.node_bytes < 16 || o.node_bytes > (1u << 20))
    throw std::invalid_argument("node size must be from 16 bytes to 1 MiB");
}

void InnerLevels::check(const uint8_t *node, Key lo, Key hi, std::string &errors) const {
  uint32_t c = *s_.count(node);
  auto fail = [&](const std::string &what) {
    errors +=
        "inner node " + std::to_string(reinterpret_cast<uintptr_t>(node)) + ": " + what + "; ";
  };
  if (c == 0 || c > s_.fanout) {
    fail("count " + std::to_string(c) + " outside 1.." + std::to_string(s_.fanout));
    return;
  }
  Key prev = lo;
  for (uint32_t i = 0; i < c; ++i) {
    Key k = KeyCodec::plain_key(s_.key_at(node, i));
    if (k < prev || (i > 0 && k == prev))
      fail("separator " + std::to_string(k) + " out of order");
    if (k >= hi)
      fail("separator " + std::to_string(k) + " not below the parent's bound " +
           std::to_string(hi));
    prev = k;
  }
  for (uint32_t i = 0; i <= c; ++i)
    if (!*s_.child_slot(node, i))
      fail("child " + std::to_string(i) + " is null");
}

} // namespace memlayout::trees::htm
