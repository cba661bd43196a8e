// What a tree's check_structure reports: the first few problems it found,
// each naming the node's key, then how many more there were. A broken tree
// tends to break the same way at many nodes; the first few say enough.
#pragma once

#include <string>
#include <string_view>

namespace memlayout::trees {

class StructureErrors {
public:
  static constexpr int kShown = 8;

  // For trees whose nodes keep their key in a `key` field.
  template <class Node> void fail(const Node *n, std::string_view what) {
    add("node " + std::to_string(n->key) + ": " + std::string(what));
  }
  void add(std::string_view problem) {
    if (count_++ < kShown)
      (text_ += problem) += "; ";
  }
  bool none() const { return count_ == 0; }
  // Empty when nothing failed.
  std::string report() const {
    if (count_ <= kShown)
      return text_;
    return text_ + "(" + std::to_string(count_ - kShown) + " more)";
  }

private:
  std::string text_;
  int count_ = 0;
};

} // namespace memlayout::trees
