#include "ycsb_lite_table.h"

#include <vector>

namespace memlayout::trees::ycsb {

Table::Table(ConcurrentMap &index, AllocPolicy policy, bool pad_locks)
    : index_(index), records_("ycsb", policy), row_kind_(records_.add_kind("row", sizeof(Row))),
      payload_kind_(records_.add_kind("row_payload", kPayloadBytes)),
      lock_kind_(records_.add_kind("row_lock", pad_locks ? kPaddedLockBytes : sizeof(RowLock))),
      wrapper_kind_(records_.add_kind("row_wrapper", sizeof(RowWrapper))), pad_locks_(pad_locks) {}

Table::~Table() {
  std::vector<RowWrapper *> wrappers;
  index_.for_each([&](Key, Value v) { wrappers.push_back(reinterpret_cast<RowWrapper *>(v)); });
  for (RowWrapper *w : wrappers)
    free_row(w);
}

void Table::free_row(RowWrapper *w) {
  pthread_mutex_destroy(&w->lock->mutex);
  records_.deallocate(lock_kind_, w->lock);
  records_.deallocate(payload_kind_, w->row->payload);
  records_.deallocate(row_kind_, w->row);
  records_.deallocate(wrapper_kind_, w);
}

Row *Table::new_row() { return static_cast<Row *>(records_.allocate(row_kind_, sizeof(Row))); }

unsigned char *Table::new_row_payload() {
  return static_cast<unsigned char *>(records_.allocate(payload_kind_, kPayloadBytes));
}

RowLock *Table::new_row_lock() {
  void *p = pad_locks_ ? records_.allocate_aligned(lock_kind_, kPaddedLockBytes, kPaddedLockBytes)
                       : records_.allocate(lock_kind_, sizeof(RowLock));
  return static_cast<RowLock *>(p);
}

RowWrapper *Table::new_row_wrapper() {
  return static_cast<RowWrapper *>(records_.allocate(wrapper_kind_, sizeof(RowWrapper)));
}

void Table::load(Key key) {
  Row *row = new_row();
  unsigned char *payload = new_row_payload();
  for (size_t i = 0; i < kPayloadBytes; ++i)
    payload[i] = static_cast<unsigned char>(key + static_cast<Key>(i));
  RowLock *lock = new_row_lock();
  pthread_mutex_init(&lock->mutex, nullptr);
  lock->acquisitions = 0;
  *row = Row{key, 0, payload, this, lock, 0, 0, 0};
  RowWrapper *w = new_row_wrapper();
  *w = RowWrapper{row, lock, nullptr, key, 0, 0, 0};
  if (!index_.insert(key, reinterpret_cast<Value>(w)))
    free_row(w); // loaded twice: keep the first copy
}

RowWrapper *Table::find(Key key) const {
  Value v = 0;
  return index_.lookup(key, &v) ? reinterpret_cast<RowWrapper *>(v) : nullptr;
}

} // namespace memlayout::trees::ycsb
