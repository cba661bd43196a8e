// The shape the study's BSTs share, written once: a tree (a class template
// over its layout L) derives from Bst<Tree, L> and writes only its algorithm.
//
//   template <class L> class Citrus final : public Bst<Citrus, L> {
//   public:
//     explicit Citrus(AllocPolicy policy); // : Bst<Citrus, L>("citrus", policy)
//     ~Citrus() override;                  // frees its nodes: free_nodes(root_)
//     bool lookup(Key key, Value *value) override;
//     bool insert(Key key, Value value) override;
//     bool remove(Key key) override;
//     std::string check_structure() const override;
//     // What the quiescent walks below read:
//     static Node *child(const Node *n, bool right); // nullptr when there is none
//     const Node *key_root() const;                  // the subtree holding the keys
//     // n's key and value (always), and whether n holds a user key (not a
//     // routing node, a marked one or a sentinel).
//     static bool entry(const Node *n, Key *key, Value *value);
//   };
//
// lookup, insert and remove override ConcurrentMap's directly: the harness's
// one virtual call lands in the tree's own code, and a caller holding the
// (final) tree type calls it without any. Bst supplies what every tree did
// the same way: the "node" record kind, freeing and retiring nodes, for_each
// (an in-order walk that visits the nodes entry() accepts), the walk a
// check_structure makes with each node's key bounds, and the node counts
// the tests read. Code in the tree reaches these members through
// this-> (Bst is a dependent base).
#pragma once

#include "epoch.h"
#include "map_with_records.h"
#include "structure_errors.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace memlayout::trees {

template <template <class> class TreeOf, class L> class Bst : public MapWithRecords {
  using Tree = TreeOf<L>;
  using Node = typename L::Node;

public:
  // Quiescent: the keys entry() accepts, in the order of an in-order walk of
  // key_root() (ascending, for a search tree).
  void for_each(const std::function<void(Key, Value)> &visit) const override {
    Key key;
    Value value;
    walk_in_order(tree().key_root(), [&](const Node *n) {
      if (Tree::entry(n, &key, &value))
        visit(key, value);
    });
  }

  // Quiescent, for tests: nodes under key_root(), and the nodes on its
  // longest path (0 when it is empty).
  size_t node_count() const {
    size_t count = 0;
    walk_nodes(tree().key_root(), [&](const Node *) { ++count; });
    return count;
  }
  size_t height() const {
    size_t tallest = 0;
    std::vector<std::pair<const Node *, size_t>> stack;
    if (const Node *top = tree().key_root())
      stack.emplace_back(top, 1);
    while (!stack.empty()) {
      auto [n, h] = stack.back();
      stack.pop_back();
      tallest = std::max(tallest, h);
      for (bool right : {false, true})
        if (const Node *c = Tree::child(n, right))
          stack.emplace_back(c, h + 1);
    }
    return tallest;
  }

protected:
  // tree: the name its pools are named after; registers the record kind
  // "node" first, so a tree's other kinds follow it.
  Bst(std::string_view tree, AllocPolicy policy)
      : MapWithRecords(tree, policy), node_kind_(records_.add_kind("node", sizeof(Node))) {}

  // Allocating stays in the tree's new_node, written there as
  // this->records_.allocate(this->node_kind_, sizeof(Node)): that line is the
  // allocation site `memlayout report` names and `memlayout structs` ties to
  // the record's type (a helper here would take the site from the tree).
  void delete_node(void *n) { records_.deallocate(node_kind_, n); }
  // Inside an EpochGuard, once n is unreachable.
  void retire_node(Node *n, bool one_more_epoch = false) {
    retire(records_, node_kind_, n, one_more_epoch);
  }

  // Quiescent, for destructors: calls visit(n) on top and every node below
  // it, reading n's children first, so visit may free n.
  template <class NodePtr, class Visit> static void walk_nodes(NodePtr top, Visit &&visit) {
    std::vector<NodePtr> stack;
    if (top)
      stack.push_back(top);
    while (!stack.empty()) {
      NodePtr n = stack.back();
      stack.pop_back();
      for (bool right : {false, true})
        if (Node *c = Tree::child(n, right))
          stack.push_back(c);
      visit(n);
    }
  }
  // Frees top and every node below it, then what the epochs still hold.
  void free_nodes(Node *top) {
    walk_nodes(top, [&](Node *n) { delete_node(n); });
    reclaim_all();
  }

  // Quiescent, for check_structure: calls check(n, key, lo, hi) on every
  // node under key_root() (key: what entry() reads), with the bounds its key
  // must respect: a node with key k hands (lo, k) to its left child and
  // (k, hi) to its right one; whether a bound is open or closed is the
  // tree's to check. A node reached twice (a cycle or a shared subtree) is
  // reported and ends the walk.
  template <class Check>
  void walk_in_bounds(Key lo, Key hi, StructureErrors &errors, Check &&check) const {
    struct Frame {
      const Node *n;
      Key lo, hi;
    };
    std::vector<Frame> stack;
    std::unordered_set<const Node *> seen;
    if (const Node *top = tree().key_root())
      stack.push_back({top, lo, hi});
    while (!stack.empty()) {
      Frame f = stack.back();
      stack.pop_back();
      Key key;
      Value value;
      Tree::entry(f.n, &key, &value);
      if (!seen.insert(f.n).second) {
        errors.add("node " + std::to_string(key) + ": reached twice (cycle or shared subtree)");
        return;
      }
      check(f.n, key, f.lo, f.hi);
      if (const Node *r = Tree::child(f.n, true))
        stack.push_back({r, key, f.hi});
      if (const Node *l = Tree::child(f.n, false))
        stack.push_back({l, f.lo, key});
    }
  }

  template <class Visit> static void walk_in_order(const Node *top, Visit &&visit) {
    std::vector<const Node *> stack;
    const Node *n = top;
    while (n || !stack.empty()) {
      for (; n; n = Tree::child(n, false))
        stack.push_back(n);
      n = stack.back();
      stack.pop_back();
      visit(n);
      n = Tree::child(n, true);
    }
  }

  const RecordAllocator::Kind node_kind_;

private:
  const Tree &tree() const { return static_cast<const Tree &>(*this); }
};

} // namespace memlayout::trees
