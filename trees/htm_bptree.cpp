#include "htm_bptree.h"

#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace memlayout::trees {

using htm::InnerLevels;
using htm::Tx;

namespace {

HtmBptree::LeafShape make_leaf_shape(bool fixed, uint32_t node_bytes, uint32_t k, uint32_t v) {
  HtmBptree::LeafShape s;
  s.fanout = std::max<uint32_t>(3, node_bytes / (k + v));
  if (!fixed) {
    s.count_off = 0;
    s.keys_off = 8;
    s.values_off = s.keys_off + s.fanout * k;
    s.next_off = s.values_off + s.fanout * v;
    s.bytes = s.next_off + 8;
  } else {
    s.count_off = 0;
    s.next_off = 8;
    s.keys_off = 64;
    s.values_off = htm::line_round(s.keys_off + s.fanout * k);
    s.bytes = htm::line_round(s.values_off + s.fanout * v);
  }
  return s;
}

} // namespace

HtmBptree::HtmBptree(const TreeConfig &config) : BptreeMap("htm-bptree", config) {
  leaf_ = make_leaf_shape(fixed_, config.htm.node_bytes, codec_.key_bytes, codec_.value_bytes);
  add_node_kinds(leaf_.bytes);
  op_ = open_regions({"op"})[0];
  alloc_leaf_ = [this] { return reinterpret_cast<uint8_t *>(new_leaf()); };
  alloc_inner_ = [this] { return reinterpret_cast<uint8_t *>(new_inner()); };
  hdr_.root = alloc_leaf_();
}

HtmBptree::~HtmBptree() { free_nodes({}); }

HtmBptree::LeafRecord *HtmBptree::new_leaf() {
  return reinterpret_cast<LeafRecord *>(
      fresh_leaf(fixed_ ? records_.allocate_aligned(leaf_kind_, 64, leaf_.bytes)
                        : records_.allocate(leaf_kind_, leaf_.bytes)));
}

HtmBptree::InnerRecord *HtmBptree::new_inner() {
  return reinterpret_cast<InnerRecord *>(
      fresh_inner(fixed_ ? records_.allocate_aligned(inner_kind_, 64, inner_.shape().bytes)
                         : records_.allocate(inner_kind_, inner_.shape().bytes)));
}

uint8_t *HtmBptree::descend(const Tx &tx, Key key, InnerLevels::Path *path, Key *hi) const {
  return inner_.descend(tx, &hdr_.root, &hdr_.height, key, path, hi);
}

uint32_t HtmBptree::lower_bound(const Tx &tx, uint8_t *leaf, uint32_t count, Key key) const {
  uint32_t lo = 0, hi = count;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (codec_.read_key(tx, key_at(leaf, mid)) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void HtmBptree::shift_right(const Tx &tx, uint8_t *leaf, uint32_t pos, uint32_t count) const {
  for (uint32_t i = count; i > pos; --i) {
    codec_.copy(tx, key_at(leaf, i), key_at(leaf, i - 1), codec_.key_bytes);
    codec_.copy(tx, value_at(leaf, i), value_at(leaf, i - 1), codec_.value_bytes);
  }
}

bool HtmBptree::lookup(Key key, Value *value) {
  struct Found {
    bool found;
    Value value;
  };
  Found r = op_->run(static_cast<uint64_t>(key), [&](Tx &tx) -> Found {
    InnerLevels::Path path;
    Key hi;
    uint8_t *leaf = descend(tx, key, &path, &hi);
    uint32_t c = std::min(tx.load(count_of(leaf)), leaf_.fanout);
    uint32_t pos = lower_bound(tx, leaf, c, key);
    if (pos < c && codec_.read_key(tx, key_at(leaf, pos)) == key)
      return {true, codec_.read_value(tx, value_at(leaf, pos))};
    return {false, 0};
  });
  if (r.found)
    *value = r.value;
  return r.found;
}

bool HtmBptree::write(Key key, Value value, bool overwrite) {
  refill_node_spares();
  struct Result {
    bool inserted;
    size_t leaves, inners;
  };
  Result r = op_->run(
      static_cast<uint64_t>(key),
      [&](Tx &tx) -> Result {
        htm::SpareCursor leaves(tx, spare_leaves_, alloc_leaf_);
        htm::SpareCursor inners(tx, spare_inners_, alloc_inner_);
        InnerLevels::Path path;
        Key hi;
        uint8_t *leaf = descend(tx, key, &path, &hi);
        uint32_t c = std::min(tx.load(count_of(leaf)), leaf_.fanout);
        uint32_t pos = lower_bound(tx, leaf, c, key);
        if (pos < c && codec_.read_key(tx, key_at(leaf, pos)) == key) {
          if (overwrite)
            codec_.write_value(tx, value_at(leaf, pos), value);
          return {false, 0, 0};
        }
        if (c == leaf_.fanout) { // split: the upper half moves to a new leaf
          uint8_t *right = leaves.take();
          uint32_t h = c / 2;
          for (uint32_t i = h; i < c; ++i) {
            codec_.copy(tx, key_at(right, i - h), key_at(leaf, i), codec_.key_bytes);
            codec_.copy(tx, value_at(right, i - h), value_at(leaf, i), codec_.value_bytes);
          }
          tx.store(count_of(right), c - h);
          tx.store(count_of(leaf), h);
          tx.store(next_of(right), tx.load(next_of(leaf)));
          tx.store(next_of(leaf), right);
          Key sep = codec_.read_key(tx, key_at(right, 0));
          if (pos >= h) {
            leaf = right;
            pos -= h;
            c = c - h;
            if (pos == 0)
              sep = key;
          } else {
            c = h;
          }
          inner_.insert_separator(tx, path, path.depth - 1, sep, right, &hdr_.root, &hdr_.height,
                                  inners);
        }
        shift_right(tx, leaf, pos, c);
        codec_.write_key(tx, key_at(leaf, pos), key);
        codec_.write_value(tx, value_at(leaf, pos), value);
        tx.store(count_of(leaf), c + 1);
        return {true, leaves.used(), inners.used()};
      },
      [&] { refill_node_spares(); });
  spare_leaves_.consume(r.leaves);
  spare_inners_.consume(r.inners);
  return r.inserted;
}

bool HtmBptree::insert(Key key, Value value) { return write(key, value, false); }
bool HtmBptree::put(Key key, Value value) { return write(key, value, true); }

bool HtmBptree::remove(Key key) {
  return op_->run(static_cast<uint64_t>(key), [&](Tx &tx) {
    InnerLevels::Path path;
    Key hi;
    uint8_t *leaf = descend(tx, key, &path, &hi);
    uint32_t c = std::min(tx.load(count_of(leaf)), leaf_.fanout);
    uint32_t pos = lower_bound(tx, leaf, c, key);
    if (pos == c || codec_.read_key(tx, key_at(leaf, pos)) != key)
      return false;
    for (uint32_t i = pos; i + 1 < c; ++i) {
      codec_.copy(tx, key_at(leaf, i), key_at(leaf, i + 1), codec_.key_bytes);
      codec_.copy(tx, value_at(leaf, i), value_at(leaf, i + 1), codec_.value_bytes);
    }
    tx.store(count_of(leaf), c - 1);
    return true;
  });
}

size_t HtmBptree::scan(Key from, size_t n, const std::function<void(Key, Value)> &visit) {
  std::vector<std::pair<Key, Value>> chunk;
  chunk.reserve(leaf_.fanout);
  size_t got = 0;
  Key next = from;
  while (got < n) {
    // One leaf per transaction; `resume` is where the next leaf's keys begin.
    Key resume = op_->run(static_cast<uint64_t>(next), [&](Tx &tx) -> Key {
      chunk.clear();
      InnerLevels::Path path;
      Key hi;
      uint8_t *leaf = descend(tx, next, &path, &hi);
      uint32_t c = std::min(tx.load(count_of(leaf)), leaf_.fanout);
      for (uint32_t i = lower_bound(tx, leaf, c, next); i < c && chunk.size() < n - got; ++i)
        chunk.emplace_back(codec_.read_key(tx, key_at(leaf, i)),
                           codec_.read_value(tx, value_at(leaf, i)));
      return hi;
    });
    for (const auto &[k, v] : chunk)
      visit(k, v);
    got += chunk.size();
    if (resume == 0)
      break;
    next = resume;
  }
  return got;
}

void HtmBptree::visit_leaf(uint8_t *leaf, const std::function<void(Key, Value)> &visit) const {
  for (uint32_t i = 0; i < *count_of(leaf); ++i)
    visit(htm::KeyCodec::plain_key(key_at(leaf, i)), htm::KeyCodec::plain_value(value_at(leaf, i)));
}

void HtmBptree::check_leaf(uint8_t *leaf, Key lo, Key hi, StructureErrors &errors) const {
  uint32_t c = *count_of(leaf);
  if (c > leaf_.fanout) {
    errors.add("leaf with count " + std::to_string(c) + " over the fanout");
    return;
  }
  for (uint32_t i = 0; i < c; ++i) {
    Key k = htm::KeyCodec::plain_key(key_at(leaf, i));
    if (k < lo || (hi && k >= hi))
      errors.add("leaf key " + std::to_string(k) + " outside its range [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + ")");
    if (i && k <= htm::KeyCodec::plain_key(key_at(leaf, i - 1)))
      errors.add("leaf key " + std::to_string(k) + " out of order");
    if (!codec_.filler_intact(key_at(leaf, i)))
      errors.add("key " + std::to_string(k) + ": its filler bytes were not copied");
  }
}

std::unique_ptr<ConcurrentMap> make_htm_bptree(const TreeConfig &config) {
  return std::make_unique<HtmBptree>(config);
}

} // namespace memlayout::trees
