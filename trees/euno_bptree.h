// euno-bptree: the Euno-B+Tree of Wang et al., "Eunomia: Scaling Concurrent
// Search Trees under Contention Using HTM" (PPoPP 2017), on the HTM layer.
//
//  - Split regions: an upper transaction finds the leaf and reads its
//    version (seqno); a lower one validates the version and works in the
//    leaf, so a conflict in the leaf retries only the leaf. A split bumps
//    the version; a lower region that sees it changed retries from the root.
//  - Scattered leaves: a leaf keeps `reserved` keys sorted and S segments,
//    each sorted on its own; a write scheduler sends each insert to a random
//    segment, so concurrent inserts land on different lines. When segments
//    fill, their keys move into the reserved ones; when the leaf is full it
//    is sorted and split.
//  - Conflict control: per leaf, lock bits serialise operations on keys that
//    hash alike (outside any transaction) and mark bits, a superset of the
//    keys present, answer lookups of absent keys without a transaction.
//  - Adaptive contention control: a leaf uses conflict control only while
//    its contention detector (lower-region conflicts, decaying) says so.
//  - An advisory split lock serialises inserts into nearly full leaves and
//    range scans, which sort the leaf into its reserved keys.
//
// Layouts: baseline follows the public code: the key count (written by
// every insert) and the segments' counts share the version's line (read by
// every operation), and segments are separate 64-byte arrays from malloc
// (75% of them straddle two lines under glibc). fixed: the version, the lock
// bits and the mark bits each on a line of their own, segments inline and
// line-aligned (a zero key marks a free slot: no count to write). Both keep
// the conflict-control words off the lines of the keys.
#pragma once

#include "htm/bptree_map.h"

namespace memlayout::trees {

class EunoBptree final : public htm::BptreeMap {
public:
  explicit EunoBptree(const TreeConfig &config);
  ~EunoBptree() override;

  // The baseline leaf counts each of its four segments' entries in a byte,
  // as the published layout does: at most 255 a segment, so at most this
  // many bytes of entries per node of `entry_bytes` entries (key and
  // value). The constructor holds a larger --node-bytes to it.
  static uint32_t baseline_max_node_bytes(uint32_t entry_bytes);

  bool lookup(Key key, Value *value) override;
  bool insert(Key key, Value value) override;
  bool remove(Key key) override;
  bool put(Key key, Value value) override;
  size_t scan(Key from, size_t n, const std::function<void(Key, Value)> &visit) override;

  // Where a leaf's fields are (bytes from its start); seg_ptrs_off is used by
  // the baseline layout (separate segment arrays), segments_off by fixed.
  struct LeafShape {
    uint32_t fanout = 0;    // keys a leaf holds: reserved + segments
    uint32_t segments = 0;  // S
    uint32_t seg_slots = 0; // E, slots per segment
    uint32_t seqno_off = 0, next_off = 0, reserved_count_off = 0;
    uint32_t count_off = 0;      // baseline: total keys (fixed: none)
    uint32_t seg_counts_off = 0; // baseline: u8 per segment
    uint32_t seg_ptrs_off = 0;   // baseline
    uint32_t lock_bits_off = 0, mark_bits_off = 0, bit_words = 0;
    uint32_t split_lock_off = 0, contention_off = 0, fill_off = 0;
    uint32_t segments_off = 0, segment_bytes = 0; // fixed: inline segments
    uint32_t reserved_keys_off = 0, reserved_values_off = 0;
    uint32_t bytes = 0;
  };
  const LeafShape &leaf_shape() const { return leaf_; }

private:
  struct Place;
  struct Target {
    uint8_t *leaf;
    uint64_t seqno;
    Key hi; // the bound above the leaf's keys; 0 for the last leaf
  };
  enum class Outcome : uint8_t { kStale, kNo, kYes };
  enum class Control : uint8_t { kProceed, kAbsent, kRetry };

  // Typed for `memlayout report` (untyped memory from malloc would make
  // these allocation wrappers).
  struct LeafRecord;
  struct InnerRecord;
  struct SegmentRecord;
  [[gnu::noinline]] LeafRecord *new_leaf();
  [[gnu::noinline]] InnerRecord *new_inner();
  [[gnu::noinline]] SegmentRecord *new_segment();
  void refill_spares();

  // BptreeMap's quiescent reads. A leaf's entries are sorted only in its
  // reserved keys: visit_leaf sorts them.
  uint8_t *next_leaf(uint8_t *leaf) const override { return *at<uint8_t *>(leaf, leaf_.next_off); }
  void visit_leaf(uint8_t *leaf, const std::function<void(Key, Value)> &visit) const override;
  void check_leaf(uint8_t *leaf, Key lo, Key hi, StructureErrors &errors) const override;

  // Field addresses.
  template <class T> T *at(uint8_t *leaf, uint32_t off) const {
    return reinterpret_cast<T *>(leaf + off);
  }
  uint8_t *segment(const htm::Tx &tx, uint8_t *leaf, uint32_t s) const;
  uint8_t *seg_key(uint8_t *seg, uint32_t i) const { return seg + i * codec_.key_bytes; }
  uint8_t *seg_value(uint8_t *seg, uint32_t i) const {
    return seg + leaf_.seg_slots * codec_.key_bytes + i * codec_.value_bytes;
  }
  uint8_t *res_key(uint8_t *leaf, uint32_t i) const {
    return leaf + leaf_.reserved_keys_off + i * codec_.key_bytes;
  }
  uint8_t *res_value(uint8_t *leaf, uint32_t i) const {
    return leaf + leaf_.reserved_values_off + i * codec_.value_bytes;
  }
  uint32_t slot_of(Key key) const;

  // Inside regions.
  Target upper(Key key);
  uint32_t seg_count(const htm::Tx &tx, uint8_t *leaf, uint8_t *seg, uint32_t s) const;
  void set_seg_count(const htm::Tx &tx, uint8_t *leaf, uint32_t s, uint32_t count) const;
  uint32_t total(const htm::Tx &tx, uint8_t *leaf) const;
  bool find(const htm::Tx &tx, uint8_t *leaf, Key key, Place *where) const;
  void insert_in_leaf(const htm::Tx &tx, uint8_t *leaf, Key key, Value value,
                      htm::SpareCursor &leaves, htm::SpareCursor &inners, htm::SpareCursor &segs);
  void erase(const htm::Tx &tx, uint8_t *leaf, const Place &p) const;
  void move_to_reserved(const htm::Tx &tx, uint8_t *leaf) const;
  void split(const htm::Tx &tx, uint8_t *leaf, Key key, Value value, htm::SpareCursor &leaves,
             htm::SpareCursor &inners, htm::SpareCursor &segs);
  // Gathers the leaf's entries (and one more) sorted into the thread's scratch.
  uint32_t gather(const htm::Tx &tx, uint8_t *leaf, const Key *extra_key,
                  const Value *extra_value) const;
  void mark_in_tx(const htm::Tx &tx, uint8_t *leaf, Key key, bool set) const;
  bool other_key_with_slot(const htm::Tx &tx, uint8_t *leaf, uint32_t slot) const;

  // Conflict control, outside transactions.
  Control enter_control(const Target &t, uint32_t slot, bool cc) const;
  bool use_conflict_control(uint8_t *leaf) const;
  void lock_bit(uint8_t *leaf, uint32_t slot) const;
  void unlock_bit(uint8_t *leaf, uint32_t slot) const;
  bool marked(uint8_t *leaf, uint32_t slot) const;
  void set_mark(uint8_t *leaf, uint32_t slot) const;
  bool near_full(uint8_t *leaf) const;
  void lock_split(uint8_t *leaf) const;
  void unlock_split(uint8_t *leaf) const;
  void note_contention(uint8_t *leaf) const;
  void adjust_fill(uint8_t *leaf, int delta) const;

  // The write of put and insert.
  bool write(Key key, Value value, bool overwrite);

  // Read inside every transaction: from a line of its own, after
  // BptreeMap's members (RecordMap's lock among them, written by refills).
  alignas(64) LeafShape leaf_;
  htm::HtmTreeOptions::ConflictControl control_;
  RecordAllocator::Kind segment_kind_ = 0;
  htm::ElidedRegion *upper_, *lower_;
  htm::SpareRecords spare_segments_;
  htm::SpareRecords::Allocate alloc_segment_;
};

} // namespace memlayout::trees
