// The recorder side of <memlayout/memlayout.h>: programs find these by name at
// run time, so they work unmodified when not recorded.
#include "lifecycle.h"
#include "process_info.h"
#include "recorder.h"

using namespace memlayout::preload;

ML_EXPORT void memlayout_mark_impl(const char *name) {
  ThreadState &ts = tl_state;
  if (!name || ts.busy || !initialize())
    return;
  ts.busy = 1;
  record_mark(ts, name);
  // `report --at mark:NAME` wants the page frames of this moment.
  if (uint32_t id = record_memory_map())
    record_ext(ts, memlayout::trace::ExtKind::kSnapshot, id);
  ts.busy = 0;
}

ML_EXPORT void memlayout_tag_impl(const void *ptr, const char *type_name) {
  ThreadState &ts = tl_state;
  if (!ptr || !type_name || ts.busy || !initialize())
    return;
  ts.busy = 1;
  record_tag(ts, ptr, type_name);
  ts.busy = 0;
}
