// ycsb-lite's table: the study's "application merged with the tree" (its
// DBx1000 YCSB runs, §4). Per row, as DBx loads one: a 64-byte row header,
// its 100-byte payload, a 48-byte row lock and a 64-byte row wrapper (the
// index's entry, pointing at row and lock), then the index insert of key ->
// wrapper. Rows, wrappers and 64-byte tree nodes then share jemalloc's 64-byte
// size class in the order R W N (R W N N for external trees), the 192-byte
// stride that left the study's trees a third of the L3 sets; the row locks,
// consecutive 48-byte pthread mutexes, falsely share lines. With the
// segregated policy each kind has its own pool ("ycsb.row",
// "ycsb.row_payload", "ycsb.row_lock", "ycsb.row_wrapper").
#pragma once

#include "map.h"
#include "record_alloc.h"

#include <cstdint>
#include <pthread.h>

namespace memlayout::trees::ycsb {

constexpr size_t kPayloadBytes = 100;

struct RowLock;

// DBx's row_t, reduced to what a row header holds.
struct Row {
  Key key;
  uint64_t part_id;
  unsigned char *payload; // kPayloadBytes
  void *table;
  RowLock *lock;        // the row's lock manager
  uint64_t version;     // bumped by every update of the row
  uint64_t last_writer; // thread of the last update
  uint64_t flags;
};
static_assert(sizeof(Row) == 64);

// A pthread mutex (40 bytes) in a 48-byte allocation, the study's row locks:
// four share three lines, and neighbours falsely share.
struct RowLock {
  pthread_mutex_t mutex;
  uint64_t acquisitions; // written under the lock, as a lock manager's counter
};
static_assert(sizeof(RowLock) == 48);
constexpr size_t kPaddedLockBytes = 64; // --pad-locks: one lock per line

// The index's entry for a row (DBx's itemid/multimap link).
struct RowWrapper {
  Row *row;
  RowLock *lock;
  RowWrapper *next; // the multimap's chain of rows under one key (one here)
  Key key;
  uint64_t insert_ts, read_ts, flags;
};
static_assert(sizeof(RowWrapper) == 56); // jemalloc's 64-byte class, as rows and nodes

class Table {
public:
  // `index` maps keys to RowWrapper pointers; the table owns what it points at.
  Table(ConcurrentMap &index, AllocPolicy policy, bool pad_locks);
  ~Table();
  Table(const Table &) = delete;
  Table &operator=(const Table &) = delete;

  // Creates row `key` and indexes it (any thread, concurrently).
  void load(Key key);
  // The row's wrapper, or nullptr when the key was never loaded.
  RowWrapper *find(Key key) const;

private:
  Row *new_row();
  unsigned char *new_row_payload();
  RowLock *new_row_lock();
  RowWrapper *new_row_wrapper();
  void free_row(RowWrapper *w);

  ConcurrentMap &index_;
  RecordAllocator records_;
  RecordAllocator::Kind row_kind_, payload_kind_, lock_kind_, wrapper_kind_;
  bool pad_locks_;
};

} // namespace memlayout::trees::ycsb
