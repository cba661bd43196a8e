#include "trace_writer.h"

#include "spinlock.h"
#include "sys.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

namespace memlayout::preload {

TraceWriter g_writer;

namespace {

// zstd's working memory, like ours, comes from mmap: nothing of the recorder
// may land in the heap it is recording. Blocks remember their size in front.
void *zstd_alloc(void *, size_t n) {
  size_t total = n + 64;
  auto *p = static_cast<unsigned char *>(sys::map_pages(total));
  if (!p)
    return nullptr;
  *reinterpret_cast<size_t *>(p) = total;
  return p + 64;
}
void zstd_free(void *, void *q) {
  if (!q)
    return;
  auto *p = static_cast<unsigned char *>(q) - 64;
  sys::unmap_pages(p, *reinterpret_cast<size_t *>(p));
}

// A few compression contexts shared by all threads: one per thread would cost
// about a MiB each in programs with thousands of threads.
struct Compressor {
  SpinLock lock;
  ZSTD_CCtx *cctx = nullptr;
  int level = 0;
  unsigned char *out = nullptr;
  size_t out_cap = 0;
};
constexpr int kCompressors = 4;
Compressor g_compressors[kCompressors];

// A free one if any, else one to wait for, in turn: waiters sleep.
Compressor &acquire_compressor() {
  for (auto &c : g_compressors)
    if (c.lock.try_lock())
      return c;
  static std::atomic<unsigned> next{0};
  Compressor &c = g_compressors[next.fetch_add(1, std::memory_order_relaxed) % kCompressors];
  c.lock.lock();
  return c;
}

// Compresses into c.out; returns the compressed size or 0 on failure.
size_t compress(Compressor &c, int level, const void *src, size_t n) {
  if (!c.cctx) {
    c.cctx = ZSTD_createCCtx_advanced(ZSTD_customMem{zstd_alloc, zstd_free, nullptr});
    if (!c.cctx)
      return 0;
    c.level = level - 1; // force parameter setup below
  }
  if (c.level != level) {
    ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_checksumFlag, 1);
    c.level = level;
  }
  size_t bound = ZSTD_compressBound(n);
  if (bound > c.out_cap) {
    size_t cap = (bound + 0xffff) & ~size_t{0xffff};
    auto *out = static_cast<unsigned char *>(sys::map_pages(cap));
    if (!out)
      return 0;
    sys::unmap_pages(c.out, c.out_cap);
    c.out = out;
    c.out_cap = cap;
  }
  size_t r = ZSTD_compress2(c.cctx, c.out, c.out_cap, src, n);
  return ZSTD_isError(r) ? 0 : r;
}

// Programs close descriptors they did not open (daemons, test harnesses) and
// assume the lowest free one is theirs: keep ours out of the way.
int move_high(int fd) {
  rlimit rl;
  int floor = 1000;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      static_cast<long>(rl.rlim_cur) <= floor + 16)
    floor = static_cast<int>(rl.rlim_cur / 2);
  int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0)
    return fd;
  sys::close_file(fd);
  return high;
}

} // namespace

bool TraceWriter::open(const char *path, const void *header, size_t n) {
  size_t len = strlen(path);
  if (len >= sizeof path_) {
    errno = ENAMETOOLONG;
    return false;
  }
  int fd = sys::open_file(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  fd = move_high(fd);
  struct stat st {};
  fstat(fd, &st);
  // ext4 marks a file truncated to nothing (O_TRUNC of an existing file:
  // every re-recording, and `memlayout record`, which creates the file
  // first) and, on the first close after, pushes its every dirty page to
  // the disk before close returns: ~40 ms at a churn's exit for 114 MB that
  // the page cache would have written later. The mark goes with the first
  // close, so that close is of an open made just for it, with nothing yet
  // written.
  int again = S_ISREG(st.st_mode) ? sys::open_file(path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
  if (again >= 0) {
    struct stat st2;
    if (fstat(again, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino) {
      sys::close_file(fd);
      fd = move_high(again);
    } else {
      sys::close_file(again);
    }
  }
  memcpy(path_, path, len + 1);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  fd_ = fd;
  regular_ = S_ISREG(st.st_mode);
  broken_.store(false);
  stopped_.store(false);
  errors_.store(0);
  end_.store(n);
  limit_read_tsc_.store(0);
  if (regular_ && n + kStopRecordBytes > file_size_limit()) {
    // Not even the header fits under the file size limit: an empty file,
    // which the launcher explains, rather than a header cut short.
    broken_.store(true);
    errors_.fetch_add(1);
    return true;
  }
  if (!sys::write_all(fd_, header, n)) {
    broken_.store(true);
    errors_.fetch_add(1);
    return true; // the program still runs; the trace says it is truncated
  }
  return true;
}

// If the program closed our descriptor, or closed it and opened a file of its
// own under the same number, reopen ours rather than write into theirs.
bool TraceWriter::ensure_descriptor() {
  struct stat st;
  if (fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_)
    return true;
  int fd = sys::open_file(path_, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    return false;
  fd = move_high(fd);
  if (fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) {
    sys::close_file(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

size_t TraceWriter::write_record(trace::RecordType type, uint32_t tid, uint32_t count,
                                 const void *payload, size_t n, bool compress_payload) {
  if (fd_ < 0 || broken_.load(std::memory_order_relaxed))
    return 0;
  sys::KeepErrno keep_errno;
  trace::RecordHeader h{};
  h.magic = trace::kRecordMagic;
  h.type = static_cast<uint8_t>(type);
  h.tid = tid;
  h.raw_bytes = static_cast<uint32_t>(n);
  h.count = count;
  Compressor *c = nullptr;
  const void *body = payload;
  size_t body_n = n;
  if (compress_payload && n > 0 && !raw_only_.load(std::memory_order_relaxed)) {
    c = &acquire_compressor();
    size_t z = compress(*c, level_, payload, n);
    if (z) {
      body = c->out;
      body_n = z;
      h.flags = trace::kRecordCompressed;
    }
  }
  h.payload_bytes = static_cast<uint32_t>(body_n);
  size_t total = sizeof h + body_n;
  uint64_t limit = 0, at = 0;
  bool ok;
  if (fits(total, &limit, &at)) {
    ok = write_whole(h, body, body_n);
  } else {
    stop_at_limit(limit, at);
    ok = false;
  }
  if (c)
    c->lock.unlock();
  if (!ok) {
    broken_.store(true);
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
  return ok ? body_n : 0;
}

// Claims the next `total` bytes of the file. Under a file size limit a
// record that would leave no room for the stop record is refused, and so is
// every record claimed after it (the end only grows): what was claimed
// before fits with the stop record, in whatever order the writes land.
// Refused: *limit and *at say at what limit and where.
bool TraceWriter::fits(size_t total, uint64_t *limit, uint64_t *at) {
  *at = end_.fetch_add(total, std::memory_order_relaxed);
  if (!regular_)
    return true; // a device: no limit applies
  *limit = file_size_limit();
  return *limit == UINT64_MAX || *at + total + kStopRecordBytes <= *limit;
}

// RLIMIT_FSIZE as read at most a millisecond ago, not once per block: a
// limit lowered since it was read costs only the stop record (the write
// comes back short under HoldXfsz, and the trace reads as truncated).
uint64_t TraceWriter::file_size_limit() {
  if (!sys::due(limit_read_tsc_, sys::kMillisecondTicks))
    return limit_.load(std::memory_order_relaxed);
  uint64_t limit = sys::file_size_limit();
  limit_.store(limit, std::memory_order_relaxed);
  return limit;
}

bool TraceWriter::stops_at(uint64_t limit) const {
  return fd_ >= 0 && regular_ && !broken_.load(std::memory_order_relaxed) &&
         end_.load(std::memory_order_relaxed) + kStopRecordBytes > limit;
}

void TraceWriter::before_file_size_limit(uint64_t limit) {
  if (fd_ < 0 || !regular_ || broken_.load(std::memory_order_relaxed))
    return;
  uint64_t at = end_.load(std::memory_order_relaxed);
  if (at + kStopRecordBytes <= limit)
    return; // the writer refuses what would not fit when it comes to it
  // Every record claimed from here on is refused (fits() sees the end past
  // the limit), and so is this one's successor: the stop record is last.
  at = end_.fetch_add(kStopRecordBytes, std::memory_order_relaxed);
  stop_at_limit(limit, at);
  broken_.store(true);
}

// The record that says why the trace ends here, written once, by the first
// writer refused (fits() left it the room).
void TraceWriter::stop_at_limit(uint64_t limit, uint64_t at) {
  if (stopped_.exchange(true))
    return;
  uint8_t payload[trace::kMaxStopPayload];
  uint8_t *w = payload;
  *w++ = static_cast<uint8_t>(trace::StopCause::kFileSizeLimit);
  w = trace::put_varint(w, limit);
  w = trace::put_varint(w, at);
  trace::RecordHeader h{};
  h.magic = trace::kRecordMagic;
  h.type = static_cast<uint8_t>(trace::RecordType::kStop);
  h.count = 1;
  h.payload_bytes = h.raw_bytes = static_cast<uint32_t>(w - payload);
  write_whole(h, payload, h.payload_bytes);
}

// One record with one writev (O_APPEND: never interleaved with another
// thread's), finished by plain writes if the kernel wrote part of it.
bool TraceWriter::write_whole(const trace::RecordHeader &h, const void *body, size_t body_n) {
  sys::HoldXfsz hold; // a limit set after fits() looked must not kill the program either
  if (!ensure_descriptor())
    return false;
  iovec iov[2] = {{const_cast<trace::RecordHeader *>(&h), sizeof h},
                  {const_cast<void *>(body), body_n}};
  size_t total = sizeof h + body_n;
  long w; // not libc's writev: a cancellation point (sys.h)
  do
    w = syscall(SYS_writev, fd_, iov, 2);
  while (w < 0 && errno == EINTR);
  if (w >= 0 && static_cast<size_t>(w) == total)
    return true;
  hold.write_fell_short();
  if (w < 0)
    return false;
  // A short write (disk full, quota) leaves a partial record: try to finish
  // it, then give up for good.
  size_t done = static_cast<size_t>(w);
  return done >= sizeof h
             ? sys::write_all(fd_, static_cast<const char *>(body) + (done - sizeof h),
                              total - done)
             : sys::write_all(fd_, reinterpret_cast<const char *>(&h) + done, sizeof h - done) &&
                   sys::write_all(fd_, body, body_n);
}

void TraceWriter::prepare_fork() {
  for (auto &c : g_compressors)
    c.lock.lock();
}

void TraceWriter::parent_after_fork() {
  for (auto &c : g_compressors)
    c.lock.unlock();
}

void TraceWriter::child_after_fork() {
  for (auto &c : g_compressors)
    c.lock.unlock();
  if (fd_ >= 0)
    close(fd_); // the child's descriptor only; the parent keeps its own
  fd_ = -1;
  path_[0] = '\0';
}

} // namespace memlayout::preload
