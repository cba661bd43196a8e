// What the C++ standard library allocates on its callers' behalf, as field
// code has it at -O2: a std::function holding a lambda whose captures do not
// fit its buffer, a string built with operator+, and a vector whose elements
// come from a custom allocator. The library's members are inlined into the
// callers, often without DWARF linkage names (members of classes templated
// on lambdas): the sites are record_order, label_order and book_orders.
//
//   mlt_library_sites [N]   (default 20000)
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

template <class T> struct Arena {
  using value_type = T;
  Arena() = default;
  template <class U> Arena(const Arena<U> &) {}
  T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T))); }
  void deallocate(T *p, std::size_t) { ::operator delete(p); }
};
template <class T, class U> bool operator==(const Arena<T> &, const Arena<U> &) { return true; }
template <class T, class U> bool operator!=(const Arena<T> &, const Arena<U> &) { return false; }

struct Order {
  long id;
  double price;
  char side;
};

std::vector<std::function<long()>> journal;
std::vector<std::string> labels;

__attribute__((noinline)) void record_order(long id) {
  Order o{id, static_cast<double>(id) * 0.5, 'b'};
  long seen[3] = {id, id + 1, id + 2};
  journal.emplace_back([o, seen]() { return o.id + seen[2]; });
}

__attribute__((noinline)) void label_order(long id) {
  labels.push_back("order " + std::to_string(id) + " from the desk");
}

__attribute__((noinline)) std::vector<Order, Arena<Order>> *book_orders(int n) {
  auto *book = new std::vector<Order, Arena<Order>>();
  for (int i = 0; i < n; ++i)
    book->push_back({i, i * 0.25, 's'});
  return book;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  journal.reserve(static_cast<size_t>(n));
  labels.reserve(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) {
    record_order(i);
    label_order(i);
  }
  std::vector<Order, Arena<Order>> *book = book_orders(n);
  long sum = 0;
  for (auto &f : journal)
    sum += f();
  std::printf("%d %ld %zu %zu\n", n, sum, labels.size(), book->size());
  return 0;
}
