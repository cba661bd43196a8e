#include "htm_stats.h"

namespace memlayout::trees::htm {

HtmCounts &HtmCounts::operator+=(const HtmCounts &o) {
  commits += o.commits;
  fallbacks += o.fallbacks;
  for (int i = 0; i < kAbortCauses; ++i)
    aborts[i] += o.aborts[i];
  conflicts_true += o.conflicts_true;
  conflicts_false += o.conflicts_false;
  conflicts_same_key += o.conflicts_same_key;
  conflicts_other_key_false += o.conflicts_other_key_false;
  conflicts_other_key_true += o.conflicts_other_key_true;
  conflicts_lock += o.conflicts_lock;
  conflicts_plain += o.conflicts_plain;
  capacity_write += o.capacity_write;
  capacity_read += o.capacity_read;
  lock_held += o.lock_held;
  need_records += o.need_records;
  return *this;
}

void HtmCounts::count_abort(const AbortInfo &a) {
  ++aborts[static_cast<int>(a.cause)];
  if (a.cause == AbortCause::kExplicit) {
    lock_held += a.explicit_code == kAbortLockHeld;
    need_records += a.explicit_code == kAbortNeedRecords;
  }
  if (!a.detailed)
    return;
  if (a.cause == AbortCause::kCapacity) {
    ++(a.write_capacity ? capacity_write : capacity_read);
    return;
  }
  if (a.cause != AbortCause::kConflict)
    return;
  ++(a.overlap ? conflicts_true : conflicts_false);
  if (a.requester == Requester::kFallbackLock)
    ++conflicts_lock;
  else if (a.requester == Requester::kPlain)
    ++conflicts_plain;
  if (a.requester == Requester::kFallbackLock)
    return;
  if (a.same_key)
    ++conflicts_same_key;
  else if (a.overlap)
    ++conflicts_other_key_true;
  else
    ++conflicts_other_key_false;
}

const char *abort_cause_name(AbortCause c) {
  switch (c) {
  case AbortCause::kConflict:
    return "conflict";
  case AbortCause::kCapacity:
    return "capacity";
  case AbortCause::kExplicit:
    return "explicit";
  case AbortCause::kOther:
    break;
  }
  return "other";
}

} // namespace memlayout::trees::htm
