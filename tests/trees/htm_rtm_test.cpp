// The HTM trees on Intel RTM, behind the same checks as on the emulator. On a
// CPU without usable RTM (every machine of this project so far: TSX is off)
// the executable says why and exits 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include "euno_bptree.h"
#include "htm/elided_region.h"
#include "htm/rtm.h"
#include "htm_bptree.h"
#include "tree_test_support.h"

#include <catch2/catch.hpp>

#include <cstdio>

using namespace memlayout::trees;
using namespace memlayout::trees::test;

namespace {

TreeConfig rtm_config(Layout layout) {
  TreeConfig c{layout, AllocPolicy::kMalloc, {}};
  c.htm.htm.backend = htm::Backend::kRtm;
  return c;
}

} // namespace

TEST_CASE("rtm: explicit aborts come back with their code", "[rtm]") {
  unsigned status = htm::rtm_begin();
  if (status == htm::kRtmStarted)
    htm::rtm_abort_lock_held();
  htm::AbortInfo a = htm::rtm_abort_info(status);
  // A transaction can also abort for other reasons (an interrupt): retry a few.
  for (int i = 0; i < 100 && a.cause != htm::AbortCause::kExplicit; ++i) {
    status = htm::rtm_begin();
    if (status == htm::kRtmStarted)
      htm::rtm_abort_lock_held();
    a = htm::rtm_abort_info(status);
  }
  CHECK(a.cause == htm::AbortCause::kExplicit);
  CHECK(a.explicit_code == htm::kAbortLockHeld);
}

TEST_CASE("rtm: both trees keep per-key accounting on 8 threads", "[rtm]") {
  for (Layout l : {Layout::kBaseline, Layout::kFixed}) {
    HtmBptree a(rtm_config(l));
    CHECK(a.htm_report().backend == "rtm");
    check_per_key_accounting(a, 256, 8, 20000);
    CHECK(a.htm_report().counts.commits > 0);
    EunoBptree b(rtm_config(l));
    check_per_key_accounting(b, 256, 8, 20000);
  }
}

TEST_CASE("rtm: a write set larger than the L1 falls back to the lock", "[rtm]") {
  htm::HtmConfig cfg;
  cfg.backend = htm::Backend::kRtm;
  htm::Runtime rt = htm::resolve_runtime(cfg);
  htm::FallbackLock lock;
  htm::ElidedRegion region("rtm.big", lock, rt, nullptr);
  std::vector<uint64_t> big(1 << 20); // 8 MiB: no L1 holds that
  region.run(0, [&](htm::Tx &tx) {
    for (size_t i = 0; i < big.size(); i += 8)
      tx.store(&big[i], uint64_t{i});
  });
  CHECK(region.counts().fallbacks == 1);
  CHECK(region.counts().aborts[static_cast<int>(htm::AbortCause::kCapacity)] > 0);
  CHECK(big[8] == 8);
}

int main(int argc, char **argv) {
  std::string why;
  if (!htm::rtm_usable(&why)) {
    std::printf("skipped: RTM is not usable on this CPU: %s\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
