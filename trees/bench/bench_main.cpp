// memlayout-bench: the setbench-style harness over the trees of the study
// (docs/trees.md). Exit status: 0, 1 when --check fails, 2 on bad arguments.
#include "bench_options.h"
#include "bench_report.h"
#include "bench_run.h"

#include <iostream>
#include <new>
#include <stdexcept>

using namespace memlayout::trees;
using namespace memlayout::trees::bench;

int main(int argc, char **argv) {
  BenchOptions o;
  if (int rc = parse_bench_command_line(argc, argv, o); rc >= 0)
    return rc;
  if (o.list) {
    for (const TreeInfo &t : all_trees())
      std::cout << t.name << "\t" << t.description << "\n";
    return 0;
  }
  BenchResult r;
  try {
    r = run_benchmark(o);
  } catch (const std::runtime_error &e) { // --htm rtm on a CPU without RTM
    std::cerr << "memlayout-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc &) {
    std::cerr << "memlayout-bench: out of memory (key range " << o.key_range
              << (o.check ? ", with --check's per-key accounting" : "") << ")\n";
    return 1;
  }
  if (o.format == OutputFormat::kJson)
    print_json(o, r, std::cout);
  else
    print_text(o, r, std::cout);
  return r.check == CheckState::kFailed ? 1 : 0;
}
