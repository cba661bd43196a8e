// Appends records to the trace file. Records are written whole with one
// writev on an O_APPEND descriptor, so threads flushing at the same time never
// interleave inside a record and need no global lock for it.
#pragma once

#include "trace_format.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlayout::preload {

class TraceWriter {
public:
  // Creates (truncating) path and writes header[0..n). On failure returns
  // false with errno set and stays closed.
  bool open(const char *path, const void *header, size_t n);
  bool is_open() const { return fd_ >= 0; }
  const char *path() const { return path_; }

  // Writes one record, zstd-compressing the payload when `compress`. Drops the
  // record (counting it) once a write has failed: a trace with a hole in the
  // middle would be silently wrong, one cut short is detectably truncated.
  // Under a file size limit (RLIMIT_FSIZE) the record that would not fit is
  // not written: a stop record naming the limit is, so that the reader can
  // say why the trace ends there. Never raises SIGXFSZ in the program.
  // Returns the payload bytes stored (0 when nothing was written).
  size_t write_record(trace::RecordType type, uint32_t tid, uint32_t count, const void *payload,
                      size_t n, bool compress = true);

  // fork(): no compression may be half done in the child's copy of a context.
  void prepare_fork();
  void parent_after_fork();
  // In the child: also forget the parent's file, without touching it.
  void child_after_fork();

  void set_compression_level(int level) { level_ = level; }
  // The program set RLIMIT_FSIZE: the next record reads it again.
  void forget_file_size_limit() { limit_read_tsc_.store(0, std::memory_order_relaxed); }
  // The program is about to set RLIMIT_FSIZE's soft limit to `limit`: where
  // the trace already holds more than that leaves room for, its stop record
  // goes out now, while the old limit still lets it, and nothing after.
  void before_file_size_limit(uint64_t limit);
  // Whether a file size limit of `limit` would stop the trace: it holds too
  // much already for the stop record to fit under it.
  bool stops_at(uint64_t limit) const;
  // From a signal handler: no zstd (its contexts sit behind locks the
  // interrupted code may hold), records go out as they are.
  void stop_compressing() { raw_only_.store(true, std::memory_order_relaxed); }
  uint64_t write_errors() const { return errors_.load(std::memory_order_relaxed); }

  // A stop record with its header: the room kept for it under a file size
  // limit.
  static constexpr size_t kStopRecordBytes = sizeof(trace::RecordHeader) + trace::kMaxStopPayload;

private:
  bool ensure_descriptor();
  bool fits(size_t total, uint64_t *limit, uint64_t *at);
  uint64_t file_size_limit();
  void stop_at_limit(uint64_t limit, uint64_t at);
  bool write_whole(const trace::RecordHeader &h, const void *body, size_t body_n);
  int fd_ = -1;
  uint64_t dev_ = 0, ino_ = 0;
  bool regular_ = false;
  int level_ = 1;
  // The file's size once every record claimed so far is written.
  std::atomic<uint64_t> end_{0};
  std::atomic<uint64_t> limit_{UINT64_MAX};
  std::atomic<uint64_t> limit_read_tsc_{0}; // sys::due's: 0 reads it at the next record
  std::atomic<bool> stopped_{false};
  std::atomic<bool> broken_{false};
  std::atomic<bool> raw_only_{false};
  std::atomic<uint64_t> errors_{0};
  char path_[4096] = {};
};

extern TraceWriter g_writer;

} // namespace memlayout::preload
