// The switch watch (ldpreload/switch_watch.h): armed, the thread's word
// stays set while the thread runs and reads zero once it was switched out.
#include "switch_watch.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace memlayout::preload;

namespace {

// nullptr, with a warning, where the C library registered no rseq area.
uint64_t *word_or_warn() {
  uint64_t *w = switch_watch::thread_word();
  if (!w)
    WARN("glibc registered no rseq area for this thread: nothing to test");
  return w;
}

} // namespace

TEST_CASE("switch_watch.running_keeps_the_word_and_a_sleep_clears_it", "[switch_watch]") {
  uint64_t *w = word_or_warn();
  if (!w)
    return;
  switch_watch::arm(w);
  CHECK_FALSE(switch_watch::switched(w));
  CHECK(getppid() > 0); // a system call that does not block: no switch
  CHECK_FALSE(switch_watch::switched(w));
  usleep(2000);
  CHECK(switch_watch::switched(w));
  switch_watch::arm(w);
  CHECK_FALSE(switch_watch::switched(w));
}

TEST_CASE("switch_watch.a_signal_handler_clears_it", "[switch_watch]") {
  uint64_t *w = word_or_warn();
  if (!w)
    return;
  struct sigaction sa = {}, old = {};
  sa.sa_handler = [](int) {};
  sigaction(SIGUSR1, &sa, &old);
  switch_watch::arm(w);
  pthread_kill(pthread_self(), SIGUSR1);
  CHECK(switch_watch::switched(w));
  sigaction(SIGUSR1, &old, nullptr);
}

// More threads than CPUs, each spinning: every one is preempted, sees its
// word cleared and re-arms it, without the kernel finding fault with the
// descriptor (a bad one is a SIGSEGV on the first switch).
TEST_CASE("switch_watch.preempted_threads_each_see_their_switches", "[switch_watch]") {
  if (!word_or_warn())
    return;
  unsigned n = 4 * std::max(2u, std::thread::hardware_concurrency());
  std::vector<int> switches(n, 0);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i)
    threads.emplace_back([&switches, i] {
      uint64_t *w = switch_watch::thread_word();
      if (!w)
        return;
      switch_watch::arm(w);
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
      while (std::chrono::steady_clock::now() < until)
        if (switch_watch::switched(w)) {
          ++switches[i];
          switch_watch::arm(w);
        }
    });
  for (auto &t : threads)
    t.join();
  for (unsigned i = 0; i < n; ++i) {
    INFO("thread " << i);
    CHECK(switches[i] > 0);
  }
}
