#include "report_builder.h"

#include "rules.h"

#include "address_map.h"
#include "cache_model.h"
#include "colocation.h"
#include "grouping.h"
#include "heap_snapshot.h"
#include "htm_aborts.h"
#include "line_layout.h"
#include "managed_heap.h"
#include "page_spread.h"
#include "set_occupancy.h"
#include "structs_report.h"
#include "symbolizer.h"
#include "trace_reader.h"
#include "type_map.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <system_error>
#include <unistd.h>

namespace memlayout::inspector {
namespace {

constexpr size_t kMaxLevels = 3;      // L1, L2, L3: the report's columns
constexpr size_t kNeighboursKept = 8; // per group, the closest by objects next to it

// --hot NAME matches a group's name (its tag or pool when it has one), the
// function of its call site or the record it allocates; NAME=FIELD takes the
// prefix through FIELD of that record.
// A name as rules take a function (trailing scopes: "load", "Store::load"
// and "kv::Store::load" all name kv::Store::load(unsigned long)), or the
// group's name, tag, pool or type.
// The type also as code spells it (`Table<int>`), where the type map says.
bool hot_names(const HotPrefix &h, const Group &g, const TypeMap *types) {
  if (h.name == g.name || h.name == g.site.function || g.name.rfind(h.name + " (", 0) == 0 ||
      (g.site.function != "??" &&
       rules::function_key_matches(g.site.function.c_str(), h.name.c_str())))
    return true;
  if (g.type.empty())
    return false;
  if (record_selected(g.type, h.name))
    return true;
  const RecordLayout *r = types ? types->record(g.type, g.site.file, g.type_variant) : nullptr;
  return r && record_selected(*r, h.name);
}

// The hot part --hot gives the group's objects: from where its record
// starts (behind make_shared's control block, T's offsets plus 16).
// `unmeasured`: why a --hot naming the group measured nothing (the layout
// the group's site allocates has no such member), for a note.
HotRange hot_range_for(const Group &g, const std::vector<HotPrefix> &hot, const TypeMap *types,
                       std::string &unmeasured) {
  for (const auto &h : hot) {
    if (!hot_names(h, g, types))
      continue;
    if (h.field.empty())
      return {g.type_offset, h.bytes};
    const RecordLayout *record =
        types ? types->record(g.type.empty() ? h.name : g.type, g.site.file, g.type_variant)
              : nullptr;
    if (auto bytes = record ? types->prefix_through(*record, h.field) : std::nullopt)
      return {g.type_offset, *bytes};
    if (record && unmeasured.empty())
      unmeasured = "--hot " + h.name + "=" + h.field + ": " + g.name +
                   (g.id ? " [group " + std::to_string(g.id) + "]" : std::string()) +
                   "'s objects are " + record->name +
                   (record->file.empty() ? std::string()
                                         : " (" + record->file.substr(record->file.rfind('/') + 1) +
                                               ":" + std::to_string(record->line) + ")") +
                   (record->variant ? " as laid out in layout " + std::to_string(record->variant)
                                    : std::string()) +
                   ", which has no member " + h.field + ": measured whole";
  }
  return {};
}

// The type map --types names, else the one beside the recorded executable.
// A missing or unreadable map beside the executable is a note, not an error.
bool load_type_map(const ReportOptions &o, const std::string &executable,
                   std::optional<TypeMap> &map, std::vector<std::string> &notes,
                   std::string &error) {
  std::string path = o.types_file;
  if (path.empty()) {
    if (!o.find_types)
      return true;
    path = type_map_beside(executable);
    if (path.empty() || access(path.c_str(), R_OK) != 0)
      return true;
    std::string why;
    map = TypeMap::load(path, why);
    notes.push_back(map ? "groups named by type from " + path
                        : "the type map beside the program is unusable (" + why +
                              "): groups are named by call site");
    return true;
  }
  map = TypeMap::load(path, error);
  if (map)
    notes.push_back("groups named by type from " + path);
  return map.has_value();
}

// Every --hot NAME=FIELD must name a member of a record of the map.
bool check_hot_fields(const std::vector<HotPrefix> &hot, const TypeMap *types, std::string &error) {
  for (const HotPrefix &h : hot) {
    if (h.field.empty())
      continue;
    const std::string spec = "--hot " + h.name + "=" + h.field;
    if (!types) {
      error =
          spec + ": a field needs a type map (--types MAP, from memlayout structs --format json)";
      return false;
    }
    bool named = false, found = false;
    std::string members;
    for (const RecordLayout &r : types->records()) {
      if (!record_selected(r, h.name))
        continue;
      named = true;
      found = types->prefix_through(r, h.field).has_value();
      if (found)
        break;
      for (const std::string &m : types->member_names(r))
        members += (members.empty() ? "" : ", ") + m;
    }
    if (found)
      continue;
    error = spec + (named ? ": no such member (" + h.name + " has " + members + ")"
                          : ": no record named " + h.name + " in " + types->path());
    return false;
  }
  return true;
}

// One line on stderr, redrawn in place: the stage and, where known, how far.
void progress(bool on, const char *stage, double fraction = -1) {
  if (!on)
    return;
  if (fraction < 0) {
    std::fprintf(stderr, "\r\033[Kmemlayout: %s...", stage);
  } else {
    constexpr int kWidth = 30;
    int filled = static_cast<int>(fraction * kWidth);
    std::fprintf(stderr, "\r\033[Kmemlayout: %-32s [%.*s%*s] %3.0f%%", stage, filled,
                 "##############################", kWidth - filled, "", fraction * 100);
  }
  std::fflush(stderr);
}

std::string at_text(const SnapshotSpec &s) {
  switch (s.point) {
  case SnapshotPoint::kPeak:
    return "peak";
  case SnapshotPoint::kEnd:
    return "end";
  case SnapshotPoint::kMark:
    return "mark:" + s.mark;
  }
  return "?";
}

// Sums runs of neighbouring sets into at most `max_bins` bars so that an LLC
// with 10^5 sets still plots readably; the expectation scales by the same factor.
PlotOccupancy fold_occupancy(uint32_t group, int level, const SetOccupancy &so, uint32_t max_bins) {
  PlotOccupancy p;
  p.group = group;
  p.level = level;
  p.domain = static_cast<uint32_t>(so.histogram.size());
  p.sets_per_bin = max_bins && p.domain > max_bins ? (p.domain + max_bins - 1) / max_bins : 1;
  p.lines.assign((p.domain + p.sets_per_bin - 1) / p.sets_per_bin, 0);
  for (size_t i = 0; i < so.histogram.size(); ++i)
    p.lines[i / p.sets_per_bin] += so.histogram[i];
  p.lines_total = so.lines;
  p.effective_fraction = so.effective.fraction;
  return p;
}

PlotChunks first_chunks(uint32_t group, const ChunkMap &m, size_t max_regions,
                        uint64_t regions_total) {
  PlotChunks p;
  p.group = group;
  p.page_size = m.page_size;
  p.region_size = m.region_size;
  p.pages_per_region = m.pages_per_region;
  p.regions_total = regions_total;
  for (size_t r = 0; r < m.regions.size() && r < max_regions; ++r) {
    p.regions.push_back(m.regions[r]);
    auto &pages = p.pages.emplace_back();
    for (uint32_t page = 0; page < m.pages_per_region; ++page)
      if (m.holds(r, page))
        pages.push_back(page);
  }
  return p;
}

// The plotted groups' corner of the co-location matrix, built from the pairs
// rather than colocation_matrix(): that one is groups^2 over all groups.
void colocation_corner(const Colocation &c, size_t n, ReportPlots &out) {
  out.colocation_groups.assign(c.group_ids.begin(), c.group_ids.begin() + n);
  out.same_line.assign(n * n, 0.0);
  out.adjacent_line.assign(n * n, 0.0);
  out.same_page.assign(n * n, 0.0);
  for (const PairColocation &p : c.pairs) {
    if (p.a >= n || p.b >= n || c.group_objects[p.a] == 0)
      continue;
    const double objects = static_cast<double>(c.group_objects[p.a]);
    const size_t cell = p.a * n + p.b;
    out.same_line[cell] = static_cast<double>(p.same_line) / objects;
    out.adjacent_line[cell] = static_cast<double>(p.adjacent_line) / objects;
    out.same_page[cell] = static_cast<double>(p.same_page) / objects;
  }
}

} // namespace

bool parse_snapshot_spec(const std::string &text, SnapshotSpec &out) {
  if (text == "peak") {
    out = {SnapshotPoint::kPeak, {}, {}};
    return true;
  }
  if (text == "end") {
    out = {SnapshotPoint::kEnd, {}, {}};
    return true;
  }
  if (text.rfind("mark:", 0) == 0 && text.size() > 5) {
    out = {SnapshotPoint::kMark, text.substr(5), {}};
    return true;
  }
  return false;
}

bool build_report(const std::string &trace_path, const ReportOptions &o, Report &out,
                  std::string &error) {
  out = Report{};
  out.trace = trace_path;
  out.at = at_text(o.at);

  // The cache model first: a bad override file is the user's to fix before
  // a long replay.
  std::optional<CacheModel> model;
  std::string cache_error;
  if (!o.cache_file.empty()) {
    model = CacheModel::from_file(o.cache_file, cache_error);
    if (!model) {
      error = cache_error;
      return false;
    }
  } else {
    model = CacheModel::from_sysfs(cache_error);
    if (!model) {
      model = CacheModel::reference();
      out.notes.push_back("this machine's caches are not in sysfs (" + cache_error +
                          "): figures use the reference machine's (--cache FILE to choose)");
    }
  }

  progress(o.progress, "reading the trace");
  TraceReader r;
  if (!r.open(trace_path)) {
    error = r.error().message;
    return false;
  }
  std::optional<TypeMap> types;
  out.cache_file = o.cache_file;
  for (const HotPrefix &h : o.hot)
    out.hot.push_back(h.name + "=" + (h.field.empty() ? std::to_string(h.bytes) : h.field));
  if (!load_type_map(o, r.header().executable, types, out.notes, error) ||
      !check_hot_fields(o.hot, types ? &*types : nullptr, error))
    return false;
  if (types)
    out.type_map = types->path();
  HeapSnapshot snap;
  SnapshotProgress on_progress;
  if (o.progress)
    on_progress = [](const char *stage, double fraction) { progress(true, stage, fraction); };
  if (!build_snapshot(r, o.at, snap, error, on_progress)) {
    if (o.progress)
      std::fprintf(stderr, "\r\033[K");
    return false;
  }
  if (o.transform_snapshot)
    o.transform_snapshot(snap);
  out.executable = r.header().executable;
  out.allocator = !o.allocator.empty()           ? o.allocator
                  : r.header().allocator.empty() ? "unknown"
                                                 : r.header().allocator;
  // A stamp is a sample taken before the event: the first events of a forked
  // child can carry one from just before the child's trace began.
  out.at_ns = std::max<int64_t>(snap.ts_ns, 0);
  out.partial = snap.partial;
  out.live_objects = snap.objects.size();
  out.live_bytes = snap.live_bytes;
  if (r.status() == ReadStatus::kCorrupt)
    out.damage = r.error().message;
  if (!out.damage.empty())
    out.notes.push_back("the trace is damaged (" + out.damage +
                        "): this is the layout of the records before the damage");
  else if (snap.partial) {
    out.cut_short = r.error().message;
    if (r.stopped())
      out.cut_cause = stop_cause_text(*r.stopped());
    out.notes.push_back("the trace is incomplete (" + out.cut_short +
                        "): this is the layout of its readable part");
  }
  for (const Diagnostic &w : r.warnings())
    out.reader_warnings.push_back(w.message);
  if (r.suppressed_warnings())
    out.reader_warnings.push_back(std::to_string(r.suppressed_warnings()) + " more warnings");
  for (const std::string &w : out.reader_warnings)
    out.notes.push_back("reading the trace: " + w);
  if (const auto &end = r.final_end(); end && end->lost_events)
    out.notes.push_back(std::to_string(end->lost_events) +
                        " events were lost: the recorder could not keep them (its own memory "
                        "ran out, or they came from inside itself or a signal handler "
                        "interrupting it): objects they made or ended are missing or live here");
  if (const auto &end = r.final_end(); end && end->reason == trace::EndReason::kExec)
    out.notes.push_back(r.header().executable +
                        " replaced itself with another program (exec): this trace holds only "
                        "what it allocated before; `memlayout record --follow-children` records "
                        "the other into FILE.PID.N");
  for (std::string &note : managed_heap_notes(r.modules(), r.header().executable))
    out.notes.push_back(std::move(note));
  // A stack id the tables do not hold (0 is "no stack") groups its objects
  // under "??": the table record is damaged or gone, not the program's code.
  uint64_t stackless = 0;
  for (const LiveObject &obj : snap.objects)
    stackless += obj.stack_id != 0 && !r.has_stack(obj.stack_id);
  if (stackless)
    out.notes.push_back(std::to_string(stackless) +
                        " live objects name call stacks the trace's stack tables do not hold "
                        "(a stacks record damaged or missing): their groups read ??");
  // Stale samples are the trace's to fix where it sampled less than every event.
  const std::string exact_stamps =
      r.header().timestamp_period.value_or(1) > 1
          ? "; MEMLAYOUT_TICK_PERIOD=1 in record's environment stamps every event"
          : "";
  // Without the switch watch a thread that waited stamps its next events
  // with its sample from before the wait, and the merge of threads can be
  // off with no misfit to show for it (a peak 7% low with 200 threads).
  if (r.header().switch_watch == 0u && r.header().timestamp_period.value_or(1) > 1 &&
      std::any_of(snap.objects.begin(), snap.objects.end(),
                  [&](const LiveObject &o) { return o.tid != snap.objects.front().tid; }))
    out.notes.push_back(
        "recorded without the switch watch (the C library registered no rseq area: glibc "
        "before 2.35, GLIBC_TUNABLES=glibc.pthread.rseq=0, or a seccomp filter refusing "
        "rseq): a thread that waited stamps its next events with its time sample from before "
        "the wait, so with more threads than CPUs the order of threads' frees and "
        "allocations, and the peak, can be off by a few percent" +
        exact_stamps);
  if (snap.unknown_frees)
    out.notes.push_back(std::to_string(snap.unknown_frees) +
                        " frees of addresses not allocated before them in the trace (memory "
                        "allocated before recording started, or by a parent before fork; or, "
                        "with threads that wait, a free stamped before its allocation: the "
                        "freeing thread's last time sample was older than the allocating "
                        "thread's, and the object then stays live in the report" +
                        exact_stamps + ")");
  if (snap.double_allocs)
    out.notes.push_back(std::to_string(snap.double_allocs) +
                        " addresses allocated again while live with no free found: the "
                        "earlier object was dropped (a free the trace lacks or, with more "
                        "threads than CPUs, an allocation stamped long before it happened: its "
                        "thread waited between its last time sample and the allocation; then "
                        "as many frees of unknown addresses follow" +
                        exact_stamps + ")");

  progress(o.progress, "symbolizing call sites");
  Symbolizer::Options sym_opts;
  sym_opts.main_executable = r.header().executable;
  Symbolizer sym(r.modules(), sym_opts);
  WrapperPolicy wrappers;
  wrappers.wrappers = o.wrappers;
  wrappers.not_wrappers = o.not_wrappers;
  wrappers.rules_file = o.rules_wrappers;
  wrappers.not_wrappers.insert(wrappers.not_wrappers.end(), o.rules_not_wrappers.begin(),
                               o.rules_not_wrappers.end());
  // Recorded under rules: their wrapper declarations decided what they routed.
  if (const auto &rec = r.rules()) {
    for (const auto &w : rec->wrappers)
      (w.not_wrapper ? wrappers.not_wrappers : wrappers.rules_file).push_back(w.function);
    for (const auto &rule : rec->rules)
      out.rules.push_back({rule.text, rule.allocations, rule.bytes});
  }
  CodeMaps code(sym);
  if (!o.wrappers_decided) {
    detect_wrappers(weighted_stacks(snap, r), sym, code, wrappers);
    for (auto &w : code.take_warnings())
      out.notes.push_back(std::move(w));
  }
  GroupingOptions grouping;
  grouping.wrappers = o.wrappers_decided ? o.wrappers_decided : &wrappers;
  grouping.code = &code;
  grouping.pool_of = o.pool_of;
  if (types) {
    // `file`: where the allocating call is, for C's file-private records.
    auto grouping_type = [&types](const TypeMap::SiteType &t, const std::string &file) {
      const RecordLayout *rec = types->record(t.type, file, t.variant);
      // A lock the map has no record of (the C library's pthread_mutex_t,
      // sem_t): named, its size unknown; the object is the lock.
      if (!rec && !t.type.empty() && sync_kind_of_type(t.type, t.type) == SyncKind::kLock)
        return GroupingOptions::SiteType{t.type};
      if (!rec)
        return GroupingOptions::SiteType{};
      uint64_t offset = t.in_control_block ? shared_object_offset(*rec) : 0;
      GroupingOptions::SiteType g{t.type, rec->size, offset, rec->variant};
      if (const FieldLayout *last = trailing_array(*rec); last && !offset) {
        g.trailing_array = true;
        g.trailing_offset = last->offset;
      }
      return g;
    };
    grouping.type_of = [&types, grouping_type](const Group::Site &s) {
      return grouping_type(
          types->site_type(s.function, s.file, s.line, through_standard_library(s), s.column),
          s.file);
    };
    grouping.type_from_caller = [&types, grouping_type](const Group::Site &s,
                                                        const Group::Site *caller) {
      if (!caller)
        return grouping_type(types->called_type(s.function, nullptr), s.file);
      TypeMap::Caller c{caller->function, caller->file, caller->line};
      return grouping_type(types->called_type(s.function, &c), caller->file);
    };
  }
  std::vector<Group> groups = group_objects(snap, r, sym, grouping);
  // A function the wrapper rule leaves as the site (one caller,
  // docs/report.md) typed by its caller's site: say so, and how to make the
  // caller the site instead.
  for (const Group &g : groups)
    if (!g.type_caller.empty())
      out.notes.push_back("group " + std::to_string(g.id) + " (" + g.name + ") is typed " + g.type +
                          " by " + g.type_caller + "; " + g.site.function +
                          " stays its site (a function is looked through as a wrapper with two "
                          "callers or more), --wrapper " +
                          g.site.function + " makes the caller the site");
  // Stacks that end in wrappers: the site is not in the trace.
  std::string unfound;
  for (const Group &g : groups)
    if (g.site.every_frame_looked_through)
      unfound += (unfound.empty() ? "" : ", ") + std::to_string(g.id);
  if (!unfound.empty()) {
    std::optional<uint32_t> depth = r.header().stack_depth;
    out.notes.push_back(
        std::string(unfound.find(',') == std::string::npos ? "group " : "groups ") + unfound +
        ": every frame of the recorded stacks is allocator code or a wrapper" +
        (depth ? " (recorded " + std::to_string(*depth) + (*depth == 1 ? " frame" : " frames") +
                     " deep)"
               : std::string()) +
        ", so the callers that decide what the objects are for are not in the trace: each is "
        "named after its outermost wrapper and may hold several callers' objects, and its fixes "
        "match by size; record again with a larger --stack-depth to find the sites");
  }
  out.groups_total = groups.size();
  // A module rebuilt since recording: its names are another build's.
  out.symbol_warnings = sym.take_warnings();
  for (const std::string &w : out.symbol_warnings)
    out.notes.push_back(w);

  AddressMap pages = AddressMap::of(snap);
  std::vector<const CacheLevel *> levels;
  out.cache_source = model->source;
  for (const auto &l : model->levels) {
    if (l.level < 1 || l.level > static_cast<int>(kMaxLevels) || levels.size() == kMaxLevels)
      continue;
    levels.push_back(&l);
    SetBasis basis = set_basis(l, pages.best());
    out.levels.push_back({l.level, l.type, l.sets, l.ways, l.line_size, l.size_bytes,
                          indexing_name(l.indexing), basis.text});
  }
  if (!snap.memory_map)
    out.notes.push_back(o.transform_snapshot
                            ? "replayed objects have new addresses and no page frames: L2/L3 "
                              "sets rest on the page offset only"
                            : "the trace has no memory map: L2/L3 sets rest on the page offset "
                              "only");

  progress(o.progress, "placing groups in lines, sets and pages");
  // Co-location looks at all groups together and the rest at one group at a
  // time, independently: on a second thread where there is one.
  auto colocate = [&] { return analyse_colocation(snap, groups); };
  std::future<Colocation> colocation_later;
  try {
    colocation_later = std::async(std::launch::async, colocate);
  } catch (const std::system_error &) { // no thread: computed at get()
    colocation_later = std::async(std::launch::deferred, colocate);
  }
  for (const HotPrefix &h : o.hot)
    if (std::none_of(groups.begin(), groups.end(),
                     [&](const Group &g) { return hot_names(h, g, types ? &*types : nullptr); })) {
      std::string why = "--hot " + h.name +
                        ": no group is named so (by type, pool, tag or function): it changed "
                        "nothing";
      out.notes.push_back(why);
      out.option_warnings.push_back(why); // on stderr too: a typo must not pass unseen
    }
  out.groups.reserve(groups.size());
  if (o.plots.enabled)
    out.plots.emplace();
  for (size_t pos = 0; pos < groups.size(); ++pos) {
    const Group &g = groups[pos];
    const bool plotted = o.plots.enabled && pos < o.plots.groups;
    GroupReport gr;
    gr.group = g;
    gr.objects = g.objects.size();
    std::string unmeasured;
    HotRange hot = hot_range_for(g, o.hot, types ? &*types : nullptr, unmeasured);
    if (!unmeasured.empty())
      out.notes.push_back(std::move(unmeasured));
    if (hot && g.requested_max && hot.offset + hot.bytes > g.requested_max) {
      // Past every object's end: what is measured is the objects' rest.
      out.notes.push_back("--hot for " + g.name + ": " + std::to_string(hot.bytes) + " bytes" +
                          (hot.offset ? " from byte " + std::to_string(hot.offset) : "") +
                          " run past its " + std::to_string(g.requested_max) +
                          "-byte objects: measured to their end");
      hot.bytes = g.requested_max > hot.offset ? g.requested_max - hot.offset : 1;
    }
    // What was asked is reported (a script tells "asked, the whole object"
    // from "not asked"); the whole object is measured as one.
    gr.hot_bytes = hot.bytes;
    gr.hot_offset = hot.offset;
    if (hot && g.requested_max && hot.offset == 0 && hot.bytes >= g.requested_max)
      hot = {};
    if (types && !g.type.empty() && !types->record(g.type, g.site.file, g.type_variant) &&
        sync_kind_of_type(g.type, g.type) == SyncKind::kLock)
      gr.lock_fields.push_back("the whole object, a " + g.type);
    if (types && !g.type.empty())
      if (const RecordLayout *rec = types->record(g.type, g.site.file, g.type_variant)) {
        for (const FieldLayout &f : rec->fields)
          if (f.sync == SyncKind::kLock)
            gr.lock_fields.push_back(member_name(f));
        // The layout the site's translation unit gave the record; where the
        // map cannot tell (a header's site in units that disagree), the first.
        if (uint32_t n = types->layouts_of(*rec); n > 1) {
          std::string note =
              "type " + rec->name + " has " + std::to_string(n) +
              " layouts in the type map (translation units built with other flags); " + g.name +
              "'s fields are layout " + std::to_string(std::max<uint32_t>(rec->variant, 1)) +
              "'s (" +
              (rec->translation_units.empty() ? std::string("?") : rec->translation_units.front()) +
              (g.type_variant ? ", the one its call site's unit gave it)"
                              : "; which one its call site allocates is not known)");
          if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end())
            out.notes.push_back(std::move(note));
        }
      }
    LineLayoutOptions lo;
    lo.hot = hot;
    LineLayout ll = analyse_line_layout(snap, g, lo);
    gr.lines_per_object = ll.lines_per_object;
    gr.straddle_fraction = ll.straddle_fraction;
    for (const auto &s : ll.strides)
      gr.strides.push_back({static_cast<int64_t>(s.bytes), s.share});
    if (plotted)
      out.plots->offsets.push_back(
          {g.id, ll.line_size, std::move(ll.offset_histogram), std::move(ll.straddling_by_offset)});
    for (size_t i = 0; i < levels.size(); ++i) {
      SetOccupancy so = set_occupancy(snap, g.objects, hot, *levels[i], pages);
      const auto at = static_cast<size_t>(levels[i]->level - 1);
      gr.set_effective_fraction[at] = so.effective.fraction;
      gr.lines_counted[at] = so.lines;
      if (so.lines && so.basis.text != out.levels[i].bits)
        gr.set_bits[at] = so.basis.text;
      if (plotted)
        out.plots->occupancy.push_back(
            fold_occupancy(g.id, levels[i]->level, so, o.plots.max_bins));
    }
    PageSpread ps = analyse_page_spread(snap, g);
    if (plotted)
      out.plots->chunks.push_back(
          first_chunks(g.id, chunk_map(snap, g, {}, o.plots.regions), o.plots.regions, ps.regions));
    gr.pages_4k = ps.pages;
    gr.pages_min = ps.pages_min;
    gr.regions_2m = ps.regions;
    gr.regions_min = ps.regions_min;
    gr.page_runs = ps.page_runs;
    out.groups.push_back(std::move(gr));
  }
  Colocation colocation = colocation_later.get();
  for (const auto &p : colocation.pairs)
    out.groups[p.a].neighbours.push_back(
        {colocation.group_ids[p.b], p.same_line, p.adjacent_line, p.same_page});
  for (size_t pos = 0; pos < out.groups.size(); ++pos) {
    GroupReport &gr = out.groups[pos];
    std::sort(gr.neighbours.begin(), gr.neighbours.end(), [](const auto &x, const auto &y) {
      return x.same_line + x.adjacent_line > y.same_line + y.adjacent_line;
    });
    if (gr.neighbours.size() > kNeighboursKept)
      gr.neighbours.resize(kNeighboursKept);
    gr.lines_total = colocation.group_lines[pos];
    gr.cross_thread_lines = colocation.group_cross_thread_lines[pos];
  }
  if (o.plots.enabled)
    colocation_corner(colocation, std::min(o.plots.groups, colocation.group_ids.size()),
                      *out.plots);
  out.htm = analyse_htm_aborts(r, snap, groups);
  if (out.htm && out.htm->unresolved)
    out.notes.push_back(std::to_string(out.htm->unresolved) +
                        " aborted transactions' lines hold no object live at " + out.at +
                        ": report at the moment the transactions ran (--at mark:NAME) to "
                        "resolve them");
  out.findings = find_problems(out, o.thresholds);
  if (o.progress)
    std::fprintf(stderr, "\r\033[K");
  return true;
}

} // namespace memlayout::inspector
