// Callbacks written as lambdas, as event handlers and loaders are: two in
// main with the same signature, inlined into it at -O2, and one in a loader
// taking other parameter types, kept out of line. GCC names them
// main::{lambda(long)#1}, main::{lambda(long)#2} and
// load(long)::{lambda(char const*, unsigned long)#1}.
//
//   lambdas [N]   prints the sum of what the callbacks made
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Order {
  long id, px, qty, side, ts, flags;
};
struct Fill {
  long oid, px, qty, ts, venue, seq;
};
struct Note {
  const char *text;
  unsigned long length;
};

static std::vector<Note *> g_notes;

__attribute__((noinline)) long load(long n) {
  auto add_note = [](const char *text, unsigned long length) {
    g_notes.push_back(new Note{text, length});
  };
  for (long i = 0; i < n; ++i)
    add_note("note", static_cast<unsigned long>(i));
  return static_cast<long>(g_notes.size());
}

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 5000;
  std::vector<Order *> orders;
  std::vector<Fill *> fills;
  orders.reserve(static_cast<size_t>(n));
  fills.reserve(static_cast<size_t>(n));
  auto add_order = [&](long i) { orders.push_back(new Order{i, i, 1, 0, 0, 0}); };
  auto add_fill = [&](long i) { fills.push_back(new Fill{i, i, 2, 0, 0, 0}); };
  for (long i = 0; i < n; ++i) {
    add_order(i);
    add_fill(i);
  }
  long sum = load(n / 2);
  for (const Order *o : orders)
    sum += o->px;
  for (const Fill *f : fills)
    sum += f->qty;
  std::printf("%ld\n", sum);
  return 0;
}
