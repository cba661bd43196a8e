#include "linearizability.h"

#include <algorithm>
#include <queue>
#include <sstream>

namespace memlayout::trees::bench {
namespace {

// Why a greedy construction decides this object exactly. An operation not
// placed yet is eligible when every operation that returned before it was
// invoked is placed: the operations some valid order could place next. Let
// L be any valid order of the operations not placed yet.
// 1. A "read" (a lookup, a failed insert, a failed remove) that is eligible
//    and returns what the key's current state says can move to the front of
//    L: it changes no state, and nothing in L must precede it. So such reads
//    are placed as soon as they are eligible, and never undone.
// 2. With none left, L starts with a "write" that fits the state (a
//    successful insert on an absent key, a successful remove on a present
//    one). Of the eligible writes that fit, the one that returns first, W,
//    can swap places with L's first, F: both fit the same states, W is
//    eligible, and an operation between them in L that must follow F
//    (invoked after F returned) would have to follow W too, W having
//    returned no later: so there is none.
// Placing reads greedily, then the earliest-returning write that fits, thus
// finds a valid order whenever one exists; the first point where neither
// applies proves there is none.
class KeyCheck {
public:
  KeyCheck(TimedOp *ops, size_t n, bool initially_present)
      : ops_(ops), n_(n), initial_(initially_present) {
    std::sort(ops, ops + n,
              [](const TimedOp &a, const TimedOp &b) { return a.invoked < b.invoked; });
  }

  bool run() {
    using ByReturn = std::pair<uint64_t, uint32_t>; // returned, op
    using MinHeap = std::priority_queue<ByReturn, std::vector<ByReturn>, std::greater<>>;
    MinHeap unplaced;               // eligible so far and not placed; placed ones drop out lazily
    MinHeap writes[2];              // eligible writes that fit an absent [0] or a present [1] key
    std::vector<uint32_t> reads[2]; // eligible reads that see the key absent [0] or present [1]
    std::vector<bool> placed(n_, false);
    size_t next = 0, left = n_;
    bool present = initial_;
    // The earliest return among eligible unplaced operations: an operation
    // invoked no later (ties overlap) is eligible.
    auto frontier = [&] {
      while (!unplaced.empty() && placed[unplaced.top().second])
        unplaced.pop();
      return unplaced.empty() ? UINT64_MAX : unplaced.top().first;
    };
    while (left) {
      for (uint64_t f = frontier(); next < n_ && ops_[next].invoked <= f; ++next) {
        const TimedOp &o = ops_[next];
        auto i = static_cast<uint32_t>(next);
        unplaced.push({o.returned, i});
        f = std::min(f, o.returned);
        if (o.kind != OpKind::kLookup && o.result)
          writes[o.kind == OpKind::kRemove].push({o.returned, i});
        else
          reads[o.kind == OpKind::kLookup ? o.result : o.kind == OpKind::kInsert].push_back(i);
      }
      if (std::vector<uint32_t> &fit = reads[present]; !fit.empty()) {
        for (uint32_t i : fit)
          placed[i] = true;
        left -= fit.size();
        fit.clear();
        continue;
      }
      MinHeap &w = writes[present];
      if (w.empty()) {
        frontier();
        stuck_op_ = unplaced.top().second;
        stuck_present_ = present;
        return false;
      }
      placed[w.top().second] = true;
      w.pop();
      --left;
      present = !present;
    }
    return true;
  }

  // After run() returned false: the operation whose return came with no
  // way to place it, and the operations overlapping it.
  std::string explain() const {
    std::ostringstream s;
    const TimedOp &stuck = ops_[stuck_op_];
    s << "key " << stuck.key << " (initially " << (initial_ ? "present" : "absent")
      << "): no order of its " << n_ << " operations gives their results; every order fails at "
      << describe(stuck, stuck.invoked) << " (key " << (stuck_present_ ? "present" : "absent")
      << " there, and no operation left that could change that); operations overlapping it:";
    int shown = 0;
    for (size_t i = 0; i < n_ && shown < 12; ++i) {
      const TimedOp &o = ops_[i];
      if (i == stuck_op_ || o.returned < stuck.invoked || o.invoked > stuck.returned)
        continue;
      s << (shown++ ? "; " : " ") << describe(o, stuck.invoked);
    }
    if (!shown)
      s << " none";
    return s.str();
  }

private:
  static std::string describe(const TimedOp &op, uint64_t origin) {
    std::ostringstream s;
    s << "thread " << op.thread << " " << op_kind_name(op.kind) << " -> "
      << (op.result ? "true" : "false") << " [" << static_cast<int64_t>(op.invoked - origin) << ", "
      << static_cast<int64_t>(op.returned - origin) << "] ns";
    return s.str();
  }

  TimedOp *ops_;
  size_t n_;
  bool initial_;
  size_t stuck_op_ = 0;
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
                                          const std::function<bool(Key)> &initially_present) {
  LinearizabilityVerdict v;
  v.ops = ops.size();
  std::stable_sort(ops.begin(), ops.end(),
                   [](const TimedOp &a, const TimedOp &b) { return a.key < b.key; });
  for (size_t begin = 0; begin < ops.size();) {
    size_t end = begin;
    while (end < ops.size() && ops[end].key == ops[begin].key)
      ++end;
    ++v.keys;
    KeyCheck check(&ops[begin], end - begin, initially_present(ops[begin].key));
    if (!check.run()) {
      v.outcome = LinearizabilityVerdict::kNotLinearizable;
      v.explanation = check.explain();
      return v;
    }
    begin = end;
  }
  return v;
}

} // namespace memlayout::trees::bench
