#include "lockstep.h"

#include "spin_lock.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace memlayout::trees::htm {
namespace {

struct Participant {
  std::atomic<uint32_t> turn{0}; // 1: this thread runs
};

std::mutex g_ring_mutex;
std::vector<Participant *> g_ring; // in turn order

thread_local Participant *t_me = nullptr;

void wait_for_turn(Participant *me) {
  while (me->turn.load(std::memory_order_acquire) == 0)
    me->turn.wait(0, std::memory_order_acquire);
}

void give_turn(Participant *to) {
  to->turn.store(1, std::memory_order_release);
  to->turn.notify_one();
}

// The participant after `me` in the ring (me when alone); the ring mutex held.
Participant *next_of(Participant *me) {
  auto it = std::find(g_ring.begin(), g_ring.end(), me);
  ++it;
  return it == g_ring.end() ? g_ring.front() : *it;
}

} // namespace

LockstepScope::LockstepScope(unsigned together) {
  auto *me = new Participant;
  {
    std::lock_guard<std::mutex> g(g_ring_mutex);
    g_ring.push_back(me);
    if (g_ring.size() == 1)
      me->turn.store(1, std::memory_order_relaxed);
  }
  // Else the first to join runs alone until the others are scheduled.
  for (;;) {
    {
      std::lock_guard<std::mutex> g(g_ring_mutex);
      if (g_ring.size() >= together)
        break;
    }
    std::this_thread::yield();
  }
  t_me = me;
  wait_for_turn(me);
}

LockstepScope::~LockstepScope() {
  Participant *me = t_me;
  Participant *next;
  {
    std::lock_guard<std::mutex> g(g_ring_mutex);
    next = next_of(me);
    g_ring.erase(std::find(g_ring.begin(), g_ring.end(), me));
  }
  t_me = nullptr;
  if (next != me)
    give_turn(next);
  delete me;
}

void lockstep_step() {
  Participant *me = t_me;
  if (!me)
    return;
  Participant *next;
  {
    std::lock_guard<std::mutex> g(g_ring_mutex);
    next = next_of(me);
  }
  if (next == me)
    return;
  me->turn.store(0, std::memory_order_relaxed);
  give_turn(next);
  wait_for_turn(me);
}

bool lockstep_joined() { return t_me != nullptr; }

void pause(unsigned attempt) {
  if (t_me)
    lockstep_step();
  else
    back_off(attempt);
}

} // namespace memlayout::trees::htm
