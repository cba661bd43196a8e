// How a search moves down one level in every tree: both child words are
// loaded, then one is chosen, so that the load of the next node does not wait
// for the key comparison. Indexing the child array by the comparison, or
// choosing the child's address before loading it, puts the comparison
// between a node's load and its child's: 1.4x slower per level on a tree in
// cache (ticket, 2 K keys). The published implementations' searches load
// both children (bst-tk) or branch, which does not wait either.
#pragma once

#include <atomic>

namespace memlayout::trees {

template <class T>
T load_child(const std::atomic<T> &left, const std::atomic<T> &right, bool go_right,
             std::memory_order order = std::memory_order_acquire) {
  T l = left.load(order);
  T r = right.load(order);
  return go_right ? r : l;
}

} // namespace memlayout::trees
