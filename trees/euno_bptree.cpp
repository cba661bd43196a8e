#include "euno_bptree.h"

#include "htm/lockstep.h"
#include "structure_errors.h"
#include "tree_factories.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace memlayout::trees {

using htm::InnerLevels;
using htm::SpareCursor;
using htm::Tx;

namespace {

constexpr uint32_t kConflictControlOn = 8; // contention at which a leaf turns it on
constexpr uint32_t kContentionMax = 64;

// A segment's entries, counted in one byte in the baseline leaf.
constexpr uint32_t kBaselineSegmentMax = 255;

EunoBptree::LeafShape make_leaf_shape(bool fixed, uint32_t node_bytes, uint32_t k, uint32_t v) {
  EunoBptree::LeafShape s;
  s.fanout = std::max<uint32_t>(4, node_bytes / (k + v));
  // 256 entries in a segment wrapped its count to 0 and lost them.
  if (!fixed)
    s.fanout = std::min(s.fanout, 4 * kBaselineSegmentMax + 3);
  s.segments = s.fanout >= 8 ? 4 : 2;
  s.seg_slots = s.fanout / s.segments;
  s.bit_words = (2 * s.fanout + 31) / 32;
  auto align8 = [](uint32_t x) { return (x + 7) / 8 * 8; };
  if (!fixed) {
    s.seqno_off = 0;
    s.count_off = 8;
    s.reserved_count_off = 12;
    s.seg_counts_off = 16;
    s.next_off = align8(s.seg_counts_off + s.segments);
    s.seg_ptrs_off = s.next_off + 8;
    // The conflict-control module "above the leaf": its own line.
    s.lock_bits_off = htm::line_round(s.seg_ptrs_off + 8 * s.segments);
    s.mark_bits_off = s.lock_bits_off + 4 * s.bit_words;
    s.split_lock_off = s.mark_bits_off + 4 * s.bit_words;
    s.contention_off = s.split_lock_off + 4;
    s.fill_off = s.contention_off + 4;
    s.reserved_keys_off = htm::line_round(s.fill_off + 4);
    s.reserved_values_off = s.reserved_keys_off + s.fanout * k;
    s.bytes = s.reserved_values_off + s.fanout * v;
    s.segment_bytes = s.seg_slots * (k + v);
  } else {
    s.seqno_off = 0;
    s.next_off = 8;
    s.reserved_count_off = 16;
    s.lock_bits_off = 64;
    s.mark_bits_off = htm::line_round(s.lock_bits_off + 4 * s.bit_words);
    s.split_lock_off = s.mark_bits_off + 4 * s.bit_words;
    s.contention_off = s.split_lock_off + 4;
    s.fill_off = s.contention_off + 4;
    s.segments_off = htm::line_round(s.fill_off + 4);
    s.segment_bytes = htm::line_round(s.seg_slots * (k + v));
    s.reserved_keys_off = s.segments_off + s.segments * s.segment_bytes;
    s.reserved_values_off = htm::line_round(s.reserved_keys_off + s.fanout * k);
    s.bytes = htm::line_round(s.reserved_values_off + s.fanout * v);
  }
  return s;
}

// Per thread: the scheduler's state and the buffer a sort of a leaf uses
// (sized outside transactions: nothing allocates inside one).
struct ThreadScratch {
  uint64_t rng = 0;
  uint32_t last_segment = ~0u;
  std::vector<std::pair<Key, uint32_t>> order; // key, index into bytes
  std::vector<uint8_t> bytes;                  // entries: key then payload
};
thread_local ThreadScratch t_scratch;

uint64_t next_random(ThreadScratch &s) {
  if (!s.rng)
    s.rng = 0x9e3779b97f4a7c15ULL ^ reinterpret_cast<uintptr_t>(&s);
  s.rng ^= s.rng << 13;
  s.rng ^= s.rng >> 7;
  s.rng ^= s.rng << 17;
  return s.rng;
}

} // namespace

// Where a key sits in a leaf.
struct EunoBptree::Place {
  bool reserved = false;
  uint32_t segment = 0, index = 0;
};

EunoBptree::EunoBptree(const TreeConfig &config)
    : BptreeMap("euno-bptree", config), control_(config.htm.conflict_control) {
  leaf_ = make_leaf_shape(fixed_, config.htm.node_bytes, codec_.key_bytes, codec_.value_bytes);
  add_node_kinds(leaf_.bytes);
  if (!fixed_)
    segment_kind_ = records_.add_kind("segment", leaf_.segment_bytes);
  std::vector<htm::ElidedRegion *> regions = open_regions({"upper", "lower"});
  upper_ = regions[0];
  lower_ = regions[1];
  alloc_leaf_ = [this] { return reinterpret_cast<uint8_t *>(new_leaf()); };
  alloc_inner_ = [this] { return reinterpret_cast<uint8_t *>(new_inner()); };
  alloc_segment_ = [this] { return reinterpret_cast<uint8_t *>(new_segment()); };
  hdr_.root = alloc_leaf_();
  if (!fixed_)
    for (uint32_t s = 0; s < leaf_.segments; ++s)
      *at<uint8_t *>(hdr_.root, leaf_.seg_ptrs_off + 8 * s) = alloc_segment_();
}

EunoBptree::~EunoBptree() {
  free_nodes([&](uint8_t *leaf) {
    if (!fixed_)
      for (uint32_t s = 0; s < leaf_.segments; ++s)
        records_.deallocate(segment_kind_, *at<uint8_t *>(leaf, leaf_.seg_ptrs_off + 8 * s));
  });
  for (uint8_t *p : spare_segments_.drain())
    records_.deallocate(segment_kind_, p);
}

EunoBptree::LeafRecord *EunoBptree::new_leaf() {
  return reinterpret_cast<LeafRecord *>(
      fresh_leaf(fixed_ ? records_.allocate_aligned(leaf_kind_, 64, leaf_.bytes)
                        : records_.allocate(leaf_kind_, leaf_.bytes)));
}

EunoBptree::InnerRecord *EunoBptree::new_inner() {
  return reinterpret_cast<InnerRecord *>(
      fresh_inner(fixed_ ? records_.allocate_aligned(inner_kind_, 64, inner_.shape().bytes)
                         : records_.allocate(inner_kind_, inner_.shape().bytes)));
}

// The public code's `new Entry[E]`: a separate array per segment.
EunoBptree::SegmentRecord *EunoBptree::new_segment() {
  auto *p = static_cast<uint8_t *>(records_.allocate(segment_kind_, leaf_.segment_bytes));
  htm::zero_record(p, leaf_.segment_bytes);
  map_.add(p, leaf_.segment_bytes, segment_kind_);
  return reinterpret_cast<SegmentRecord *>(p);
}

void EunoBptree::refill_spares() {
  refill_node_spares();
  if (!fixed_)
    spare_segments_.fill(leaf_.segments, alloc_segment_);
  ThreadScratch &s = t_scratch;
  size_t entries = leaf_.fanout + 1;
  size_t bytes = entries * (codec_.key_bytes + codec_.value_bytes);
  if (s.order.size() < entries)
    s.order.resize(entries);
  if (s.bytes.size() < bytes)
    s.bytes.resize(bytes);
}

uint32_t EunoBptree::slot_of(Key key) const {
  return static_cast<uint32_t>((static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL) >> 32) %
         (2 * leaf_.fanout);
}

uint32_t EunoBptree::baseline_max_node_bytes(uint32_t entry_bytes) {
  return (4 * kBaselineSegmentMax + 4) * entry_bytes - 1;
}

uint8_t *EunoBptree::segment(const Tx &tx, uint8_t *leaf, uint32_t s) const {
  if (fixed_)
    return leaf + leaf_.segments_off + s * leaf_.segment_bytes;
  return tx.load(at<uint8_t *>(leaf, leaf_.seg_ptrs_off + 8 * s));
}

uint32_t EunoBptree::seg_count(const Tx &tx, uint8_t *leaf, uint8_t *seg, uint32_t s) const {
  if (!fixed_)
    return std::min<uint32_t>(tx.load(at<uint8_t>(leaf, leaf_.seg_counts_off + s)),
                              leaf_.seg_slots);
  for (uint32_t i = 0; i < leaf_.seg_slots; ++i)
    if (tx.load(reinterpret_cast<Key *>(seg_key(seg, i))) == 0)
      return i;
  return leaf_.seg_slots;
}

void EunoBptree::set_seg_count(const Tx &tx, uint8_t *leaf, uint32_t s, uint32_t count) const {
  if (!fixed_)
    tx.store(at<uint8_t>(leaf, leaf_.seg_counts_off + s), static_cast<uint8_t>(count));
}

uint32_t EunoBptree::total(const Tx &tx, uint8_t *leaf) const {
  if (!fixed_)
    return tx.load(at<uint32_t>(leaf, leaf_.count_off));
  uint32_t n = tx.load(at<uint32_t>(leaf, leaf_.reserved_count_off));
  for (uint32_t s = 0; s < leaf_.segments; ++s)
    n += seg_count(tx, leaf, segment(tx, leaf, s), s);
  return n;
}

bool EunoBptree::find(const Tx &tx, uint8_t *leaf, Key key, Place *where) const {
  uint32_t rc = std::min(tx.load(at<uint32_t>(leaf, leaf_.reserved_count_off)), leaf_.fanout);
  uint32_t lo = 0, hi = rc;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (codec_.read_key(tx, res_key(leaf, mid)) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < rc && codec_.read_key(tx, res_key(leaf, lo)) == key) {
    *where = Place{true, 0, lo};
    return true;
  }
  // Segments are sorted each on its own: their first and last keys say
  // whether to look inside.
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(tx, leaf, s);
    uint32_t c = seg_count(tx, leaf, seg, s);
    if (c == 0 || key < codec_.read_key(tx, seg_key(seg, 0)) ||
        key > codec_.read_key(tx, seg_key(seg, c - 1)))
      continue;
    for (uint32_t i = 0; i < c; ++i)
      if (codec_.read_key(tx, seg_key(seg, i)) == key) {
        *where = Place{false, s, i};
        return true;
      }
  }
  return false;
}

uint32_t EunoBptree::gather(const Tx &tx, uint8_t *leaf, const Key *extra_key,
                            const Value *extra_value) const {
  ThreadScratch &sc = t_scratch;
  const uint32_t kb = codec_.key_bytes, vb = codec_.value_bytes, eb = kb + vb;
  uint32_t n = 0;
  auto take = [&](uint8_t *k, uint8_t *v) {
    if (n > leaf_.fanout) // only a zombie's view can hold more; it aborts at its next access
      return;
    uint8_t *dst = &sc.bytes[static_cast<size_t>(n) * eb];
    tx.read(k, kb, dst);
    tx.read(v, vb, dst + kb);
    sc.order[n] = {htm::KeyCodec::plain_key(dst), n};
    ++n;
  };
  uint32_t rc = std::min(tx.load(at<uint32_t>(leaf, leaf_.reserved_count_off)), leaf_.fanout);
  for (uint32_t i = 0; i < rc; ++i)
    take(res_key(leaf, i), res_value(leaf, i));
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(tx, leaf, s);
    uint32_t c = seg_count(tx, leaf, seg, s);
    for (uint32_t i = 0; i < c; ++i)
      take(seg_key(seg, i), seg_value(seg, i));
  }
  if (extra_key && n <= leaf_.fanout) {
    uint8_t *dst = &sc.bytes[static_cast<size_t>(n) * eb];
    // The new entry as the codec would write it, filler included.
    htm::Tx local(htm::Mode::kDirect);
    codec_.write_key(local, dst, *extra_key);
    codec_.write_value(local, dst + kb, *extra_value);
    sc.order[n] = {*extra_key, n};
    ++n;
  }
  std::sort(sc.order.begin(), sc.order.begin() + n);
  return n;
}

void EunoBptree::move_to_reserved(const Tx &tx, uint8_t *leaf) const {
  ThreadScratch &sc = t_scratch;
  const uint32_t kb = codec_.key_bytes, vb = codec_.value_bytes, eb = kb + vb;
  uint32_t n = gather(tx, leaf, nullptr, nullptr);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t *src = &sc.bytes[static_cast<size_t>(sc.order[i].second) * eb];
    tx.write(res_key(leaf, i), src, kb);
    tx.write(res_value(leaf, i), src + kb, vb);
  }
  tx.store(at<uint32_t>(leaf, leaf_.reserved_count_off), n);
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(tx, leaf, s);
    uint32_t c = seg_count(tx, leaf, seg, s);
    if (!c)
      continue;
    if (fixed_)
      for (uint32_t i = 0; i < c; ++i)
        tx.store(reinterpret_cast<Key *>(seg_key(seg, i)), Key{0});
    set_seg_count(tx, leaf, s, 0);
  }
}

void EunoBptree::mark_in_tx(const Tx &tx, uint8_t *leaf, Key key, bool set) const {
  uint32_t slot = slot_of(key);
  uint32_t *word = at<uint32_t>(leaf, leaf_.mark_bits_off + 4 * (slot / 32));
  uint32_t bit = 1u << (slot % 32);
  uint32_t w = tx.load(word);
  if (set && !(w & bit))
    tx.store(word, w | bit);
  else if (!set && (w & bit))
    tx.store(word, w & ~bit);
}

bool EunoBptree::other_key_with_slot(const Tx &tx, uint8_t *leaf, uint32_t slot) const {
  uint32_t rc = std::min(tx.load(at<uint32_t>(leaf, leaf_.reserved_count_off)), leaf_.fanout);
  for (uint32_t i = 0; i < rc; ++i)
    if (slot_of(codec_.read_key(tx, res_key(leaf, i))) == slot)
      return true;
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(tx, leaf, s);
    uint32_t c = seg_count(tx, leaf, seg, s);
    for (uint32_t i = 0; i < c; ++i)
      if (slot_of(codec_.read_key(tx, seg_key(seg, i))) == slot)
        return true;
  }
  return false;
}

void EunoBptree::split(const Tx &tx, uint8_t *leaf, Key key, Value value, SpareCursor &leaves,
                       SpareCursor &inners, SpareCursor &segs) {
  ThreadScratch &sc = t_scratch;
  const uint32_t kb = codec_.key_bytes, vb = codec_.value_bytes, eb = kb + vb;
  uint32_t n = gather(tx, leaf, &key, &value);
  uint32_t h = n / 2;
  uint8_t *right = leaves.take();
  if (!fixed_)
    for (uint32_t s = 0; s < leaf_.segments; ++s)
      tx.store(at<uint8_t *>(right, leaf_.seg_ptrs_off + 8 * s), segs.take());
  // The left half stays, sorted into the reserved keys; segments empty.
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t *src = &sc.bytes[static_cast<size_t>(sc.order[i].second) * eb];
    uint8_t *dst_leaf = i < h ? leaf : right;
    uint32_t j = i < h ? i : i - h;
    tx.write(res_key(dst_leaf, j), src, kb);
    tx.write(res_value(dst_leaf, j), src + kb, vb);
  }
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(tx, leaf, s);
    uint32_t c = seg_count(tx, leaf, seg, s);
    if (fixed_)
      for (uint32_t i = 0; i < c; ++i)
        tx.store(reinterpret_cast<Key *>(seg_key(seg, i)), Key{0});
    if (c)
      set_seg_count(tx, leaf, s, 0);
  }
  tx.store(at<uint32_t>(leaf, leaf_.reserved_count_off), h);
  tx.store(at<uint32_t>(right, leaf_.reserved_count_off), n - h);
  if (!fixed_) {
    tx.store(at<uint32_t>(leaf, leaf_.count_off), h);
    tx.store(at<uint32_t>(right, leaf_.count_off), n - h);
  }
  // The right leaf's mark bits for the keys it takes; the left keeps its own
  // (a superset: stale marks cost a lookup, never a wrong answer).
  for (uint32_t w = 0; w < leaf_.bit_words; ++w) {
    uint32_t bits = 0;
    for (uint32_t i = h; i < n; ++i) {
      uint32_t slot = slot_of(sc.order[i].first);
      if (slot / 32 == w)
        bits |= 1u << (slot % 32);
    }
    tx.store(at<uint32_t>(right, leaf_.mark_bits_off + 4 * w), bits);
  }
  Key sep = sc.order[h].first;
  if (key < sep)
    mark_in_tx(tx, leaf, key, true);
  tx.store(at<uint32_t>(right, leaf_.fill_off), n - h);
  tx.store(at<uint32_t>(leaf, leaf_.fill_off), h);
  tx.store(at<uint8_t *>(right, leaf_.next_off), tx.load(at<uint8_t *>(leaf, leaf_.next_off)));
  tx.store(at<uint8_t *>(leaf, leaf_.next_off), right);
  tx.store(at<uint64_t>(leaf, leaf_.seqno_off), tx.load(at<uint64_t>(leaf, leaf_.seqno_off)) + 1);
  // The path to this leaf, read again inside this transaction: the version
  // check at its start says the leaf still covers `key`.
  InnerLevels::Path path;
  Key bound;
  inner_.descend(tx, &hdr_.root, &hdr_.height, key, &path, &bound);
  inner_.insert_separator(tx, path, path.depth - 1, sep, right, &hdr_.root, &hdr_.height, inners);
}

void EunoBptree::insert_in_leaf(const Tx &tx, uint8_t *leaf, Key key, Value value,
                                SpareCursor &leaves, SpareCursor &inners, SpareCursor &segs) {
  uint32_t t = total(tx, leaf);
  if (t >= leaf_.fanout)
    return split(tx, leaf, key, value, leaves, inners, segs);
  // The write scheduler: a random segment other than the last one this
  // thread used; a full one sends it to another.
  ThreadScratch &sc = t_scratch;
  uint32_t s = static_cast<uint32_t>(next_random(sc) % leaf_.segments);
  if (s == sc.last_segment)
    s = (s + 1) % leaf_.segments;
  sc.last_segment = s;
  uint8_t *seg = nullptr;
  uint32_t c = 0;
  bool room = false;
  for (uint32_t tries = 0; tries < leaf_.segments && !room; ++tries) {
    if (tries)
      s = static_cast<uint32_t>(next_random(sc) % leaf_.segments);
    seg = segment(tx, leaf, s);
    c = seg_count(tx, leaf, seg, s);
    room = c < leaf_.seg_slots;
  }
  if (!room) { // segments full or unevenly filled: sort them into the reserved keys
    move_to_reserved(tx, leaf);
    c = 0;
  }
  uint32_t pos = 0;
  while (pos < c && codec_.read_key(tx, seg_key(seg, pos)) < key)
    ++pos;
  for (uint32_t i = c; i > pos; --i) {
    codec_.copy(tx, seg_key(seg, i), seg_key(seg, i - 1), codec_.key_bytes);
    codec_.copy(tx, seg_value(seg, i), seg_value(seg, i - 1), codec_.value_bytes);
  }
  codec_.write_key(tx, seg_key(seg, pos), key);
  codec_.write_value(tx, seg_value(seg, pos), value);
  set_seg_count(tx, leaf, s, c + 1);
  if (!fixed_)
    tx.store(at<uint32_t>(leaf, leaf_.count_off), t + 1);
}

void EunoBptree::erase(const Tx &tx, uint8_t *leaf, const Place &p) const {
  if (p.reserved) {
    uint32_t rc = std::min(tx.load(at<uint32_t>(leaf, leaf_.reserved_count_off)), leaf_.fanout);
    for (uint32_t i = p.index; i + 1 < rc; ++i) {
      codec_.copy(tx, res_key(leaf, i), res_key(leaf, i + 1), codec_.key_bytes);
      codec_.copy(tx, res_value(leaf, i), res_value(leaf, i + 1), codec_.value_bytes);
    }
    tx.store(at<uint32_t>(leaf, leaf_.reserved_count_off), rc - 1);
  } else {
    uint8_t *seg = segment(tx, leaf, p.segment);
    uint32_t c = seg_count(tx, leaf, seg, p.segment);
    for (uint32_t i = p.index; i + 1 < c; ++i) {
      codec_.copy(tx, seg_key(seg, i), seg_key(seg, i + 1), codec_.key_bytes);
      codec_.copy(tx, seg_value(seg, i), seg_value(seg, i + 1), codec_.value_bytes);
    }
    if (fixed_)
      tx.store(reinterpret_cast<Key *>(seg_key(seg, c - 1)), Key{0});
    set_seg_count(tx, leaf, p.segment, c - 1);
  }
  if (!fixed_)
    tx.store(at<uint32_t>(leaf, leaf_.count_off), tx.load(at<uint32_t>(leaf, leaf_.count_off)) - 1);
}

// ---- Conflict control, outside transactions --------------------------------

bool EunoBptree::use_conflict_control(uint8_t *leaf) const {
  using CC = htm::HtmTreeOptions::ConflictControl;
  if (control_ != CC::kAdaptive)
    return control_ == CC::kAlways;
  return __atomic_load_n(at<uint32_t>(leaf, leaf_.contention_off), __ATOMIC_RELAXED) >=
         kConflictControlOn;
}

void EunoBptree::lock_bit(uint8_t *leaf, uint32_t slot) const {
  uint32_t *word = at<uint32_t>(leaf, leaf_.lock_bits_off + 4 * (slot / 32));
  uint32_t bit = 1u << (slot % 32);
  for (unsigned attempt = 0;; ++attempt) {
    uint32_t w = __atomic_load_n(word, __ATOMIC_RELAXED);
    if (!(w & bit) && htm::plain_cas(word, w, w | bit))
      return;
    htm::pause(attempt);
  }
}

void EunoBptree::unlock_bit(uint8_t *leaf, uint32_t slot) const {
  htm::plain_fetch_and(at<uint32_t>(leaf, leaf_.lock_bits_off + 4 * (slot / 32)),
                       ~(1u << (slot % 32)));
}

bool EunoBptree::marked(uint8_t *leaf, uint32_t slot) const {
  return htm::plain_load(at<uint32_t>(leaf, leaf_.mark_bits_off + 4 * (slot / 32))) &
         (1u << (slot % 32));
}

void EunoBptree::set_mark(uint8_t *leaf, uint32_t slot) const {
  uint32_t *word = at<uint32_t>(leaf, leaf_.mark_bits_off + 4 * (slot / 32));
  uint32_t bit = 1u << (slot % 32);
  for (;;) {
    uint32_t w = __atomic_load_n(word, __ATOMIC_RELAXED);
    if ((w & bit) || htm::plain_cas(word, w, w | bit))
      return;
  }
}

bool EunoBptree::near_full(uint8_t *leaf) const {
  uint32_t n = htm::plain_load(at<uint32_t>(leaf, fixed_ ? leaf_.fill_off : leaf_.count_off));
  return n + leaf_.segments >= leaf_.fanout;
}

void EunoBptree::lock_split(uint8_t *leaf) const {
  uint32_t *word = at<uint32_t>(leaf, leaf_.split_lock_off);
  for (unsigned attempt = 0;; ++attempt) {
    if (!__atomic_load_n(word, __ATOMIC_RELAXED) && htm::plain_cas(word, 0u, 1u))
      return;
    htm::pause(attempt);
  }
}

void EunoBptree::unlock_split(uint8_t *leaf) const {
  htm::plain_store(at<uint32_t>(leaf, leaf_.split_lock_off), 0u);
}

// The contention detector: conflicts in the lower region raise it, quiet
// operations let it decay (sampled, so that quiet leaves see few stores).
void EunoBptree::note_contention(uint8_t *leaf) const {
  if (control_ != htm::HtmTreeOptions::ConflictControl::kAdaptive)
    return;
  uint32_t *word = at<uint32_t>(leaf, leaf_.contention_off);
  uint32_t conflicts = lower_->last_run_conflicts();
  uint32_t cur = __atomic_load_n(word, __ATOMIC_RELAXED);
  if (conflicts)
    htm::plain_store(word, std::min(kContentionMax, cur + 8 * conflicts));
  else if (cur && next_random(t_scratch) % 32 == 0)
    htm::plain_store(word, cur - 1);
}

void EunoBptree::adjust_fill(uint8_t *leaf, int delta) const {
  if (fixed_)
    htm::plain_fetch_add(at<uint32_t>(leaf, leaf_.fill_off), static_cast<uint32_t>(delta));
}

// ---- Operations --------------------------------------------------------------

EunoBptree::Target EunoBptree::upper(Key key) {
  return upper_->run(static_cast<uint64_t>(key), [&](Tx &tx) -> Target {
    Key hi;
    uint8_t *n = inner_.descend(tx, &hdr_.root, &hdr_.height, key, nullptr, &hi);
    return Target{n, tx.load(at<uint64_t>(n, leaf_.seqno_off)), hi};
  });
}

// Conflict control for a lookup or remove: takes the key's lock bit; an
// unmarked key is absent if the leaf did not split since the upper region
// read it (else the operation starts over).
EunoBptree::Control EunoBptree::enter_control(const Target &t, uint32_t slot, bool cc) const {
  if (!cc)
    return Control::kProceed;
  lock_bit(t.leaf, slot);
  if (marked(t.leaf, slot))
    return Control::kProceed;
  bool same = htm::plain_load(at<uint64_t>(t.leaf, leaf_.seqno_off)) == t.seqno;
  unlock_bit(t.leaf, slot);
  return same ? Control::kAbsent : Control::kRetry;
}

bool EunoBptree::lookup(Key key, Value *value) {
  htm::OpKeyScope scope(static_cast<uint64_t>(key));
  const uint32_t slot = slot_of(key);
  for (;;) {
    Target t = upper(key);
    bool cc = use_conflict_control(t.leaf);
    if (Control c = enter_control(t, slot, cc); c != Control::kProceed) {
      if (c == Control::kAbsent)
        return false;
      continue;
    }
    struct R {
      Outcome o;
      Value v;
    };
    R r = lower_->run(static_cast<uint64_t>(key), [&](Tx &tx) -> R {
      if (tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off)) != t.seqno)
        return {Outcome::kStale, 0};
      Place p;
      if (!find(tx, t.leaf, key, &p))
        return {Outcome::kNo, 0};
      uint8_t *v = p.reserved ? res_value(t.leaf, p.index)
                              : seg_value(segment(tx, t.leaf, p.segment), p.index);
      return {Outcome::kYes, codec_.read_value(tx, v)};
    });
    note_contention(t.leaf);
    if (cc)
      unlock_bit(t.leaf, slot);
    if (r.o == Outcome::kStale)
      continue;
    if (r.o == Outcome::kYes)
      *value = r.v;
    return r.o == Outcome::kYes;
  }
}

bool EunoBptree::write(Key key, Value value, bool overwrite) {
  htm::OpKeyScope scope(static_cast<uint64_t>(key));
  const uint32_t slot = slot_of(key);
  for (;;) {
    refill_spares();
    Target t = upper(key);
    bool cc = use_conflict_control(t.leaf);
    bool split_locked = false;
    if (cc) {
      lock_bit(t.leaf, slot);
      if (!marked(t.leaf, slot)) {
        set_mark(t.leaf, slot);
        if (near_full(t.leaf)) {
          lock_split(t.leaf);
          split_locked = true;
        }
      }
    }
    struct R {
      Outcome o;
      size_t leaves, inners, segs;
    };
    R r = lower_->run(
        static_cast<uint64_t>(key),
        [&](Tx &tx) -> R {
          SpareCursor leaves(tx, spare_leaves_, alloc_leaf_);
          SpareCursor inners(tx, spare_inners_, alloc_inner_);
          SpareCursor segs(tx, spare_segments_, alloc_segment_);
          if (tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off)) != t.seqno)
            return {Outcome::kStale, 0, 0, 0};
          Place p;
          if (find(tx, t.leaf, key, &p)) {
            if (overwrite)
              codec_.write_value(tx,
                                 p.reserved ? res_value(t.leaf, p.index)
                                            : seg_value(segment(tx, t.leaf, p.segment), p.index),
                                 value);
            return {Outcome::kNo, 0, 0, 0};
          }
          uint64_t seq = tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off));
          insert_in_leaf(tx, t.leaf, key, value, leaves, inners, segs);
          // The key's mark is set in the transaction that inserts it, with or
          // without conflict control (a split already marked the leaf that
          // took the key). The mark set above under the lock bit is not
          // enough: the paper's argument (the lock bit makes mark and insert
          // one step) needs every writer of the mark word to hold the lock
          // bits, and two do not. Under adaptive control a remove on a leaf
          // that looked quiet to it bypasses them, and if it takes the last
          // key of this slot between that mark and this transaction it clears
          // the mark; and a region on the fallback path updates the mark word
          // with a plain load and store, which can undo a set_mark made
          // meanwhile. The key would sit in the leaf unmarked, and lookups
          // and removes under conflict control would call it absent. (Removes
          // that read the lock bit before clearing a mark would not cover the
          // fallback path.)
          if (tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off)) == seq)
            mark_in_tx(tx, t.leaf, key, true);
          return {Outcome::kYes, leaves.used(), inners.used(), segs.used()};
        },
        [&] { refill_spares(); });
    spare_leaves_.consume(r.leaves);
    spare_inners_.consume(r.inners);
    spare_segments_.consume(r.segs);
    note_contention(t.leaf);
    if (split_locked)
      unlock_split(t.leaf);
    if (cc)
      unlock_bit(t.leaf, slot);
    if (r.o == Outcome::kStale)
      continue;
    if (r.o == Outcome::kYes && r.leaves == 0)
      adjust_fill(t.leaf, 1);
    return r.o == Outcome::kYes;
  }
}

bool EunoBptree::insert(Key key, Value value) { return write(key, value, false); }
bool EunoBptree::put(Key key, Value value) { return write(key, value, true); }

bool EunoBptree::remove(Key key) {
  htm::OpKeyScope scope(static_cast<uint64_t>(key));
  const uint32_t slot = slot_of(key);
  for (;;) {
    Target t = upper(key);
    bool cc = use_conflict_control(t.leaf);
    if (Control c = enter_control(t, slot, cc); c != Control::kProceed) {
      if (c == Control::kAbsent)
        return false;
      continue;
    }
    Outcome o = lower_->run(static_cast<uint64_t>(key), [&](Tx &tx) {
      if (tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off)) != t.seqno)
        return Outcome::kStale;
      Place p;
      if (!find(tx, t.leaf, key, &p))
        return Outcome::kNo;
      erase(tx, t.leaf, p);
      if (!other_key_with_slot(tx, t.leaf, slot))
        mark_in_tx(tx, t.leaf, key, false);
      return Outcome::kYes;
    });
    note_contention(t.leaf);
    if (cc)
      unlock_bit(t.leaf, slot);
    if (o == Outcome::kStale)
      continue;
    if (o == Outcome::kYes)
      adjust_fill(t.leaf, -1);
    return o == Outcome::kYes;
  }
}

size_t EunoBptree::scan(Key from, size_t n, const std::function<void(Key, Value)> &visit) {
  htm::OpKeyScope scope(static_cast<uint64_t>(from));
  std::vector<std::pair<Key, Value>> chunk;
  chunk.reserve(leaf_.fanout);
  size_t got = 0;
  Key next = from;
  while (got < n) {
    refill_spares();
    Target t = upper(next);
    // Scans sort the leaf into its reserved keys: the advisory lock keeps
    // inserts that would split it out meanwhile.
    lock_split(t.leaf);
    Outcome o = lower_->run(static_cast<uint64_t>(next), [&](Tx &tx) {
      chunk.clear();
      if (tx.load(at<uint64_t>(t.leaf, leaf_.seqno_off)) != t.seqno)
        return Outcome::kStale;
      uint32_t rc = std::min(tx.load(at<uint32_t>(t.leaf, leaf_.reserved_count_off)), leaf_.fanout);
      if (total(tx, t.leaf) != rc) {
        move_to_reserved(tx, t.leaf);
        rc = std::min(tx.load(at<uint32_t>(t.leaf, leaf_.reserved_count_off)), leaf_.fanout);
      }
      for (uint32_t i = 0; i < rc && chunk.size() < n - got; ++i) {
        Key k = codec_.read_key(tx, res_key(t.leaf, i));
        if (k >= next)
          chunk.emplace_back(k, codec_.read_value(tx, res_value(t.leaf, i)));
      }
      return Outcome::kYes;
    });
    unlock_split(t.leaf);
    if (o == Outcome::kStale)
      continue;
    for (const auto &[k, v] : chunk)
      visit(k, v);
    got += chunk.size();
    if (t.hi == 0)
      break;
    next = t.hi;
  }
  return got;
}

// ---- Quiescent ---------------------------------------------------------------

void EunoBptree::visit_leaf(uint8_t *leaf, const std::function<void(Key, Value)> &visit) const {
  Tx direct(htm::Mode::kDirect);
  std::vector<std::pair<Key, Value>> entries;
  uint32_t rc = *at<uint32_t>(leaf, leaf_.reserved_count_off);
  for (uint32_t i = 0; i < rc; ++i)
    entries.emplace_back(htm::KeyCodec::plain_key(res_key(leaf, i)),
                         htm::KeyCodec::plain_value(res_value(leaf, i)));
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(direct, leaf, s);
    uint32_t c = seg_count(direct, leaf, seg, s);
    for (uint32_t i = 0; i < c; ++i)
      entries.emplace_back(htm::KeyCodec::plain_key(seg_key(seg, i)),
                           htm::KeyCodec::plain_value(seg_value(seg, i)));
  }
  std::sort(entries.begin(), entries.end());
  for (const auto &[k, v] : entries)
    visit(k, v);
}

void EunoBptree::check_leaf(uint8_t *leaf, Key lo, Key hi, StructureErrors &errors) const {
  Tx direct(htm::Mode::kDirect);
  std::vector<Key> keys;
  auto in_range = [&](Key k) { return k >= lo && (!hi || k < hi); };
  uint32_t rc = *at<uint32_t>(leaf, leaf_.reserved_count_off);
  if (rc > leaf_.fanout) {
    errors.add("leaf with " + std::to_string(rc) + " reserved keys, over the fanout");
    return;
  }
  for (uint32_t i = 0; i < rc; ++i) {
    Key k = htm::KeyCodec::plain_key(res_key(leaf, i));
    if (i && k <= htm::KeyCodec::plain_key(res_key(leaf, i - 1)))
      errors.add("reserved key " + std::to_string(k) + " out of order");
    keys.push_back(k);
    if (!codec_.filler_intact(res_key(leaf, i)))
      errors.add("key " + std::to_string(k) + ": its filler bytes were not copied");
  }
  for (uint32_t s = 0; s < leaf_.segments; ++s) {
    uint8_t *seg = segment(direct, leaf, s);
    uint32_t c = seg_count(direct, leaf, seg, s);
    for (uint32_t i = 0; i < c; ++i) {
      Key k = htm::KeyCodec::plain_key(seg_key(seg, i));
      if (i && k <= htm::KeyCodec::plain_key(seg_key(seg, i - 1)))
        errors.add("segment key " + std::to_string(k) + " out of order");
      if (k < kMinKey)
        errors.add("segment slot " + std::to_string(i) + " below its count holds no key");
      keys.push_back(k);
      if (!codec_.filler_intact(seg_key(seg, i)))
        errors.add("key " + std::to_string(k) + ": its filler bytes were not copied");
    }
    if (fixed_)
      for (uint32_t i = c; i < leaf_.seg_slots; ++i)
        if (htm::KeyCodec::plain_key(seg_key(seg, i)) != 0)
          errors.add("a key after a free segment slot");
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
    errors.add("a key held twice in one leaf");
  if (keys.size() > leaf_.fanout)
    errors.add("leaf holds " + std::to_string(keys.size()) + " keys, over the fanout");
  if (!fixed_ && *at<uint32_t>(leaf, leaf_.count_off) != keys.size())
    errors.add("leaf count " + std::to_string(*at<uint32_t>(leaf, leaf_.count_off)) +
               " but it holds " + std::to_string(keys.size()) + " keys");
  for (Key k : keys) {
    if (!in_range(k))
      errors.add("leaf key " + std::to_string(k) + " outside its range");
    uint32_t slot = slot_of(k);
    if (!(*at<uint32_t>(leaf, leaf_.mark_bits_off + 4 * (slot / 32)) & (1u << (slot % 32))))
      errors.add("key " + std::to_string(k) + " has no mark bit: lookups would miss it");
  }
  for (uint32_t w = 0; w < leaf_.bit_words; ++w)
    if (*at<uint32_t>(leaf, leaf_.lock_bits_off + 4 * w))
      errors.add("a lock bit is still held");
  if (*at<uint32_t>(leaf, leaf_.split_lock_off))
    errors.add("a split lock is still held");
}

std::unique_ptr<ConcurrentMap> make_euno_bptree(const TreeConfig &config) {
  return std::make_unique<EunoBptree>(config);
}

} // namespace memlayout::trees
