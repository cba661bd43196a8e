// Epoch-based reclamation shared by every tree (Fraser's scheme, as in
// setbench's DEBRA without neutralization): a thread announces the global
// epoch while it runs an operation; a record retired in epoch e is freed once
// every thread has been seen outside, or in an epoch after, e + 1.
//
//   { EpochGuard g;  ...read and unlink records...  retire(alloc, kind, p); }
#pragma once

#include "record_alloc.h"

namespace memlayout::trees {

class EpochGuard {
public:
  EpochGuard();  // enter: announce the current epoch
  ~EpochGuard(); // leave; may free records retired two epochs ago
  EpochGuard(const EpochGuard &) = delete;
  EpochGuard &operator=(const EpochGuard &) = delete;
};

// Frees p (of kind k, from `alloc`) once no thread can still hold it. Call
// inside an EpochGuard, after p is unreachable from the tree. Two epochs
// must pass; `one_more_epoch` for a structure whose readers can reach a
// record through another record removed before it (log-int: its fix 2).
void retire(const RecordAllocator &alloc, RecordAllocator::Kind k, void *p,
            bool one_more_epoch = false);

// Frees everything retired so far. Quiescent only (no guard held anywhere):
// tree destructors and tests call it.
void reclaim_all();

// Records retired and not yet freed, all threads (for tests and the harness).
size_t retired_pending();

} // namespace memlayout::trees
