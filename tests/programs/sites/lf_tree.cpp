// The same pattern in C++: a tree class whose inline member functions build
// its records, nodes with `new` and operation records with std::make_unique
// (ownership handed to the node), as modern C++ code writes it.
//
//   lf_tree [N]   (default 100000 inserts of random keys)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

template <class Key> class LfTree {
public:
  struct Operation;
  struct Node {
    Key key;
    long value;
    Node *left = nullptr, *right = nullptr;
    Operation *op = nullptr;
    long pad[2] = {};
  };
  struct Operation {
    int kind = 0;
    Node *dest = nullptr, *expected = nullptr, *update = nullptr;
    long seq = 0;
    long pad[3] = {};
  };

  bool insert(Key key, long value) {
    Node **at = &root_, *parent = nullptr;
    while (*at) {
      parent = *at;
      if (key == parent->key)
        return false;
      at = key < parent->key ? &parent->left : &parent->right;
    }
    Node *n = new_node(key, value);
    n->op = new_child_op(parent, n).release();
    *at = n;
    ++size_;
    return true;
  }

  long sum() const { return sum(root_); }
  long size() const { return size_; }

private:
  Node *new_node(Key key, long value) { return new Node{key, value}; }

  std::unique_ptr<Operation> new_child_op(Node *dest, Node *update) {
    auto op = std::make_unique<Operation>();
    op->kind = 1;
    op->dest = dest;
    op->update = update;
    return op;
  }

  static long sum(const Node *n) {
    long s = 0;
    while (n) {
      s += static_cast<long>(n->key) + sum(n->left);
      n = n->right;
    }
    return s;
  }

  Node *root_ = nullptr;
  long size_ = 0;
};

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 100000;
  LfTree<long> tree;
  std::uint64_t x = 88172645463325252ull;
  for (long i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    tree.insert(static_cast<long>(x % static_cast<std::uint64_t>(4 * n)), i);
  }
  std::printf("%ld keys, sum %ld\n", tree.size(), tree.sum());
  return 0;
}
