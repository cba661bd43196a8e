// Runs `memlayout dump` on generated traces and checks its output as a user's
// script would: every jsonl line parses and carries the contract's fields.
// usage: inspector_dump_cli_test MEMLAYOUT WORKDIR
#include "trace_builder.h"

#include <llvm/Support/JSON.h>

#include <elf.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace memlayout;
using memlayout::testing::Block;
using memlayout::testing::Bytes;
using memlayout::testing::ModuleSpec;
using memlayout::testing::TraceBuilder;
using trace::Api;

extern "C" __attribute__((noinline)) int memlayout_cli_probe_caller(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace {

int failures = 0;

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++failures;                                                                                  \
      std::cerr << __FILE__ << ":" << __LINE__ << ": failed: " #cond "\n";                         \
    }                                                                                              \
  } while (0)

struct Run {
  int status = -1;
  std::vector<std::string> lines;
  std::string err;
};

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Run run(const std::string &cmd, const std::string &errfile) {
  Run r;
  FILE *p = popen((cmd + " 2>" + errfile).c_str(), "r");
  if (!p)
    return r;
  std::string line;
  char buf[1 << 16];
  while (fgets(buf, sizeof buf, p)) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      r.lines.push_back(line);
      line.clear();
    }
  }
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = slurp(errfile);
  return r;
}

std::vector<llvm::json::Object> parse_all(const Run &r) {
  std::vector<llvm::json::Object> out;
  for (const std::string &l : r.lines) {
    auto v = llvm::json::parse(l);
    if (!v) {
      ++failures;
      std::cerr << "not JSON: " << l << ": " << llvm::toString(v.takeError()) << "\n";
      continue;
    }
    if (auto *o = v->getAsObject())
      out.push_back(std::move(*o));
    else {
      ++failures;
      std::cerr << "not an object: " << l << "\n";
    }
  }
  return out;
}

std::string s(const llvm::json::Object &o, const char *k) {
  auto v = o.getString(k);
  return v ? v->str() : "<missing>";
}
int64_t n(const llvm::json::Object &o, const char *k) { return o.getInteger(k).getValueOr(-1); }

const llvm::json::Object *find(const std::vector<llvm::json::Object> &objs, const std::string &ev,
                               int nth = 0) {
  for (const auto &o : objs)
    if (s(o, "ev") == ev && nth-- == 0)
      return &o;
  return nullptr;
}

int collect(struct dl_phdr_info *info, size_t, void *data) {
  auto *mods = static_cast<std::vector<ModuleSpec> *>(data);
  ModuleSpec m;
  m.load_bias = info->dlpi_addr;
  m.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD)
      m.segments.push_back({info->dlpi_phdr[i].p_vaddr, info->dlpi_phdr[i].p_memsz, 5});
  if (mods->empty()) // only the main program: the others are not needed here
    mods->push_back(m);
  return 0;
}

Bytes full_trace(TraceBuilder &t, uint64_t probe_pc) {
  std::vector<ModuleSpec> mods;
  dl_iterate_phdr(collect, &mods);
  t.strings({{1, "phase \"one\"\n"}, {2, "node"}, {3, "worker"}});
  t.stacks({{1, {0x401000, 0x402000}}, {2, {probe_pc}}});
  t.modules(mods);
  t.thread(trace::ThreadEvent::kStart, 1000, 4242, 0);
  t.thread(trace::ThreadEvent::kName, 1000, 4242, 3);
  Block b(1000, 1000, 5000);
  b.alloc(Api::kMalloc, 0x7f0000001000, 24, 32, 1);
  b.alloc(Api::kNewAligned, 0x7f0000002000, 64, 64, 2, 6);
  b.realloc(Api::kRealloc, 0x7f0000001000, 0x7f0000003000, 100, 112, 1);
  b.tick(3000).free(Api::kDelete, 0x7f0000002000);
  b.mark(1).tag(0x7f0000003000, 2);
  b.ext(trace::ExtKind::kFork, 777).ext(trace::ExtKind::kLost, 5);
  b.ext(trace::ExtKind::kSnapshot, 1).free_range(0x7f1000000000, 0x40000000);
  t.events(4242, b);
  t.memory_map(1, 4000, trace::kMapPfns, {{0x1000, 0x3000, 3, 1, 0, {{0, 2, 9}}}});
  t.end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull, 0, 10);
  return t.bytes();
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: inspector_dump_cli_test MEMLAYOUT WORKDIR\n";
    return 2;
  }
  const std::string exe = argv[1], dir = argv[2];
  mkdir(dir.c_str(), 0755);
  const std::string err = dir + "/stderr.txt";
  EXPECT(memlayout_cli_probe_caller(1) == 2);
  // A return address just past the probe's first byte: the symbolizer looks up pc - 1.
  uint64_t probe_pc = reinterpret_cast<uint64_t>(&memlayout_cli_probe_caller) + 1;

  TraceBuilder t;
  Bytes bytes = full_trace(t, probe_pc);
  const std::string good = dir + "/good.mltrace";
  testing::write_file(good, bytes);

  { // jsonl: the contract's fields on every kind of line
    Run r = run(exe + " dump " + good + " --format jsonl", err);
    EXPECT(r.status == 0);
    EXPECT(r.err.empty());
    auto objs = parse_all(r);
    EXPECT(objs.size() == 1 + 1 + 2 + 10 + 1 + 1); // header module threads events map end
    for (const auto &o : objs) {
      EXPECT(o.getString("ev").hasValue());
      EXPECT(o.getInteger("tid").hasValue());
      EXPECT(o.getInteger("ts_ns").hasValue());
    }
    EXPECT(!objs.empty() && s(objs[0], "ev") == "header");
    if (const auto *h = find(objs, "header")) {
      EXPECT(n(*h, "pid") == 4242);
      EXPECT(s(*h, "executable") == "/usr/bin/example");
      EXPECT(h->getBoolean("clock_calibrated") == true);
    }
    const auto *a = find(objs, "alloc");
    EXPECT(a);
    if (a) {
      EXPECT(s(*a, "api") == "malloc");
      EXPECT(s(*a, "ptr") == "0x7f0000001000");
      EXPECT(n(*a, "size") == 24);
      EXPECT(n(*a, "usable") == 32);
      EXPECT(n(*a, "tid") == 4242);
      EXPECT(n(*a, "ts_ns") == 0);
      EXPECT(n(*a, "stack") == 1);
      EXPECT(!a->get("align"));
      const auto *frames = a->getArray("frames");
      EXPECT(frames && frames->size() == 2);
      if (frames && frames->size() == 2)
        EXPECT((*frames)[1].getAsString() == llvm::StringRef("0x402000"));
    }
    if (const auto *al = find(objs, "alloc", 1)) {
      EXPECT(s(*al, "api") == "new(align)");
      EXPECT(n(*al, "align") == 64);
    } else
      EXPECT(!"second alloc");
    if (const auto *re = find(objs, "realloc")) {
      EXPECT(s(*re, "old") == "0x7f0000001000");
      EXPECT(s(*re, "ptr") == "0x7f0000003000");
      EXPECT(n(*re, "size") == 100);
      EXPECT(n(*re, "usable") == 112);
    } else
      EXPECT(!"realloc");
    if (const auto *f = find(objs, "free")) {
      EXPECT(s(*f, "api") == "delete");
      EXPECT(s(*f, "ptr") == "0x7f0000002000");
      EXPECT(n(*f, "ts_ns") == 1000); // 3000 ticks at 3 ticks/ns
      EXPECT(n(*f, "size") == 64);    // what it freed, from its allocation
      EXPECT(n(*f, "usable") == 64);
    } else
      EXPECT(!"free");
    if (const auto *m = find(objs, "mark"))
      EXPECT(s(*m, "name") == "phase \"one\"\n");
    else
      EXPECT(!"mark");
    if (const auto *g = find(objs, "tag")) {
      EXPECT(s(*g, "name") == "node");
      EXPECT(s(*g, "ptr") == "0x7f0000003000");
    } else
      EXPECT(!"tag");
    if (const auto *f = find(objs, "fork"))
      EXPECT(n(*f, "child") == 777);
    else
      EXPECT(!"fork");
    if (const auto *l = find(objs, "lost"))
      EXPECT(n(*l, "count") == 5);
    else
      EXPECT(!"lost");
    if (const auto *sn = find(objs, "snapshot"))
      EXPECT(n(*sn, "id") == 1);
    else
      EXPECT(!"snapshot");
    if (const auto *fr = find(objs, "free_range")) {
      EXPECT(s(*fr, "ptr") == "0x7f1000000000");
      EXPECT(n(*fr, "length") == 0x40000000);
    } else
      EXPECT(!"free_range");
    if (const auto *th = find(objs, "thread", 1)) {
      EXPECT(s(*th, "what") == "name");
      EXPECT(s(*th, "name") == "worker");
    } else
      EXPECT(!"thread");
    if (const auto *mo = find(objs, "module")) {
      EXPECT(s(*mo, "what") == "loaded");
      EXPECT(s(*mo, "path") == "/proc/self/exe");
      EXPECT(mo->getArray("segments") && !mo->getArray("segments")->empty());
    } else
      EXPECT(!"module");
    if (const auto *mm = find(objs, "memory_map")) {
      EXPECT(n(*mm, "regions") == 1);
      EXPECT(n(*mm, "resident_pages") == 2);
      EXPECT(mm->getBoolean("pfns") == true);
    } else
      EXPECT(!"memory_map");
    if (const auto *e = find(objs, "end")) {
      EXPECT(n(*e, "exit_status") == 0);
      EXPECT(n(*e, "events") == 10);
      EXPECT(n(*e, "ts_ns") == 1'000'000'000);
    } else
      EXPECT(!"end");
  }

  { // --symbolize resolves a frame in this very binary (the module path is /proc/self/exe
    // of the dump process, so point it at this executable instead)
    TraceBuilder ts;
    std::vector<ModuleSpec> mods;
    dl_iterate_phdr(collect, &mods);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    EXPECT(len > 0);
    mods[0].path = std::string(self, len > 0 ? static_cast<size_t>(len) : 0);
    ts.stacks({{2, {probe_pc}}}).modules(mods);
    Block b(1000, 1000, 5000);
    b.alloc(Api::kMalloc, 0x10, 8, 8, 2);
    ts.events(1, b).end(2000, 6000);
    const std::string sym = dir + "/sym.mltrace";
    testing::write_file(sym, ts.bytes());
    Run r = run(exe + " dump " + sym + " --format=jsonl --symbolize", err);
    EXPECT(r.status == 0);
    auto objs = parse_all(r);
    const auto *a = find(objs, "alloc");
    EXPECT(a);
    const llvm::json::Array *frames = a ? a->getArray("frames") : nullptr;
    EXPECT(frames && !frames->empty());
    if (frames && !frames->empty()) {
      const auto *f = frames->back().getAsObject();
      EXPECT(f && f->getString("function") == llvm::StringRef("memlayout_cli_probe_caller"));
      EXPECT(f && f->getString("file") && f->getString("file")->contains("dump_cli_test.cpp"));
      EXPECT(f && f->getInteger("line").getValueOr(0) > 0);
    }
    Run text = run(exe + " dump " + sym + " --symbolize", err);
    EXPECT(text.status == 0);
    bool named = false;
    for (const auto &l : text.lines)
      named |= l.find("memlayout_cli_probe_caller (dump_cli_test.cpp:") != std::string::npos;
    EXPECT(named);
  }

  { // text format
    Run r = run(exe + " dump " + good, err);
    EXPECT(r.status == 0);
    bool alloc = false;
    for (const auto &l : r.lines)
      alloc |= l.find("alloc") != std::string::npos && l.find("malloc") != std::string::npos &&
               l.find("0x7f0000001000") != std::string::npos &&
               l.find("24/32") != std::string::npos;
    EXPECT(alloc);
    bool range = false;
    for (const auto &l : r.lines)
      range |= l.find("free_range") != std::string::npos &&
               l.find("seg_pool") != std::string::npos &&
               l.find("0x7f1000000000 length=1073741824") != std::string::npos;
    EXPECT(range);
  }

  { // a trace whose writer was killed: everything readable, then exit 1
    Bytes cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(t.record_offset(6)));
    const std::string partial = dir + "/partial.mltrace";
    testing::write_file(partial, cut);
    Run r = run(exe + " dump " + partial + " --format jsonl", err);
    EXPECT(r.status == 1);
    EXPECT(r.err.find("truncated at offset " + std::to_string(cut.size())) != std::string::npos);
    EXPECT(r.err.find("killed?") != std::string::npos);
    auto objs = parse_all(r);
    EXPECT(find(objs, "snapshot") != nullptr);
    EXPECT(find(objs, "end") == nullptr);
  }

  { // usage errors and foreign files exit 2 with a message
    Run r = run(exe + " dump " + good + " --bogus", err);
    EXPECT(r.status == 2);
    EXPECT(r.err.find("unknown option '--bogus'") != std::string::npos);
    EXPECT(r.err.find("Run 'memlayout dump --help' for the options.") != std::string::npos);
    EXPECT(r.lines.empty());
    r = run(exe + " dump", err);
    EXPECT(r.status == 2);
    r = run(exe + " dump " + good + " --format xml", err);
    EXPECT(r.status == 2);
    r = run(exe + " dump " + exe, err);
    EXPECT(r.status == 2);
    EXPECT(r.err.find(exe + ": offset 0: not a memlayout trace") != std::string::npos);
    r = run(exe + " dump --help", err);
    EXPECT(r.status == 0);
    bool usage_line = false;
    for (const auto &l : r.lines)
      usage_line = usage_line || l.find("Usage: memlayout dump") == 0;
    EXPECT(usage_line);
  }

  { // a closed pipe ends the dump quietly
    TraceBuilder big;
    Block b(1000, 1000, 5000);
    for (int i = 0; i < 200000; ++i)
      b.alloc(Api::kMalloc, 0x100000 + 16 * static_cast<uint64_t>(i), 16, 16, 1);
    big.events(1, b).end(2000, 6000);
    const std::string bigf = dir + "/big.mltrace";
    testing::write_file(bigf, big.bytes());
    Run r = run("bash -c 'set -o pipefail; " + exe + " dump " + bigf + " --format jsonl | head -2'",
                err);
    EXPECT(r.status == 0);
    EXPECT(r.lines.size() == 2);
    EXPECT(r.err.empty());
  }

  { // objects whose stacks the tables lack, and a thread record of no known
    // kind: the report says so, not only "??"
    TraceBuilder t;
    t.stacks({{1, {0x401000}}});
    t.thread(trace::ThreadEvent::kStart, 1000, 4242, 0);
    t.thread(static_cast<trace::ThreadEvent>(9), 1000, 4243, 0);
    Block b(1000, 1000, 5000);
    b.alloc(Api::kMalloc, 0x7f0000001000, 24, 32, 1).alloc(Api::kMalloc, 0x7f0000002000, 24, 32, 7);
    t.events(4242, b).end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull, 0, 2);
    const std::string f = dir + "/stackless.mltrace";
    testing::write_file(f, t.bytes());
    Run r = run(exe + " report " + f, err);
    EXPECT(r.status == 0);
    bool stackless = false, kind = false;
    for (const auto &l : r.lines)
      stackless = stackless || l.find("1 live objects name call stacks the trace's stack "
                                      "tables do not hold") != std::string::npos;
    kind = r.err.find("thread record of unknown kind 9 (thread 4243)") != std::string::npos;
    EXPECT(stackless);
    EXPECT(kind);
    // The end record counts 4 events the recorder lost: the report says so.
    bool lost = false;
    for (const auto &l : r.lines)
      lost = lost || l.find("note: 4 events were lost") != std::string::npos;
    EXPECT(lost);
  }

  { // a free of an address never allocated: the note names its causes, and
    // the way to exact stamps only where the trace sampled less than every event
    for (uint32_t period : {128u, 1u}) {
      TraceBuilder t;
      t.u32(trace::HeaderTag::kTimestampPeriod, period);
      t.stacks({{1, {0x401000}}});
      Block b(1000, 1000, 5000);
      b.free(Api::kFree, 0x7f0000005000).alloc(Api::kMalloc, 0x7f0000001000, 24, 32, 1);
      t.events(4242, b).end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull);
      const std::string f = dir + "/unknown_free" + std::to_string(period) + ".mltrace";
      testing::write_file(f, t.bytes());
      Run r = run(exe + " report " + f, err);
      EXPECT(r.status == 0);
      bool note = false, hint = false;
      for (const auto &l : r.lines) {
        note =
            note || l.find("1 frees of addresses not allocated before them") != std::string::npos;
        hint = hint || l.find("MEMLAYOUT_TICK_PERIOD=1") != std::string::npos;
      }
      EXPECT(note);
      EXPECT(hint == (period > 1));
    }
  }

  { // a thread's frees of another thread's block: file order puts the blocks
    // where their threads flushed them, so a free can come before the
    // allocation it frees, or after another allocation of its address
    TraceBuilder t;
    t.stacks({{1, {0x401000}}});
    const uint64_t p = 0x7f0000001000;
    Block first(1020, 1000, 5000), other(1010, 1000, 5000), second(1150, 1000, 5000);
    first.free(Api::kFree, p).tick(80).alloc(Api::kMalloc, p, 24, 32, 1); // frees 102's at 1020
    other.alloc(Api::kMalloc, p, 56, 64, 1);                              // at 1010
    second.free(Api::kFree, p);                                           // its own, at 1150
    t.events(101, first).events(102, other).events(101, second);
    t.end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull);
    const std::string f = dir + "/across_threads.mltrace";
    testing::write_file(f, t.bytes());
    Run r = run(exe + " dump " + f + " --format jsonl", err);
    EXPECT(r.status == 0);
    auto objs = parse_all(r);
    const auto *a = find(objs, "free"), *b = find(objs, "free", 1);
    EXPECT(a && b);
    if (a && b) {
      EXPECT(n(*a, "tid") == 101);
      EXPECT(n(*a, "size") == 56);
      EXPECT(n(*a, "usable") == 64);
      EXPECT(n(*b, "size") == 24);
      EXPECT(n(*b, "usable") == 32);
    }
  }

  { // one stamp for several events (sampled timestamps): a thread allocates
    // an address, frees it, allocates it again, and another thread frees the
    // second object. Keyed by (thread, address, stamp), the first allocation
    // was taken for the one freed elsewhere, and the thread's own free had
    // no size.
    TraceBuilder t;
    t.u32(trace::HeaderTag::kTimestampPeriod, 128);
    t.stacks({{1, {0x401000}}});
    const uint64_t p = 0x7f0000001000;
    Block mine(1000, 1000, 5000), theirs(1010, 1000, 5000);
    mine.alloc(Api::kMalloc, p, 24, 32, 1).free(Api::kFree, p).alloc(Api::kMalloc, p, 40, 48, 1);
    theirs.free(Api::kFree, p);
    t.events(101, mine).events(102, theirs);
    t.end(1000 + 3'000'000'000ull, 5000 + 1'000'000'000ull);
    const std::string f = dir + "/one_stamp.mltrace";
    testing::write_file(f, t.bytes());
    Run r = run(exe + " dump " + f + " --format jsonl", err);
    EXPECT(r.status == 0);
    auto objs = parse_all(r);
    const auto *own = find(objs, "free"), *other = find(objs, "free", 1);
    EXPECT(own && other);
    if (own && other) {
      EXPECT(n(*own, "tid") == 101);
      EXPECT(n(*own, "size") == 24);
      EXPECT(n(*own, "usable") == 32);
      EXPECT(n(*other, "tid") == 102);
      EXPECT(n(*other, "size") == 40);
      EXPECT(n(*other, "usable") == 48);
    }
  }

  if (failures)
    std::cerr << failures << " check(s) failed\n";
  else
    std::cout << "all dump CLI checks passed\n";
  return failures ? 1 : 0;
}
