// Every form of operator new and delete, standard containers, threads and
// exceptions: what a C++ program does to the allocator.
//
//   cxx_alloc LOG
//
// stdout: a deterministic summary; LOG: the allocations made on purpose
// (ml_log.h), each with the operator the compiler calls for it.
#include "ml_log.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#define NOINLINE __attribute__((noinline, noclone))

namespace shapes {

struct Node {
  Node *left = nullptr, *right = nullptr;
  long key = 0;
  double weight = 1.5;
};

// Non-trivial destructor: new[] stores the element count in a cookie before
// the elements, so the block starts sizeof(size_t) before the pointer.
struct Counted {
  static long live;
  long id;
  Counted() : id(++live) {}
  ~Counted() { --live; }
};
long Counted::live = 0;

struct alignas(64) Line64 {
  char bytes[40];
};
struct alignas(128) Pair128 {
  long a, b;
  ~Pair128() { a = b = 0; }
};
struct alignas(4096) Page4k {
  char data[100];
};

} // namespace shapes

using namespace shapes;

static volatile size_t g_huge = size_t(1) << 62; // no allocator can serve this

NOINLINE Node *mlx_make_node(long key) {
  Node *n = new Node;
  n->key = key;
  ml_log_alloc("new", "mlx_make_node", n, sizeof(Node), 0, 0);
  return n;
}

NOINLINE void mlx_drop_node(Node *n) {
  ml_log_free("delete(sized)", n);
  delete n;
}

NOINLINE int *mlx_make_ints(size_t count) {
  int *a = new int[count];
  for (size_t i = 0; i < count; ++i)
    a[i] = static_cast<int>(i);
  ml_log_alloc("new[]", "mlx_make_ints", a, count * sizeof(int), 0, 0);
  return a;
}

NOINLINE void mlx_drop_ints(int *a) {
  ml_log_free("delete[]", a);
  delete[] a;
}

NOINLINE Counted *mlx_make_counted(size_t count) {
  Counted *c = new Counted[count];
  ml_log_alloc("new[]", "mlx_make_counted", reinterpret_cast<char *>(c) - sizeof(size_t),
               count * sizeof(Counted) + sizeof(size_t), 0, 0);
  return c;
}

NOINLINE void mlx_drop_counted(Counted *c) {
  ml_log_free("delete[](sized)", reinterpret_cast<char *>(c) - sizeof(size_t));
  delete[] c;
}

NOINLINE Line64 *mlx_make_line() {
  Line64 *l = new Line64;
  l->bytes[0] = 1;
  ml_log_alloc("new(align)", "mlx_make_line", l, sizeof(Line64), 0, 64);
  return l;
}

NOINLINE void mlx_drop_line(Line64 *l) {
  ml_log_free("delete(sized,align)", l);
  delete l;
}

NOINLINE Line64 *mlx_make_lines(size_t count) {
  Line64 *l = new Line64[count];
  ml_log_alloc("new[](align)", "mlx_make_lines", l, count * sizeof(Line64), 0, 64);
  return l;
}

NOINLINE void mlx_drop_lines(Line64 *l) {
  ml_log_free("delete[](align)", l);
  delete[] l;
}

NOINLINE Pair128 *mlx_make_pairs(size_t count) {
  // Over-aligned and non-trivially destructible: the cookie takes a whole
  // alignment unit in front of the elements.
  Pair128 *p = new Pair128[count];
  ml_log_alloc("new[](align)", "mlx_make_pairs", reinterpret_cast<char *>(p) - alignof(Pair128),
               count * sizeof(Pair128) + alignof(Pair128), 0, 128);
  return p;
}

NOINLINE void mlx_drop_pairs(Pair128 *p) {
  ml_log_free("delete[](sized,align)", reinterpret_cast<char *>(p) - alignof(Pair128));
  delete[] p;
}

NOINLINE Page4k *mlx_make_page() {
  Page4k *p = new Page4k;
  if (reinterpret_cast<uintptr_t>(p) % 4096)
    throw std::logic_error("misaligned Page4k");
  ml_log_alloc("new(align)", "mlx_make_page", p, sizeof(Page4k), 0, 4096);
  return p;
}

NOINLINE void mlx_drop_page(Page4k *p) {
  ml_log_free("delete(sized,align)", p);
  delete p;
}

NOINLINE Node *mlx_make_node_nothrow(long key) {
  Node *n = new (std::nothrow) Node;
  if (!n)
    return nullptr;
  n->key = key;
  ml_log_alloc("new(nothrow)", "mlx_make_node_nothrow", n, sizeof(Node), 0, 0);
  return n;
}

NOINLINE double *mlx_make_doubles_nothrow(size_t count) {
  double *d = new (std::nothrow) double[count];
  if (!d)
    return nullptr;
  d[0] = 0.25;
  ml_log_alloc("new[](nothrow)", "mlx_make_doubles_nothrow", d, count * sizeof(double), 0, 0);
  return d;
}

NOINLINE Line64 *mlx_make_line_nothrow() {
  Line64 *l = new (std::nothrow) Line64;
  if (!l)
    return nullptr;
  ml_log_alloc("new(align,nothrow)", "mlx_make_line_nothrow", l, sizeof(Line64), 0, 64);
  return l;
}

NOINLINE Line64 *mlx_make_lines_nothrow(size_t count) {
  Line64 *l = new (std::nothrow) Line64[count];
  if (!l)
    return nullptr;
  ml_log_alloc("new[](align,nothrow)", "mlx_make_lines_nothrow", l, count * sizeof(Line64), 0, 64);
  return l;
}

// The operators called by name, with the sizes and alignments given.
NOINLINE void *mlx_raw_operators(std::vector<void *> &out) {
  void *a = ::operator new(200);
  ml_log_alloc("new", "mlx_raw_operators", a, 200, 0, 0);
  void *b = ::operator new[](300);
  ml_log_alloc("new[]", "mlx_raw_operators", b, 300, 0, 0);
  void *c = ::operator new(512, std::align_val_t(256));
  ml_log_alloc("new(align)", "mlx_raw_operators", c, 512, 0, 256);
  void *d = ::operator new[](1000, std::align_val_t(32));
  ml_log_alloc("new[](align)", "mlx_raw_operators", d, 1000, 0, 32);
  out.insert(out.end(), {a, b, c, d});
  return a;
}

NOINLINE void mlx_raw_deletes(std::vector<void *> &v) {
  ml_log_free("delete(sized)", v[0]);
  ::operator delete(v[0], 200);
  ml_log_free("delete[](sized)", v[1]);
  ::operator delete[](v[1], 300);
  ml_log_free("delete(sized,align)", v[2]);
  ::operator delete(v[2], 512, std::align_val_t(256));
  ml_log_free("delete[](align)", v[3]);
  ::operator delete[](v[3], std::align_val_t(32));
}

// Failing allocations: the standard's behaviour, unchanged by recording.
NOINLINE int mlx_failures() {
  int ok = 0;
  try {
    char *p = new char[g_huge];
    p[0] = 1;
  } catch (const std::bad_alloc &) {
    ok |= 1;
  }
  try {
    void *p = ::operator new(g_huge, std::align_val_t(64));
    ::operator delete(p, std::align_val_t(64));
  } catch (const std::bad_alloc &) {
    ok |= 2;
  }
  if (new (std::nothrow) char[g_huge] == nullptr)
    ok |= 4;
  if (::operator new(g_huge, std::align_val_t(128), std::nothrow) == nullptr)
    ok |= 8;
  return ok;
}

NOINLINE long mlx_containers(int seed) {
  std::map<std::string, std::vector<int>> index;
  std::string text;
  for (int i = 0; i < 3000; ++i) {
    std::string key = "key-" + std::to_string((i * 7919 + seed) % 1000);
    index[key].push_back(i);
    text += key.substr(0, 2);
    if (i % 100 == 99)
      text.clear();
  }
  long sum = 0;
  for (auto &[k, v] : index)
    sum += static_cast<long>(k.size() * v.size()) + v.back();
  std::vector<std::unique_ptr<Node>> owned;
  for (int i = 0; i < 500; ++i)
    owned.push_back(std::make_unique<Node>());
  std::shared_ptr<Line64> shared = std::make_shared<Line64>();
  return sum + static_cast<long>(owned.size()) + (shared.use_count() == 1);
}

NOINLINE int mlx_exceptions() {
  int caught = 0;
  for (int i = 0; i < 50; ++i) {
    try {
      if (i % 2)
        throw std::runtime_error("odd number " + std::to_string(i) + std::string(100, '!'));
      throw i;
    } catch (const std::runtime_error &e) {
      caught += e.what()[0] == 'o';
    } catch (int) {
      caught += 1;
    }
  }
  return caught;
}

static std::mutex g_out;
static long g_thread_sum = 0;

void thread_body(int index) {
  ml_log_thread("std::thread");
  std::vector<Node *> nodes;
  for (int i = 0; i < 400; ++i)
    nodes.push_back(mlx_make_node(index * 1000 + i));
  long local = mlx_containers(index);
  for (Node *n : nodes) {
    local += n->key;
    mlx_drop_node(n);
  }
  std::lock_guard<std::mutex> lock(g_out);
  g_thread_sum += local;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LOG\n", argv[0]);
    return 2;
  }
  ml_log_thread("main");
  long sum = 0;
  for (int round = 0; round < 20; ++round) {
    Node *n = mlx_make_node(round);
    int *ints = mlx_make_ints(10 + static_cast<size_t>(round) * 3);
    Counted *c = mlx_make_counted(3 + static_cast<size_t>(round));
    Line64 *l = mlx_make_line();
    Line64 *ls = mlx_make_lines(2 + static_cast<size_t>(round));
    Pair128 *ps = mlx_make_pairs(1 + static_cast<size_t>(round) % 4);
    Page4k *pg = mlx_make_page();
    Node *nn = mlx_make_node_nothrow(round);
    double *dd = mlx_make_doubles_nothrow(5 + static_cast<size_t>(round));
    Line64 *ln = mlx_make_line_nothrow();
    Line64 *lns = mlx_make_lines_nothrow(3);
    if (!nn || !dd || !ln || !lns)
      return 1;
    sum += n->key + ints[9] + c[0].id % 3 + l->bytes[0] + ps[0].a * 0 + nn->key + pg->data[0];
    mlx_drop_node(n);
    mlx_drop_ints(ints);
    mlx_drop_counted(c);
    mlx_drop_line(l);
    mlx_drop_lines(ls);
    mlx_drop_pairs(ps);
    mlx_drop_page(pg);
    mlx_drop_node(nn);
    ml_log_free("delete[]", dd);
    delete[] dd;
    mlx_drop_line(ln);
    mlx_drop_lines(lns);
  }
  std::vector<void *> raw;
  mlx_raw_operators(raw);
  mlx_raw_deletes(raw);

  int failures = mlx_failures();
  int caught = mlx_exceptions();
  long containers = mlx_containers(0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back(thread_body, i + 1);
  for (std::thread &t : threads)
    t.join();

  std::printf("sum=%ld counted_live=%ld failures=%#x exceptions=%d containers=%ld threads=%ld\n",
              sum, Counted::live, failures, caught, containers, g_thread_sum);
  std::fprintf(stderr, "cxx_alloc: done\n");
  if (ml_log_write(argv[1]) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  return failures == 0xf && caught == 50 ? 0 : 1;
}
