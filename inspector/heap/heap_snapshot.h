// The live heap at one moment of a trace: replays allocations, frees,
// reallocs and tags of all threads merged into one time order and stops at
// the peak of live requested bytes, at the end, or right after a mark.
//
// Threads' blocks lie in the file in flush order, so a block can come long
// after later blocks of other threads. The replay therefore reads the trace
// once through `r` to index every events block (offset, thread, first TSC),
// then merges the threads by (TSC, thread) decoding each block on its own
// only when it holds the earliest pending event. Memory for events: one
// decoded block per thread whose current block overlaps the replay's time
// (a block is at most the recorder's 64 KiB buffer, decompressed), plus
// look-ahead of at most kMaxLookahead events per thread when resolving an
// address reuse. Memory for the heap: one 32-byte record plus a 16-byte
// table slot at <= 70% load per object alive at the busiest moment before
// the point (about 55 bytes per object), sized by a bound on the live count
// the indexing read computes from each block's net allocations. `end` and
// `mark` replay once. So does `peak`: the replay tracks live bytes and keeps
// the objects freed after the best peak so far (never more than were live
// at it, 32 bytes each) to roll back to it at the end. Where that cannot be
// exact (a peak reached inside a pulled-forward free, too many tags changed
// after it), and for an observer, a first replay finds the peak and a
// second one rebuilds the heap up to it. A trace with lost events (frees
// may be missing, which inflates the bound) is sized by an exact first
// replay at every point.
#pragma once

#include "heap_model.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace memlayout::inspector {

class TraceReader; // trace_reader.h: the stage before this one

// `r` must be open with nothing read yet (next() not called); it is read to
// its end, after which its tables, status() and error() are complete. A
// truncated or damaged trace gives the valid prefix's snapshot with
// `partial` set (r.error() says where it stopped). Returns false, with
// `error` set, when the trace cannot be read at all or a mark is missing.
// Blocks are re-read from the file r.name(); a reader opened with
// open_buffer must use the overload that is given the same bytes.
//
// `progress`, when given, is called now and then with what is being done
// and how far along it is (0..1), for a progress bar.
using SnapshotProgress = std::function<void(const char *stage, double fraction)>;
bool build_snapshot(TraceReader &r, const SnapshotSpec &spec, HeapSnapshot &out, std::string &error,
                    const SnapshotProgress &progress = {});
bool build_snapshot(TraceReader &r, std::span<const uint8_t> trace_bytes, const SnapshotSpec &spec,
                    HeapSnapshot &out, std::string &error, const SnapshotProgress &progress = {});

} // namespace memlayout::inspector
