// Runtimes that keep their objects in a heap of their own, which no malloc
// call reaches and the recorder cannot see: a report on such a program
// shows the runtime's C allocations, not the program's objects, and says so.
#pragma once

#include "trace_records.h"

#include <string>
#include <vector>

namespace memlayout::inspector {

// The notes for the runtimes the trace's modules show (a JVM, Go, V8,
// CPython's small-object allocator); none for a program that has none.
std::vector<std::string> managed_heap_notes(const std::vector<ModuleEntry> &modules,
                                            const std::string &executable);

// Whether the ELF file at `path` is a Go program (its runtime writes a
// .go.buildinfo section into every binary it links). False when unreadable.
bool is_go_binary(const std::string &path);

} // namespace memlayout::inspector
