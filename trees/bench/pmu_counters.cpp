#include "pmu_counters.h"

#include <perfmon/pfmlib_perf_event.h>

#include <cerrno>
#include <cstring>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace memlayout::trees::bench {
namespace {

// Names to try per event, most specific first: the core PMU's own event,
// then perf's generic cache events (which the kernel maps per CPU model).
const std::vector<const char *> &candidates(PmuEvent e) {
  static const std::vector<const char *> llc = {"LLC_MISSES",
                                                "perf::PERF_COUNT_HW_CACHE_LL:READ:MISS"};
  static const std::vector<const char *> dtlb = {"perf::PERF_COUNT_HW_CACHE_DTLB:READ:MISS",
                                                 "DTLB_LOAD_MISSES:MISS_CAUSES_A_WALK"};
  static const std::vector<const char *> l2pf = {"L2_RQSTS:ALL_PF", "L2_RQSTS:ALL_HWPF",
                                                 "L2_RQSTS:PF_MISS"};
  switch (e) {
  case PmuEvent::kLlcMisses:
    return llc;
  case PmuEvent::kDtlbLoadMisses:
    return dtlb;
  case PmuEvent::kL2Prefetches:
    break;
  }
  return l2pf;
}

int perf_event_open(perf_event_attr *attr, int cpu, int group_fd) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, attr, 0 /* this thread */, cpu, group_fd, PERF_FLAG_FD_CLOEXEC));
}

void prepare(perf_event_attr &attr) {
  attr.size = sizeof(perf_event_attr);
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
}

} // namespace

const char *pmu_event_key(PmuEvent e) {
  switch (e) {
  case PmuEvent::kLlcMisses:
    return "llc_misses";
  case PmuEvent::kDtlbLoadMisses:
    return "dtlb_load_misses";
  case PmuEvent::kL2Prefetches:
    break;
  }
  return "l2_prefetches";
}

PmuSession::PmuSession() {
  int rc = pfm_initialize();
  for (int i = 0; i < kPmuEventCount; ++i) {
    auto e = static_cast<PmuEvent>(i);
    if (rc != PFM_SUCCESS) {
      why_not_[i] = std::string("libpfm4 pfm_initialize: ") + pfm_strerror(rc);
      continue;
    }
    std::string tried;
    for (const char *name : candidates(e)) {
      perf_event_attr attr{};
      pfm_perf_encode_arg_t arg{};
      arg.attr = &attr;
      arg.size = sizeof(arg);
      int enc = pfm_get_os_event_encoding(name, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
      if (enc != PFM_SUCCESS) {
        tried += std::string(tried.empty() ? "" : ", ") + name + ": " + pfm_strerror(enc);
        continue;
      }
      prepare(attr);
      int fd = perf_event_open(&attr, -1, -1);
      if (fd < 0) {
        tried += std::string(tried.empty() ? "" : ", ") + "perf_event_open(" + name +
                 "): " + std::strerror(errno);
        continue;
      }
      close(fd);
      attr_[i] = attr;
      usable_[i] = true;
      break;
    }
    if (!usable_[i])
      why_not_[i] = tried;
  }
}

bool PmuSession::available(PmuEvent e) const {
  std::lock_guard lock(mutex_);
  return usable_[static_cast<int>(e)];
}

bool PmuSession::any_available() const {
  std::lock_guard lock(mutex_);
  for (bool u : usable_)
    if (u)
      return true;
  return false;
}

std::string PmuSession::unavailable_reason() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (int i = 0; i < kPmuEventCount; ++i)
    if (!usable_[i])
      out += std::string(out.empty() ? "" : "; ") + pmu_event_key(static_cast<PmuEvent>(i)) + ": " +
             why_not_[i];
  return out;
}

void PmuSession::disable(PmuEvent e, const std::string &why) {
  std::lock_guard lock(mutex_);
  int i = static_cast<int>(e);
  if (usable_[i]) {
    usable_[i] = false;
    why_not_[i] = why;
  }
}

ThreadCounters::ThreadCounters(PmuSession &session) {
  fd_.fill(-1);
  counts_.fill(-1);
  for (int i = 0; i < kPmuEventCount; ++i) {
    auto e = static_cast<PmuEvent>(i);
    if (!session.available(e))
      continue;
    perf_event_attr attr = session.attr_[i];
    fd_[i] = perf_event_open(&attr, -1, -1);
    if (fd_[i] < 0)
      session.disable(e,
                      std::string("perf_event_open on a worker thread: ") + std::strerror(errno));
  }
}

ThreadCounters::~ThreadCounters() {
  for (int fd : fd_)
    if (fd >= 0)
      close(fd);
}

void ThreadCounters::start() {
  for (int fd : fd_) {
    if (fd < 0)
      continue;
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  }
}

void ThreadCounters::stop() {
  for (int i = 0; i < kPmuEventCount; ++i) {
    if (fd_[i] < 0)
      continue;
    ioctl(fd_[i], PERF_EVENT_IOC_DISABLE, 0);
    uint64_t v[3] = {0, 0, 0}; // value, time enabled, time running
    if (read(fd_[i], v, sizeof v) != static_cast<ssize_t>(sizeof v))
      continue;
    double scale = v[2] ? static_cast<double>(v[1]) / static_cast<double>(v[2]) : 0.0;
    counts_[i] = static_cast<int64_t>(static_cast<double>(v[0]) * scale);
  }
}

} // namespace memlayout::trees::bench
