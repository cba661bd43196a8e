// What the offline inspector needs to know about the process besides its
// events: the modules loaded (to symbolize call sites) and, at snapshot
// points, the heap's regions and page frames (to know which address bits are
// physical).
#pragma once

#include <cstdint>

namespace memlayout::preload {

// Rescans the loaded modules and writes a kModules record with what was
// loaded or unloaded since the last call. Cheap when nothing changed.
void record_module_changes();
// From a signal handler, in a forked child whose trace is new: lists the
// modules the child inherited (the parent's, as last seen), which
// record_module_changes cannot (dl_iterate_phdr takes the loader's lock).
void record_inherited_modules_from_signal();

// Writes a kMemoryMap record describing the process's anonymous writable
// regions now; returns its snapshot id (0 when none could be taken).
uint32_t record_memory_map();

// fork(): the child's trace starts empty, so everything is new again.
void process_info_prepare_fork();
void process_info_parent_after_fork();
void process_info_child_after_fork();

} // namespace memlayout::preload
