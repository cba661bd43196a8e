// memlayout replay: "should I segregate?" answered offline. The recorded
// allocation sequence up to the analysed moment is re-executed, under rules,
// against the real allocator in a fresh worker process; the objects alive at
// that moment are then analysed where the worker placed them.
#include "command_line.h"
#include "command_output.h"
#include "commands.h"
#include "grouping.h"
#include "heap_snapshot.h"
#include "preload_launch.h"
#include "render.h"
#include "replay.h"
#include "replay_ops.h"
#include "report_builder.h"
#include "report_input.h"
#include "rule_args.h"
#include "rule_match.h"
#include "symbolizer.h"
#include "trace_reader.h"
#include "type_map.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace memlayout::cli {
namespace {

using replay::Op;
using replay::OpKind;

// The recorded sequence, as the worker will execute it.
struct Sequence {
  std::vector<Op> ops;
  std::vector<uint64_t> alloc_seq; // per op: the event's seq (allocs and reallocs), else 0
  std::vector<uint64_t> stack;     // per op: its stack id
  uint32_t threads = 0;
  uint32_t main_first_page_offset = 0;    // OpsHeader's
  std::vector<inspector::RuleStat> rules; // what each rule routed, as record reports it
};

// The rule each recorded allocation falls under: the site as reports and
// the interposer decide it, matched as the interposer matches.
class RouteDecider {
public:
  RouteDecider(const rules::RuleSet &set, inspector::TraceReader &r, inspector::Symbolizer &sym,
               inspector::CodeMaps &code, const inspector::WrapperPolicy &wrappers,
               const inspector::TypeMap *types)
      : set_(set), r_(r), sym_(sym), code_(code), wrappers_(wrappers), types_(types) {}

  uint8_t route(uint64_t stack_id, uint64_t size) {
    const Site &s = site(stack_id);
    int i = inspector::first_matching_rule(set_, s.site, size, s.type);
    return i < 0 ? replay::kNoRoute : static_cast<uint8_t>(i);
  }

  struct Site {
    inspector::Group::Site site;
    std::string type;
  };
  const Site &site(uint64_t stack_id) {
    auto it = sites_.find(stack_id);
    if (it != sites_.end())
      return it->second;
    Site s;
    s.site = inspector::alloc_site(r_.stack(stack_id), sym_, wrappers_, &code_);
    if (types_)
      s.type = types_->type_at(s.site.function, s.site.file, s.site.line,
                               inspector::through_standard_library(s.site), s.site.column);
    return sites_.emplace(stack_id, std::move(s)).first->second;
  }

private:
  const rules::RuleSet &set_;
  inspector::TraceReader &r_;
  inspector::Symbolizer &sym_;
  inspector::CodeMaps &code_;
  const inspector::WrapperPolicy &wrappers_;
  const inspector::TypeMap *types_;
  std::unordered_map<uint64_t, Site> sites_;
};

bool write_file(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out.flush());
}

template <class T> void append(std::string &buf, const T &v) {
  buf.append(reinterpret_cast<const char *>(&v), sizeof v);
}

// Runs the worker; false with error set.
bool run_worker(const Sequence &seq, const LoadedRules &rules, bool jemalloc,
                std::vector<replay::OpResult> &results, std::string &error) {
  results.clear();
  if (seq.ops.empty()) // nothing allocated, or nothing before the trace's damage
    return true;
  std::string worker = self_dir() + "/memlayout-replay-worker";
  if (access(worker.c_str(), X_OK) != 0) {
    error = "cannot find " + worker;
    return false;
  }
  char dir_template[] = "/tmp/memlayout-replay.XXXXXX";
  const char *tmp_root = std::getenv("TMPDIR");
  std::string dir_pattern =
      tmp_root && *tmp_root ? std::string(tmp_root) + "/memlayout-replay.XXXXXX" : dir_template;
  std::vector<char> pattern(dir_pattern.begin(), dir_pattern.end());
  pattern.push_back('\0');
  if (!mkdtemp(pattern.data())) {
    error = std::string("cannot create a temporary directory: ") + std::strerror(errno);
    return false;
  }
  std::string dir = pattern.data();
  std::string ops_path = dir + "/ops", results_path = dir + "/results";

  std::string bytes;
  replay::OpsHeader h{};
  std::memcpy(h.magic, replay::kOpsMagic, sizeof h.magic);
  h.allocator = static_cast<uint32_t>(jemalloc ? replay::ReplayAllocator::kJemalloc
                                               : replay::ReplayAllocator::kGlibc);
  h.threads = seq.threads;
  h.main_first_page_offset = seq.main_first_page_offset;
  h.routes = rules.set->count;
  h.ops = seq.ops.size();
  append(bytes, h);
  for (unsigned i = 0; i < rules.set->count; ++i) {
    const rules::Rule &r = rules.set->rules[i];
    replay::OpsRoute route{};
    std::memcpy(route.pool, r.pool, sizeof route.pool);
    route.pad = r.pad;
    route.align = r.align;
    route.huge_pages = r.huge_pages;
    append(bytes, route);
  }
  bytes.append(reinterpret_cast<const char *>(seq.ops.data()), seq.ops.size() * sizeof(Op));
  bool ok = write_file(ops_path, bytes) &&
            write_file(results_path, std::string(seq.ops.size() * sizeof(replay::OpResult), '\0'));
  if (!ok) {
    error = "cannot write the replay's files in " + dir;
  } else {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      // The program's environment, without our preload and without rules.
      unsetenv("LD_PRELOAD");
      execl(worker.c_str(), worker.c_str(), ops_path.c_str(), results_path.c_str(),
            static_cast<char *>(nullptr));
      _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      error = "the replay worker failed" +
              (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                   : std::string());
      ok = false;
    } else {
      std::ifstream in(results_path, std::ios::binary);
      results.resize(seq.ops.size());
      in.read(reinterpret_cast<char *>(results.data()),
              static_cast<std::streamsize>(results.size() * sizeof(replay::OpResult)));
      ok = static_cast<bool>(in);
      if (!ok)
        error = "cannot read the replay's results";
    }
  }
  unlink(ops_path.c_str());
  unlink(results_path.c_str());
  rmdir(dir.c_str());
  return ok;
}

} // namespace

namespace {

// Per event of `events` (the replayed sequence, merged order), the threads
// whose end the trace records before it: after each such thread's last
// event, and before the first event stamped after its end. Not the
// recorded main thread (`main_tid`), which ends with the process.
std::vector<std::vector<uint32_t>>
threads_ending(const std::string &trace, const std::vector<inspector::AppliedEvent> &events,
               std::optional<uint64_t> main_tid) {
  std::vector<std::vector<uint32_t>> out(events.size());
  std::unordered_map<uint32_t, uint64_t> ended; // tid -> the stamp of its end
  inspector::TraceReader r;
  if (!r.open(trace))
    return out;
  std::vector<uint64_t> unread;
  r.skip_events(&unread); // only the thread records are wanted
  for (inspector::Item it; (it = r.next()) != inspector::Item::kDone;)
    if (it == inspector::Item::kThreads)
      for (const inspector::ThreadEntry &t : r.record_threads())
        if (t.what == trace::ThreadEvent::kExit && (!main_tid || t.tid != *main_tid))
          ended[static_cast<uint32_t>(t.tid)] = t.tsc;
  if (ended.empty())
    return out;
  std::unordered_map<uint32_t, size_t> last; // tid -> index of its last event
  for (size_t k = 0; k < events.size(); ++k)
    last[events[k].tid] = k;
  for (const auto &[tid, tsc] : ended) {
    auto l = last.find(tid);
    if (l == last.end())
      continue; // nothing of it replayed: no cache to hand back
    // The merged order follows the stamps: the first one after the end.
    auto after = std::partition_point(
        events.begin() + static_cast<std::ptrdiff_t>(l->second) + 1, events.end(),
        [tsc = tsc](const inspector::AppliedEvent &e) { return e.tsc <= tsc; });
    if (after != events.end())
      out[static_cast<size_t>(after - events.begin())].push_back(tid);
  }
  for (auto &tids : out)
    std::sort(tids.begin(), tids.end());
  return out;
}

} // namespace

bool replay_layout(const std::string &trace, LoadedRules &rules, inspector::ReportOptions o,
                   const std::string &allocator, const char *who, inspector::Report &report,
                   std::string &error) {
  std::vector<std::string> replay_notes; // before the report's own
  // 1. The sequence up to the analysed moment, in the merged order.
  inspector::TraceReader r;
  if (!r.open(trace)) {
    std::string ignored;
    if (sniff_input(trace, ignored) == InputKind::kReport)
      error = trace +
              " is a report (JSON), not a trace: replay re-runs a trace's allocations, so give "
              "it the trace the report was made from";
    else
      error = r.error().message;
    return false;
  }
  Sequence seq;
  std::vector<inspector::AppliedEvent> events;
  inspector::SnapshotSpec spec = o.at;
  spec.observer = [&](const inspector::AppliedEvent &e) {
    if (e.kind == trace::EventKind::kAlloc || e.kind == trace::EventKind::kFree ||
        e.kind == trace::EventKind::kRealloc)
      events.push_back(e);
  };
  inspector::HeapSnapshot snap;
  if (!inspector::build_snapshot(r, spec, snap, error))
    return false;
  // file= and type= keys name functions, as they do for `memlayout run`.
  if (!expand_match_keys(&rules, {r.header().executable}, o.types_file, o.find_types)) {
    error.clear(); // expand_match_keys said why
    return false;
  }
  inspector::Symbolizer::Options sym_opts;
  sym_opts.main_executable = r.header().executable;
  inspector::Symbolizer sym(r.modules(), sym_opts);
  std::optional<inspector::TypeMap> types;
  bool type_rules = false;
  for (const rules::Rule &w : rules.written) // as written: expanded, they name functions
    type_rules = type_rules || w.type[0];
  if (type_rules) {
    std::string path = o.types_file;
    if (path.empty() && o.find_types) {
      path = inspector::type_map_beside(r.header().executable);
      if (access(path.c_str(), R_OK) != 0)
        path.clear();
    }
    if (!path.empty() && !(types = inspector::TypeMap::load(path, error)))
      std::fprintf(stderr, "%s: warning: %s\n", who, error.c_str());
    if (!types)
      std::fprintf(stderr,
                   "%s: warning: type= rules need a type map (memlayout structs --format json, "
                   "then --types MAP): they match nothing\n",
                   who);
  }
  // The wrappers as `memlayout report` of this trace decides them, for the
  // routing here and the report of the result alike.
  inspector::WrapperPolicy wrappers;
  wrappers.wrappers = o.wrappers;
  wrappers.not_wrappers = o.not_wrappers;
  for (unsigned i = 0; i < rules.set->wrapper_count; ++i) {
    const rules::WrapperDecl &d = rules.set->wrappers[i];
    (d.not_wrapper ? wrappers.not_wrappers : wrappers.rules_file).push_back(d.function);
  }
  inspector::CodeMaps code(sym);
  inspector::detect_wrappers(inspector::weighted_stacks(snap, r), sym, code, wrappers);
  o.wrappers_decided = &wrappers;
  // Routing as `run` decides it: `run` reads no trace, so a wrapper that only
  // the recorded stacks show is looked through only where the rules or the
  // command line declare it. The report's sites (as_reported) name what a
  // rule would route once it is declared.
  inspector::WrapperPolicy routing = wrappers;
  std::erase_if(routing.detected, [](const auto &d) {
    return d.second.reason == inspector::WrapperReason::kDetectedTrace;
  });
  RouteDecider decider(*rules.set, r, sym, code, routing, types ? &*types : nullptr);
  RouteDecider as_reported(*rules.set, r, sym, code, wrappers, types ? &*types : nullptr);
  std::vector<uint64_t> reported_count(rules.set->count);
  std::vector<std::vector<std::string>> undeclared(rules.set->count);
  auto note_as_reported = [&](uint64_t stack_id, uint64_t size) {
    uint8_t route = as_reported.route(stack_id, size);
    if (route == replay::kNoRoute)
      return;
    ++reported_count[route];
    for (const auto &w : as_reported.site(stack_id).site.looked_through)
      if (w.reason == inspector::WrapperReason::kDetectedTrace &&
          std::find(undeclared[route].begin(), undeclared[route].end(), w.function) ==
              undeclared[route].end())
        undeclared[route].push_back(w.function);
  };
  std::unordered_map<uint32_t, uint16_t> thread_index;
  if (r.header().pid)
    thread_index[*r.header().pid] = 0;
  std::unordered_map<uint64_t, uint64_t> placed_by; // live address -> op
  bool main_first_seen = false;                     // the main thread's first allocating op
  std::vector<uint64_t> routed_count(rules.set->count), routed_bytes(rules.set->count);
  // A file= or type= rule routes the functions it resolved to, all of
  // their allocations: those from other lines or of other types, by rule,
  // with their sites (a few named).
  struct Strays {
    uint64_t count = 0;
    std::vector<std::string> sites;
  };
  std::vector<Strays> strays(rules.set->count);
  auto note_stray = [&](uint8_t route, uint64_t stack_id, uint64_t size) {
    const rules::Rule &w = rules.written[route];
    if (!w.file[0] && !w.type[0])
      return;
    const auto &s = decider.site(stack_id);
    if (inspector::rule_matches(w, s.site, size, s.type))
      return;
    Strays &st = strays[route];
    ++st.count;
    std::string where = s.site.function + " (" + s.site.file + ":" + std::to_string(s.site.line) +
                        (s.type.empty() ? "" : ", " + s.type) + ")";
    if (st.sites.size() < 4 && std::find(st.sites.begin(), st.sites.end(), where) == st.sites.end())
      st.sites.push_back(where);
  };
  // Threads that ended before the analysed moment end in the replay where
  // they ended (OpKind::kExit): their caches go back to the allocator, and
  // the threads after them take over their arenas, as in the program.
  std::vector<std::vector<uint32_t>> exits_before = threads_ending(trace, events, r.header().pid);
  for (size_t k = 0; k < events.size(); ++k) {
    const inspector::AppliedEvent &e = events[k];
    for (uint32_t tid : exits_before[k]) {
      // Thread 0 is the worker's main thread, which never ends early: the
      // recorded main thread, or (a trace without a pid) the first one seen.
      uint16_t thread = thread_index.at(tid);
      if (thread == 0)
        continue;
      Op exit{};
      exit.kind = OpKind::kExit;
      exit.thread = thread;
      exit.route = replay::kNoRoute;
      exit.ref = replay::kNoRef;
      seq.ops.push_back(exit);
      seq.alloc_seq.push_back(UINT64_MAX);
    }
    auto [t, fresh] = thread_index.emplace(e.tid, static_cast<uint16_t>(thread_index.size()));
    if (thread_index.size() > 65535) {
      error = "more than 65535 threads";
      return false;
    }
    (void)fresh;
    Op op{};
    op.thread = t->second;
    op.route = replay::kNoRoute;
    op.ref = replay::kNoRef;
    auto take_ref = [&](uint64_t addr) {
      auto it = placed_by.find(addr);
      if (it == placed_by.end())
        return replay::kNoRef;
      uint64_t ref = it->second;
      placed_by.erase(it);
      return ref;
    };
    uint64_t index = seq.ops.size();
    bool inherited = false; // a pool's block reallocated: routed when it began
    if (e.kind == trace::EventKind::kFree) {
      if (e.ptr == 0)
        continue;
      op.kind = OpKind::kFree;
      op.ref = take_ref(e.ptr);
      if (op.ref == replay::kNoRef)
        continue; // allocated before the recording: not ours to replay
    } else if (e.kind == trace::EventKind::kAlloc) {
      if (e.ptr == 0)
        continue; // failed in the recording
      op.kind = OpKind::kAlloc;
      op.size = e.size;
      if (trace::api_is_aligned(e.api))
        op.align = e.alignment; // what the program asked for, not what its address happens to be
      op.route = decider.route(e.stack_id, e.size);
      note_as_reported(e.stack_id, e.size);
      placed_by[e.ptr] = index;
    } else {
      if (e.ptr == 0 && e.size != 0)
        continue; // failed: the old block stays
      op.kind = OpKind::kRealloc;
      op.size = e.size;
      op.ref = e.old_ptr ? take_ref(e.old_ptr) : replay::kNoRef;
      // A pool's block stays in its pool (not routed again); any other
      // moves where a rule naming the realloc's site puts it, as in `run`.
      uint8_t was = op.ref == replay::kNoRef ? replay::kNoRoute : seq.ops[op.ref].route;
      if (was != replay::kNoRoute && rules.set->rules[was].pool[0]) {
        op.route = was;
        inherited = true;
      } else if (op.ref == replay::kNoRef || e.size) {
        op.route = decider.route(e.stack_id, e.size);
      }
      if (e.ptr)
        placed_by[e.ptr] = index;
    }
    if (op.route != replay::kNoRoute && !inherited) {
      ++routed_count[op.route];
      routed_bytes[op.route] += e.size;
      note_stray(op.route, e.stack_id, e.size);
    }
    // The worker's pad lines up the main thread's first allocating op: only
    // where that one is a small allocation from the heap's top (not a
    // realloc, not mmap'd, not aligned, not a pool's) is there an offset to
    // line it up to.
    if (!main_first_seen && op.thread == 0 && op.kind != OpKind::kFree) {
      main_first_seen = true;
      if (op.kind == OpKind::kAlloc && op.route == replay::kNoRoute && op.align <= 16 &&
          e.size < 64 * 1024)
        seq.main_first_page_offset = static_cast<uint32_t>(e.ptr & 4095) + 1;
    }
    seq.ops.push_back(op);
    seq.alloc_seq.push_back(op.kind == OpKind::kFree ? UINT64_MAX : e.seq);
  }
  seq.threads = static_cast<uint32_t>(std::max<size_t>(thread_index.size(), 1));
  for (unsigned i = 0; i < rules.set->count; ++i)
    seq.rules.push_back({inspector::rule_text(rules.written[i]), routed_count[i], routed_bytes[i]});
  for (unsigned i = 0; i < rules.set->count; ++i) {
    if (unsigned first = first_covering_rule(*rules.set, i); !routed_count[i] && first < i)
      std::fprintf(stderr,
                   "%s: warning: %s: the rule routes nothing: %s (%s) comes first and matches "
                   "all it matches (the first rule that matches an allocation routes it)\n",
                   who, rules.origin[i].c_str(),
                   inspector::rule_text(rules.set->rules[first]).c_str(),
                   rules.origin[first].c_str());
    else if (!routed_count[i] && reported_count[i] == 0)
      std::fprintf(stderr, "%s: warning: %s: the rule matched no allocation\n", who,
                   rules.origin[i].c_str());
    if (reported_count[i] > routed_count[i] && !undeclared[i].empty()) {
      std::string names;
      for (const auto &w : undeclared[i])
        names += (names.empty() ? "" : ", ") + w;
      std::fprintf(stderr,
                   "%s: warning: %s: %s routes %llu allocations, as `run` and `record` will; "
                   "the report finds %llu more under the sites it names, through %s, "
                   "wrapper%s only the recorded stacks show, which `run` cannot see: declare "
                   "%s (wrapper=%s in the rules file, as memlayout advise writes it)\n",
                   who, rules.origin[i].c_str(), inspector::rule_text(rules.written[i]).c_str(),
                   static_cast<unsigned long long>(routed_count[i]),
                   static_cast<unsigned long long>(reported_count[i] - routed_count[i]),
                   names.c_str(), undeclared[i].size() == 1 ? "" : "s",
                   undeclared[i].size() == 1 ? "it" : "them", undeclared[i].front().c_str());
    }
    if (strays[i].count) {
      std::string sites;
      for (const auto &w : strays[i].sites)
        sites += (sites.empty() ? "" : ", ") + w;
      std::fprintf(stderr,
                   "%s: warning: %s: %s routes the whole of %s, as `run` and "
                   "`record` will: %llu of its %llu allocations are from other lines or types: "
                   "%s%s; a size= key may tell them apart (memlayout advise finds one)\n",
                   who, rules.origin[i].c_str(), inspector::rule_text(rules.written[i]).c_str(),
                   rules.set->rules[i].function, static_cast<unsigned long long>(strays[i].count),
                   static_cast<unsigned long long>(routed_count[i]), sites.c_str(),
                   strays[i].sites.size() == 4 ? ", ..." : "");
    }
  }

  // 2. The worker places them.
  bool jemalloc = allocator.empty() ? r.header().allocator == "jemalloc" : allocator == "jemalloc";
  std::vector<replay::OpResult> results;
  if (!run_worker(seq, rules, jemalloc, results, error))
    return false;

  // A trace recorded under rules: its objects carry the tags of the pools
  // those put them in, which would name the groups here though the replay
  // placed them as the program's allocator did, under only the rules given.
  std::set<std::string> recorded_pools;
  std::string recorded_rules;
  if (const auto &rec = r.rules(); rec && !rec->rules.empty()) {
    for (const auto &w : rec->rules) {
      recorded_rules += (recorded_rules.empty() ? "" : "; ") + w.text;
      for (size_t at = 0; (at = w.text.find("pool=", at)) != std::string::npos; at += 5)
        if (at == 0 || w.text[at - 1] == ',')
          recorded_pools.insert(w.text.substr(at + 5, w.text.find(',', at) - at - 5));
    }
    std::string note = trace + " was recorded under " + std::to_string(rec->rules.size()) +
                       " rule" + (rec->rules.size() == 1 ? "" : "s") + " (" + recorded_rules +
                       "): the replay starts from the program's allocator and applies only "
                       "the rules given to it";
    std::fprintf(stderr, "%s: warning: %s\n", who, note.c_str());
    replay_notes.push_back(note);
  }

  // 3. The same snapshot, analysed where the worker put its objects.
  std::unordered_map<uint64_t, uint64_t> op_of_seq;
  op_of_seq.reserve(seq.ops.size());
  for (uint64_t i = 0; i < seq.ops.size(); ++i)
    if (seq.alloc_seq[i] != UINT64_MAX)
      op_of_seq[seq.alloc_seq[i]] = i;
  o.transform_snapshot = [&](inspector::HeapSnapshot &s) {
    std::vector<inspector::LiveObject> kept;
    kept.reserve(s.objects.size());
    s.live_usable_bytes = 0;
    for (inspector::LiveObject obj : s.objects) {
      auto it = op_of_seq.find(obj.seq);
      if (it == op_of_seq.end() || !results[it->second].addr)
        continue;
      obj.addr = results[it->second].addr;
      obj.usable = results[it->second].usable;
      if (obj.tag_id && !recorded_pools.empty())
        if (const std::string *tag = r.string(obj.tag_id); tag && recorded_pools.count(*tag))
          obj.tag_id = 0;
      s.live_usable_bytes += obj.usable;
      kept.push_back(obj);
    }
    std::sort(kept.begin(), kept.end(),
              [](const inspector::LiveObject &a, const inspector::LiveObject &b) {
                return a.addr < b.addr;
              });
    s.objects = std::move(kept);
    s.memory_map.reset(); // the worker's page frames are not the program's
  };
  o.pool_of = [&](const inspector::LiveObject &obj) -> std::string {
    auto it = op_of_seq.find(obj.seq);
    if (it == op_of_seq.end())
      return {};
    uint8_t route = seq.ops[it->second].route;
    return route == replay::kNoRoute ? std::string() : rules.set->rules[route].pool;
  };
  o.progress = isatty(2);
  o.allocator = jemalloc ? "jemalloc" : "native"; // the layout is the replay's
  if (!inspector::build_report(trace, o, report, error))
    return false;
  // What the replay's rules routed, where a report of a trace recorded under
  // rules lists those (the layout shown is the replay's).
  report.rules = seq.rules;
  report.rules_replayed = true;
  report.notes.insert(report.notes.begin(),
                      "replayed under " + std::to_string(rules.set->count) + " rule" +
                          (rules.set->count == 1 ? "" : "s") + " against " +
                          (jemalloc ? "jemalloc 5.3" : "glibc malloc") + ": " +
                          std::to_string(seq.ops.size()) + " operations of " +
                          std::to_string(seq.threads) + " thread" + (seq.threads == 1 ? "" : "s"));
  report.notes.insert(report.notes.begin() + 1, replay_notes.begin(), replay_notes.end());
  return true;
}

int replay_main(int argc, char **argv) {
  std::string trace, format, output, allocator;
  RuleArgs rule_args;
  inspector::ReportOptions o;
  TextOptions text;
  auto app = make_command(
      "replay",
      "Re-executes the allocations and frees recorded in FILE up to the analysed moment,\n"
      "each thread's in its own order, against the allocator the trace was recorded with\n"
      "(glibc or jemalloc 5.3), with the rules applied: the allocations whose sites they\n"
      "name go to their pools, padded and aligned as the rules say. Then reports the\n"
      "layout the objects would have had, as 'memlayout report' does. Sites and wrappers\n"
      "are decided as reports decide them (the rules file's wrapper= lines included),\n"
      "but a rule routes only what `run` would: through the wrappers it sees (built-in,\n"
      "declared, or found in debug information), not those only recorded stacks show.\n"
      "Page frames are not replayed: L2/L3 sets rest on virtual address bits.");
  app->add_option("FILE", trace, "the trace (memlayout record)")->required();
  add_rule_options(*app, rule_args);
  add_format_option(*app, format, {"text", "json"}, "output format");
  add_output_option(*app, output);
  add_allocator_option(*app, allocator, "replay against this allocator instead of the trace's");
  add_count_option(*app, "--top", text.top, "groups listed in text");
  add_analysis_options(*app, o);
  if (int rc = parse_command(*app, argc, argv); rc >= 0)
    return rc;
  if (rule_args.empty())
    return usage_error(*app,
                       "no rules: give --rules FILE (see memlayout advise) or --segregate SPEC");
  std::vector<std::string> inputs = rule_args.files;
  inputs.push_back(trace);
  inputs.push_back(o.types_file);
  inputs.push_back(o.cache_file);
  if (output_is_an_input(output, inputs, "replay"))
    return 2;
  LoadedRules rules;
  if (!load_rules(rule_args, &rules))
    return 2;

  inspector::Report report;
  std::string error;
  if (!replay_layout(trace, rules, o, allocator, "memlayout replay", report, error)) {
    if (!error.empty())
      std::fprintf(stderr, "memlayout replay: %s\n", error.c_str());
    return 2;
  }
  return write_report(report, format, output, text, "replay", inputs);
}

} // namespace memlayout::cli
