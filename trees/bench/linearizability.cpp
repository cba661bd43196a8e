#include "linearizability.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

namespace memlayout::trees::bench {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Whether op can return what it returned on a key that is `present`, and
// whether the key is present after it.
bool can_apply(bool present, const TimedOp &op, bool *after) {
  switch (op.kind) {
  case OpKind::kInsert:
    *after = true;
    return op.result != present;
  case OpKind::kRemove:
    *after = false;
    return op.result == present;
  case OpKind::kLookup:
    break;
  }
  *after = present;
  return op.result == present;
}

std::string describe(const TimedOp &op, uint64_t origin) {
  std::ostringstream s;
  s << "thread " << op.thread << " " << op_kind_name(op.kind) << " -> "
    << (op.result ? "true" : "false") << " [" << static_cast<int64_t>(op.invoked - origin) << ", "
    << static_cast<int64_t>(op.returned - origin) << "] ns";
  return s.str();
}

// The search over one key's operations. Entries are the operations' calls
// and returns in time order (a call before a return at the same time, so
// that ties count as overlapping), threaded on a doubly linked list with a
// head (0) and a tail (2n + 1). Linearizing an operation lifts its two
// entries off the list; backtracking puts them back (dancing links).
class KeySearch {
public:
  KeySearch(const TimedOp *ops, size_t n, bool initially_present, uint64_t step_limit)
      : ops_(ops), n_(n), initial_(initially_present), step_limit_(step_limit) {
    struct Event {
      uint64_t time;
      bool is_return;
      int32_t op;
    };
    std::vector<Event> events;
    events.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
      events.push_back({ops[i].invoked, false, static_cast<int32_t>(i)});
      events.push_back({ops[i].returned, true, static_cast<int32_t>(i)});
    }
    std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) {
      return a.time != b.time ? a.time < b.time : a.is_return < b.is_return;
    });
    size_t entries = 2 * n + 2;
    next_.resize(entries);
    prev_.resize(entries);
    entry_op_.assign(entries, -1);
    entry_is_call_.assign(entries, false);
    call_entry_.resize(n);
    return_entry_.resize(n);
    for (size_t e = 0; e < entries; ++e) {
      next_[e] = static_cast<int32_t>(e + 1);
      prev_[e] = static_cast<int32_t>(e) - 1;
    }
    for (size_t i = 0; i < events.size(); ++i) {
      int32_t e = static_cast<int32_t>(i + 1);
      entry_op_[e] = events[i].op;
      entry_is_call_[e] = !events[i].is_return;
      (events[i].is_return ? return_entry_ : call_entry_)[events[i].op] = e;
    }
    tail_ = static_cast<int32_t>(entries - 1);
  }

  LinearizabilityVerdict::Outcome run() {
    bool present = initial_;
    uint64_t h1 = 0, h2 = 0; // Zobrist hash of the set of linearized operations
    struct Frame {
      int32_t op;
      bool present_before;
    };
    std::vector<Frame> stack;
    stack.reserve(n_);
    std::unordered_set<Config, ConfigHash> seen;
    seen.reserve(2 * n_);
    size_t best = 0;
    int32_t e = next_[0];
    while (next_[0] != tail_) {
      if (++steps_ > step_limit_)
        return LinearizabilityVerdict::kUndecided;
      int32_t op = entry_op_[e];
      if (entry_is_call_[e]) {
        bool after = false;
        if (can_apply(present, ops_[op], &after)) {
          uint64_t n1 = h1 ^ zobrist(op, 1), n2 = h2 ^ zobrist(op, 2);
          if (seen.insert(Config{n1, n2 ^ (after ? kPresentSalt : 0)}).second) {
            stack.push_back({op, present});
            present = after;
            h1 = n1;
            h2 = n2;
            lift(op);
            e = next_[0];
            continue;
          }
        }
        e = next_[e];
        continue;
      }
      // The return of an operation not linearized yet: every order of what
      // is linearized so far fails here. Undo the last choice.
      if (stack.size() >= best) {
        best = stack.size();
        stuck_op_ = op;
        stuck_present_ = present;
      }
      if (stack.empty())
        return LinearizabilityVerdict::kNotLinearizable;
      Frame f = stack.back();
      stack.pop_back();
      present = f.present_before;
      h1 ^= zobrist(f.op, 1);
      h2 ^= zobrist(f.op, 2);
      unlift(f.op);
      e = next_[call_entry_[f.op]];
    }
    return LinearizabilityVerdict::kLinearizable;
  }

  uint64_t steps() const { return steps_; }

  // After kNotLinearizable: the operation the deepest attempt could not
  // place, and the operations overlapping it.
  std::string explain() const {
    std::ostringstream s;
    const TimedOp &stuck = ops_[stuck_op_];
    s << "key " << stuck.key << " (initially " << (initial_ ? "present" : "absent")
      << "): no order of its " << n_ << " operations gives their results; every order fails at "
      << describe(stuck, stuck.invoked) << " (key " << (stuck_present_ ? "present" : "absent")
      << " there in the longest attempt); operations overlapping it:";
    int shown = 0;
    for (size_t i = 0; i < n_ && shown < 12; ++i) {
      const TimedOp &o = ops_[i];
      if (static_cast<int32_t>(i) == stuck_op_ || o.returned < stuck.invoked ||
          o.invoked > stuck.returned)
        continue;
      s << (shown++ ? "; " : " ") << describe(o, stuck.invoked);
    }
    if (!shown)
      s << " none";
    return s.str();
  }

private:
  struct Config {
    uint64_t h1, h2;
    bool operator==(const Config &) const = default;
  };
  struct ConfigHash {
    size_t operator()(const Config &c) const { return static_cast<size_t>(c.h1 ^ (c.h2 >> 1)); }
  };
  static constexpr uint64_t kPresentSalt = 0x5851f42d4c957f2dULL;

  // Two independent 64-bit values per operation: two different sets of
  // operations hash alike with probability 2^-128.
  static uint64_t zobrist(int32_t op, uint64_t which) {
    return mix64(static_cast<uint64_t>(op) * 0x9e3779b97f4a7c15ULL + which * 0xd1b54a32d192ed03ULL);
  }
  void unlink_entry(int32_t e) {
    next_[prev_[e]] = next_[e];
    prev_[next_[e]] = prev_[e];
  }
  void relink_entry(int32_t e) {
    next_[prev_[e]] = e;
    prev_[next_[e]] = e;
  }
  void lift(int32_t op) {
    unlink_entry(call_entry_[op]);
    unlink_entry(return_entry_[op]);
  }
  void unlift(int32_t op) {
    relink_entry(return_entry_[op]);
    relink_entry(call_entry_[op]);
  }

  const TimedOp *ops_;
  size_t n_;
  bool initial_;
  uint64_t step_limit_;
  uint64_t steps_ = 0;
  std::vector<int32_t> next_, prev_, entry_op_, call_entry_, return_entry_;
  std::vector<bool> entry_is_call_;
  int32_t tail_ = 0;
  int32_t stuck_op_ = 0;
  bool stuck_present_ = false;
};

} // namespace

const char *op_kind_name(OpKind k) {
  switch (k) {
  case OpKind::kInsert:
    return "insert";
  case OpKind::kRemove:
    return "remove";
  case OpKind::kLookup:
    break;
  }
  return "lookup";
}

LinearizabilityVerdict check_linearizable(std::vector<TimedOp> ops,
                                          const std::function<bool(Key)> &initially_present,
                                          uint64_t step_limit) {
  LinearizabilityVerdict v;
  v.ops = ops.size();
  std::stable_sort(ops.begin(), ops.end(),
                   [](const TimedOp &a, const TimedOp &b) { return a.key < b.key; });
  for (size_t begin = 0; begin < ops.size();) {
    size_t end = begin;
    while (end < ops.size() && ops[end].key == ops[begin].key)
      ++end;
    ++v.keys;
    KeySearch search(&ops[begin], end - begin, initially_present(ops[begin].key), step_limit);
    LinearizabilityVerdict::Outcome outcome = search.run();
    v.steps += search.steps();
    if (outcome == LinearizabilityVerdict::kNotLinearizable) {
      v.outcome = outcome;
      v.explanation = search.explain();
      return v;
    }
    if (outcome == LinearizabilityVerdict::kUndecided &&
        v.outcome == LinearizabilityVerdict::kLinearizable) {
      v.outcome = outcome;
      v.explanation = "key " + std::to_string(ops[begin].key) + ": gave up after " +
                      std::to_string(step_limit) + " search steps over its " +
                      std::to_string(end - begin) + " operations";
    }
    begin = end;
  }
  return v;
}

} // namespace memlayout::trees::bench
