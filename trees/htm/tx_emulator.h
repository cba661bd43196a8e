// A software model of best-effort HTM (Intel RTM as Haswell to Sapphire
// Rapids implement it) that runs transactions concurrently and detects their
// conflicts the way the hardware does:
//
//  - at cache-line granularity: a transaction's read and write sets are sets
//    of 64-byte lines;
//  - requester wins: an access that conflicts with a running transaction (a
//    write to a line it read or wrote, a read of a line it wrote) dooms that
//    transaction, and the requester goes on;
//  - strong atomicity: plain accesses made through plain_access() doom the
//    transactions they conflict with, as a store from outside a hardware
//    transaction does;
//  - bounded: written lines must fit the ways of their L1 set, lines only
//    read may overflow into a secondary tracker of bounded size (L1Model);
//    beyond either the transaction aborts for capacity.
//
// Writes are buffered per line and published at commit; a doomed transaction
// stops at its next access (reads are validated after they read memory, so
// it never acts on an inconsistent view) by throwing TxAborted. Every
// conflict abort records the line, the bytes each side touched and whether
// they overlap: true conflicts share bytes, false ones only the line.
//
// docs/htm.md states the model, what it leaves out and what it costs.
#pragma once

#include "abort_info.h"
#include "htm_config.h"

#include <cstddef>
#include <cstdint>

namespace memlayout::trees::htm {

// Thrown out of an emulated transaction's body when it aborts; the region
// that ran it catches it (elided_region.h). Bodies must not catch it.
struct TxAborted {};

class TxEmulator {
public:
  static TxEmulator &instance();

  // The L1 that bounds transactions. Set while no transaction runs.
  void set_model(const L1Model &m);
  L1Model model() const;

  // The calling thread's transaction. `key` is the operation's key when
  // key_known, so that conflicts between operations on different keys can be
  // told from those on the same key. A gap of more than descheduled_ns
  // between two of its accesses (its thread lost the CPU) aborts it as an
  // interrupt would abort a hardware transaction (0: never).
  void begin(uint64_t key, bool key_known, uint64_t descheduled_ns);
  void commit(); // throws TxAborted when it cannot
  [[noreturn]] void abort_explicit(uint8_t code);
  bool in_transaction() const;

  // Accesses inside the calling thread's transaction; n bytes, any alignment.
  void read(const void *addr, size_t n, void *out);
  void write(void *addr, size_t n, const void *in);

  // A plain access of [addr, addr + n) (within one line) by a thread outside
  // any transaction: dooms the transactions it conflicts with, then runs
  // `access` while no transaction can register on that line.
  template <class F>
  void plain_access(const void *addr, size_t n, bool writes, Requester who, F &&access) {
    auto locked = lock_for_plain(addr, n, writes, who);
    access();
    unlock_plain(locked);
  }

  // Why the calling thread's last transaction aborted.
  const AbortInfo &last_abort() const;

  // Announces the calling thread's current operation key for the plain
  // accesses it makes (conflict classification).
  static void set_plain_key(uint64_t key, bool known);

  // Lines, per set, the calling thread's last committed transaction held
  // (tests and the footprint figures).
  uint32_t last_commit_lines() const;
  uint32_t last_commit_written_lines() const;

private:
  TxEmulator();
  struct PlainLock {
    void *stripe;
  };
  PlainLock lock_for_plain(const void *addr, size_t n, bool writes, Requester who);
  void unlock_plain(PlainLock l);
};

} // namespace memlayout::trees::htm
