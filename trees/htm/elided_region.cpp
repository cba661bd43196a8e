#include "elided_region.h"

#include "lockstep.h"

#include <stdexcept>

namespace memlayout::trees::htm {

std::atomic<bool> g_emulating{false};

Runtime resolve_runtime(const HtmConfig &config) {
  Runtime rt;
  rt.retries = config.retries;
  rt.descheduled_ns = config.descheduled_ns;
  rt.l1 = config.l1;
  if (config.backend == Backend::kLock) {
    rt.backend = Backend::kLock;
    return rt;
  }
  std::string why;
  bool rtm = config.backend != Backend::kEmulate && rtm_usable(&why);
  if (config.backend == Backend::kRtm && !rtm)
    throw std::runtime_error("--htm rtm: " + why);
  rt.backend = rtm ? Backend::kRtm : Backend::kEmulate;
  if (rt.backend == Backend::kEmulate) {
    TxEmulator::instance().set_model(config.l1);
    g_emulating.store(true);
  }
  return rt;
}

void FallbackLock::back_off(unsigned attempt) { pause(attempt); }

ElidedRegion::ElidedRegion(const std::string &name, FallbackLock &lock, const Runtime &rt,
                           AbortSink *sink)
    : name_(name), interned_(intern_region_name(name)), lock_(lock), rt_(rt), sink_(sink),
      counts_(new PaddedCounts[kMaxThreads]) {}

void ElidedRegion::after_abort(const AbortInfo &info, Counts &c) {
  c.count_abort(info);
  if (sink_)
    sink_->record(info, interned_, rt_.l1);
}

HtmCounts ElidedRegion::counts() const {
  HtmCounts sum;
  for (uint32_t i = 0; i < thread_index_bound(); ++i)
    sum += counts_[i].c;
  return sum;
}

void ElidedRegion::reset_counts() {
  for (uint32_t i = 0; i < kMaxThreads; ++i)
    counts_[i].c = HtmCounts{};
}

namespace detail {

void copy_in_acquire(const void *src, size_t n, void *dst) {
  auto *s = static_cast<const uint8_t *>(src);
  auto *d = static_cast<uint8_t *>(dst);
  for (size_t i = 0; i < n;) {
    if ((reinterpret_cast<uintptr_t>(s + i) & 7) == 0 && n - i >= 8) {
      uint64_t w = __atomic_load_n(reinterpret_cast<const uint64_t *>(s + i), __ATOMIC_ACQUIRE);
      std::memcpy(d + i, &w, 8);
      i += 8;
    } else {
      d[i] = __atomic_load_n(s + i, __ATOMIC_ACQUIRE);
      ++i;
    }
  }
}

void copy_out_release(void *dst, const void *src, size_t n) {
  auto *d = static_cast<uint8_t *>(dst);
  auto *s = static_cast<const uint8_t *>(src);
  for (size_t i = 0; i < n;) {
    if ((reinterpret_cast<uintptr_t>(d + i) & 7) == 0 && n - i >= 8) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      __atomic_store_n(reinterpret_cast<uint64_t *>(d + i), w, __ATOMIC_RELEASE);
      i += 8;
    } else {
      __atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
      ++i;
    }
  }
}

} // namespace detail

void Tx::touch(const void *p, size_t n) const {
  uint8_t scratch[256];
  auto *b = static_cast<const uint8_t *>(p);
  while (n) {
    size_t part = n < sizeof scratch ? n : sizeof scratch;
    read(b, part, scratch);
    b += part;
    n -= part;
  }
}

void Tx::abort_need_records() const {
  if (mode_ == Mode::kEmulated)
    TxEmulator::instance().abort_explicit(kAbortNeedRecords);
  if (mode_ == Mode::kRtm)
    rtm_abort_need_records();
  throw std::logic_error("abort_need_records on the fallback path: allocate there instead");
}

} // namespace memlayout::trees::htm
