// memlayout-bench's output: a human table or JSON (schema
// "memlayout.bench/1", described in docs/trees.md).
#pragma once

#include "bench_options.h"
#include "bench_run.h"

#include <ostream>

namespace memlayout::trees::bench {

void print_text(const BenchOptions &o, const BenchResult &r, std::ostream &out);
void print_json(const BenchOptions &o, const BenchResult &r, std::ostream &out);

} // namespace memlayout::trees::bench
