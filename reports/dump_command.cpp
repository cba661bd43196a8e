// `memlayout dump FILE [--format text|jsonl] [--symbolize]`: every event of a
// trace, one line each, in file order. The jsonl schema is a contract (see
// docs/trace-format.md); the text format is for eyes, like `perf script`.
#include "alloc_site.h"
#include "command_line.h"
#include "commands.h"
#include "freed_sizes.h"
#include "grouping.h"
#include "symbolizer.h"
#include "trace_reader.h"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unistd.h>
#include <unordered_map>

namespace memlayout::cli {

namespace {

using inspector::Event;
using inspector::Item;
using inspector::ReadStatus;
using inspector::TraceReader;
using trace::EventKind;

// Output straight to fd 1 through a large buffer: a dump can be millions of
// lines and stdio's per-call locking shows up. Stops quietly on a closed pipe.
class Out {
public:
  ~Out() { flush(); }
  void put(char c) {
    if (n_ == sizeof buf_)
      flush();
    buf_[n_++] = c;
  }
  void put(std::string_view s) {
    if (s.size() > sizeof buf_ - n_) {
      flush();
      if (s.size() > sizeof buf_) {
        write_all(s.data(), s.size());
        return;
      }
    }
    std::memcpy(buf_ + n_, s.data(), s.size());
    n_ += s.size();
  }
  void u64(uint64_t v) {
    char tmp[24];
    put(std::string_view(tmp, static_cast<size_t>(std::to_chars(tmp, tmp + 24, v).ptr - tmp)));
  }
  void i64(int64_t v) {
    char tmp[24];
    put(std::string_view(tmp, static_cast<size_t>(std::to_chars(tmp, tmp + 24, v).ptr - tmp)));
  }
  void hex(uint64_t v) {
    char tmp[24] = {'0', 'x'};
    auto end = std::to_chars(tmp + 2, tmp + 24, v, 16).ptr;
    put(std::string_view(tmp, static_cast<size_t>(end - tmp)));
  }
  void flush() {
    if (n_)
      write_all(buf_, n_);
    n_ = 0;
  }
  bool closed() const { return closed_; }
  int error() const { return error_; }

private:
  void write_all(const char *p, size_t n) {
    while (n > 0 && !closed_) {
      ssize_t w = ::write(1, p, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        closed_ = true; // EPIPE: the reader went away (`| head`); anything else is an error
        error_ = w < 0 && errno != EPIPE ? errno : 0;
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  char buf_[1 << 16];
  size_t n_ = 0;
  bool closed_ = false;
  int error_ = 0;
};

struct StringSink {
  std::string &s;
  void put(char c) { s += c; }
  void put(std::string_view v) { s += v; }
};

// JSON string with escapes; invalid UTF-8 (paths are bytes) becomes U+FFFD so
// every line stays parseable.
template <class Sink> void json_string(Sink &o, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  o.put('"');
  size_t i = 0, plain = 0;
  auto flush_plain = [&] { o.put(s.substr(plain, i - plain)); };
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      bool valid = len > 0 && i + len <= s.size();
      for (size_t k = 1; valid && k < len; ++k)
        valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (valid && len == 3) { // no overlongs or surrogates
        auto c1 = static_cast<unsigned char>(s[i + 1]);
        valid = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
      }
      if (valid && len == 4) {
        auto c1 = static_cast<unsigned char>(s[i + 1]);
        valid = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
      }
      if (valid) {
        i += len;
        continue;
      }
      flush_plain();
      o.put("\\ufffd");
      plain = ++i;
      continue;
    }
    flush_plain();
    switch (c) {
    case '"':
      o.put("\\\"");
      break;
    case '\\':
      o.put("\\\\");
      break;
    case '\n':
      o.put("\\n");
      break;
    case '\t':
      o.put("\\t");
      break;
    default: {
      char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      o.put(std::string_view(esc, 6));
    }
    }
    plain = ++i;
  }
  flush_plain();
  o.put('"');
}

std::string_view basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

const char *thread_what(trace::ThreadEvent w) {
  switch (w) {
  case trace::ThreadEvent::kStart:
    return "start";
  case trace::ThreadEvent::kExit:
    return "exit";
  case trace::ThreadEvent::kName:
    return "name";
  }
  return "unknown";
}

const char *region_kind(trace::RegionKind k) {
  switch (k) {
  case trace::RegionKind::kHeap:
    return "heap";
  case trace::RegionKind::kAnonymous:
    return "anonymous";
  case trace::RegionKind::kStack:
    return "stack";
  case trace::RegionKind::kOther:
    return "other";
  }
  return "unknown";
}

std::string rwx(uint8_t r, uint8_t w, uint8_t x, uint8_t flags) {
  return {flags & r ? 'r' : '-', flags & w ? 'w' : '-', flags & x ? 'x' : '-'};
}

class Dumper {
public:
  Dumper(TraceReader &r, bool jsonl, bool symbolize, inspector::WrapperPolicy wrappers)
      : r_(r), jsonl_(jsonl), wrappers_(std::move(wrappers)) {
    if (symbolize) {
      inspector::Symbolizer::Options opts;
      opts.main_executable = r.header().executable;
      sym_ = std::make_unique<inspector::Symbolizer>(r.modules(), std::move(opts));
      code_ = std::make_unique<inspector::CodeMaps>(*sym_);
    }
  }

  Out &out() { return o_; }
  inspector::Symbolizer *symbolizer() { return sym_.get(); }

  // Wrappers detected as reports detect them: from the binaries and from
  // the stacks of the whole trace, weighed by the allocations made there
  // (`whole` has read the trace through, so it holds every stack).
  void detect_wrappers(TraceReader &whole, const std::unordered_map<uint64_t, uint64_t> &weights) {
    std::vector<inspector::WeightedStack> stacks = inspector::weighted_stacks(weights, whole);
    inspector::detect_wrappers(stacks, *sym_, *code_, wrappers_);
    wrappers_decided_ = true;
  }

  void header() {
    const inspector::TraceHeader &h = r_.header();
    if (!jsonl_) {
      o_.put("# memlayout trace ");
      o_.put(r_.name());
      o_.put(": version ");
      o_.u64(h.version);
      if (h.pid) {
        o_.put(", pid ");
        o_.u64(*h.pid);
      }
      if (!h.executable.empty()) {
        o_.put(", ");
        o_.put(h.executable);
      }
      if (!h.allocator.empty()) {
        o_.put(", allocator ");
        o_.put(h.allocator);
      }
      o_.put(r_.clock_calibrated() ? ", clock calibrated\n"
                                   : ", clock uncalibrated (1 tick = 1 ns)\n");
      o_.put("#" + std::string(10, ' ') + "time     tid event    " + "api" + std::string(11, ' ') +
             "pointer" + std::string(11, ' ') + "size/usable\n");
      return;
    }
    o_.put("{\"ev\":\"header\",\"tid\":0,\"ts_ns\":0,\"file\":");
    json_string(o_, r_.name());
    num("version", h.version);
    opt("pid", h.pid);
    opt("parent_pid", h.parent_pid);
    opt("start_realtime_ns", h.start_realtime_ns);
    opt("start_tsc", h.start_tsc);
    opt("start_monotonic_ns", h.start_monotonic_ns);
    opt("page_size", h.page_size);
    str("allocator", h.allocator);
    str("unwind", h.unwind);
    opt("stack_depth", h.stack_depth);
    str("executable", h.executable);
    if (!h.command_line.empty()) { // omitted, like every field the trace lacks
      o_.put(",\"command_line\":[");
      for (size_t i = 0; i < h.command_line.size(); ++i) {
        if (i)
          o_.put(',');
        json_string(o_, h.command_line[i]);
      }
      o_.put(']');
    }
    str("hostname", h.hostname);
    str("kernel", h.kernel);
    opt("timestamp_period", h.timestamp_period);
    opt("switch_watch", h.switch_watch);
    opt("pointer_bits", h.pointer_bits);
    constexpr const char *kModels[] = {"none", "glibc", "jemalloc"};
    str("usable_model", kModels[static_cast<int>(h.usable_model)]);
    char tpn[32];
    std::snprintf(tpn, sizeof tpn, "%.9g", r_.ticks_per_ns());
    o_.put(",\"ticks_per_ns\":");
    o_.put(tpn);
    o_.put(r_.clock_calibrated() ? ",\"clock_calibrated\":true}\n"
                                 : ",\"clock_calibrated\":false}\n");
  }

  // Before the first event: frees of other threads' allocations get their
  // sizes too (freed_sizes.h).
  void pair_frees_across_threads(const std::string &path) {
    std::string error;
    if (!freed_.pair_across_threads(path, error))
      std::fprintf(stderr,
                   "memlayout dump: warning: frees of other threads' allocations print no size "
                   "(%s)\n",
                   error.c_str());
  }

  void event(const Event &e) {
    std::optional<FreedObject> freed;
    if (e.kind == EventKind::kFree)
      freed = freed_.freed(e.tid, e.ptr, e.tsc);
    else if (e.kind == EventKind::kRealloc)
      freed_.reallocated(e.tid, e.old_ptr, e.ptr, {e.size, e.usable});
    else if (e.kind == EventKind::kAlloc)
      freed_.allocated(e.tid, e.ptr, {e.size, e.usable});
    if (jsonl_)
      event_json(e, freed);
    else
      event_text(e, freed);
  }

  void modules() {
    for (const inspector::ModuleEntry &m : r_.record_modules()) {
      const char *what = m.what == trace::ModuleEvent::kLoaded     ? "loaded"
                         : m.what == trace::ModuleEvent::kUnloaded ? "unloaded"
                                                                   : "unknown";
      if (!jsonl_) {
        text_prefix(r_.ns_since_start(m.tsc), 0, "module");
        o_.put(what);
        o_.put(' ');
        text_safe(m.path);
        o_.put(" base=");
        o_.hex(m.load_bias);
        o_.put('\n');
        continue;
      }
      o_.put("{\"ev\":\"module\",\"what\":\"");
      o_.put(what);
      o_.put("\",\"tid\":0,\"ts_ns\":");
      o_.i64(r_.ns_since_start(m.tsc));
      o_.put(",\"path\":");
      json_string(o_, m.path);
      o_.put(",\"base\":\"");
      o_.hex(m.load_bias);
      o_.put("\",\"build_id\":\"");
      o_.put(inspector::hex_bytes(m.build_id));
      o_.put("\",\"segments\":[");
      for (size_t i = 0; i < m.segments.size(); ++i) {
        const inspector::ModuleSegment &s = m.segments[i];
        o_.put(i ? ",{\"vaddr\":\"" : "{\"vaddr\":\"");
        o_.hex(s.vaddr);
        o_.put("\",\"memsz\":");
        o_.u64(s.memsz);
        o_.put(",\"flags\":\"");
        o_.put(rwx(4, 2, 1, s.flags));
        o_.put("\"}");
      }
      o_.put("]}\n");
    }
  }

  void threads() {
    for (const inspector::ThreadEntry &t : r_.record_threads()) {
      const std::string *name = t.name_id ? r_.string(t.name_id) : nullptr;
      if (!jsonl_) {
        text_prefix(r_.ns_since_start(t.tsc), t.tid, "thread");
        o_.put(thread_what(t.what));
        if (name) {
          o_.put(' ');
          text_safe(*name);
        }
        o_.put('\n');
        continue;
      }
      o_.put("{\"ev\":\"thread\",\"what\":\"");
      o_.put(thread_what(t.what));
      o_.put("\",\"tid\":");
      o_.u64(t.tid);
      o_.put(",\"ts_ns\":");
      o_.i64(r_.ns_since_start(t.tsc));
      if (name)
        str("name", *name, true);
      o_.put("}\n");
    }
  }

  void memory_map() {
    const inspector::MemoryMap &m = r_.memory_map();
    uint64_t resident = 0, mapped = 0, huge = 0;
    for (const inspector::MapRegion &g : m.regions) {
      resident += g.resident_pages;
      mapped += g.end - g.start;
      huge += g.anon_huge_kib;
    }
    if (!jsonl_) {
      text_prefix(r_.ns_since_start(m.tsc), r_.record_tid(), "map");
      o_.put("snapshot ");
      o_.u64(m.snapshot_id);
      o_.put(": ");
      o_.u64(m.regions.size());
      o_.put(" regions, ");
      o_.u64(mapped);
      o_.put(" bytes mapped, ");
      o_.u64(resident);
      o_.put(" pages resident\n");
      return;
    }
    o_.put("{\"ev\":\"memory_map\",\"id\":");
    o_.u64(m.snapshot_id);
    o_.put(",\"tid\":");
    o_.u64(r_.record_tid());
    o_.put(",\"ts_ns\":");
    o_.i64(r_.ns_since_start(m.tsc));
    num("regions", m.regions.size());
    num("resident_pages", resident);
    num("mapped_bytes", mapped);
    num("anon_huge_kib", huge);
    o_.put(m.flags & trace::kMapPfns ? ",\"pfns\":true" : ",\"pfns\":false");
    o_.put(m.flags & trace::kMapKpageflags ? ",\"kpageflags\":true" : ",\"kpageflags\":false");
    o_.put(",\"region_list\":[");
    for (size_t i = 0; i < m.regions.size(); ++i) {
      const inspector::MapRegion &g = m.regions[i];
      o_.put(i ? ",{\"start\":\"" : "{\"start\":\"");
      o_.hex(g.start);
      o_.put("\",\"end\":\"");
      o_.hex(g.end);
      o_.put("\",\"prot\":\"");
      o_.put(rwx(1, 2, 4, g.prot));
      o_.put("\",\"kind\":\"");
      o_.put(region_kind(g.kind));
      o_.put('"');
      num("resident_pages", g.resident_pages);
      num("anon_huge_kib", g.anon_huge_kib);
      o_.put('}');
    }
    o_.put("]}\n");
  }

  void end() {
    const inspector::EndRecord &e = r_.end();
    if (!jsonl_) {
      text_prefix(r_.ns_since_start(e.tsc), 0, "end");
      o_.put(trace::end_reason_name(e.reason));
      o_.put(' ');
      if (e.exit_status)
        o_.u64(*e.exit_status);
      else
        o_.put('?');
      o_.put(", ");
      o_.u64(e.events);
      o_.put(" events, ");
      o_.u64(e.allocs);
      o_.put(" allocs, ");
      o_.u64(e.frees);
      o_.put(" frees, ");
      o_.u64(e.lost_events);
      o_.put(" lost\n");
      return;
    }
    o_.put("{\"ev\":\"end\",\"tid\":0,\"ts_ns\":");
    o_.i64(r_.ns_since_start(e.tsc));
    o_.put(",\"reason\":\"");
    o_.put(trace::end_reason_name(e.reason));
    o_.put("\",\"exit_status\":");
    if (e.exit_status)
      o_.u64(*e.exit_status);
    else
      o_.put("null");
    num("events", e.events);
    num("allocs", e.allocs);
    num("frees", e.frees);
    num("bytes_allocated", e.bytes_allocated);
    num("lost_events", e.lost_events);
    num("write_errors", e.write_errors);
    o_.put("}\n");
  }

  // Where the recorder stopped writing, and why: the last record of a trace
  // cut short by a file size limit.
  void stop() {
    if (!r_.stopped())
      return;
    const inspector::StopRecord &s = *r_.stopped();
    if (!jsonl_) {
      o_.put("stop: ");
      o_.put(inspector::stop_cause_text(s));
      o_.put(" (at offset ");
      o_.u64(s.offset);
      o_.put(")\n");
      return;
    }
    o_.put("{\"ev\":\"stop\",\"tid\":0,\"cause\":\"");
    o_.put(s.cause == trace::StopCause::kFileSizeLimit ? "file_size_limit" : "unknown");
    o_.put('"');
    num("limit", s.limit);
    num("offset", s.offset);
    o_.put("}\n");
  }

  void rules() {
    if (!r_.rules())
      return;
    for (const auto &rule : r_.rules()->rules) {
      if (!jsonl_) {
        o_.put("rules: ");
        o_.put(rule.text);
        o_.put(": ");
        o_.u64(rule.allocations);
        o_.put(" allocations, ");
        o_.u64(rule.bytes);
        o_.put(" bytes\n");
        continue;
      }
      o_.put("{\"ev\":\"rule\",\"tid\":0,\"rule\":");
      json_string(o_, rule.text);
      num("allocations", rule.allocations);
      num("bytes", rule.bytes);
      o_.put("}\n");
    }
    for (const auto &w : r_.rules()->wrappers) {
      if (!jsonl_) {
        o_.put(w.not_wrapper ? "rules: not-wrapper=" : "rules: wrapper=");
        o_.put(w.function);
        o_.put('\n');
        continue;
      }
      o_.put(w.not_wrapper ? "{\"ev\":\"not_wrapper\",\"tid\":0,\"function\":"
                           : "{\"ev\":\"wrapper\",\"tid\":0,\"function\":");
      json_string(o_, w.function);
      o_.put("}\n");
    }
  }

  // One line per aborted transaction of a kHtmAborts record.
  void htm_aborts() {
    static constexpr const char *kCauses[] = {"conflict", "capacity", "explicit", "other",
                                              "commits"};
    for (const inspector::HtmAbort &a : r_.record_htm_aborts()) {
      const char *cause = kCauses[std::min(static_cast<int>(a.cause), 4)];
      const std::string *region_name = a.region_id ? r_.string(a.region_id) : nullptr;
      if (a.cause == trace::HtmCause::kCommits) {
        if (!jsonl_) {
          o_.put("htm commits tid ");
          o_.u64(a.tid);
          o_.put(": ");
          o_.u64(a.line);
          if (region_name) {
            o_.put(" in ");
            o_.put(*region_name);
          }
          o_.put('\n');
        } else {
          o_.put("{\"ev\":\"htm_commits\",\"tid\":");
          o_.u64(a.tid);
          if (region_name)
            str("region", *region_name);
          num("count", a.line);
          o_.put("}\n");
        }
        continue;
      }
      const char *by = a.flags & trace::kHtmByLock    ? "fallback_lock"
                       : a.flags & trace::kHtmByPlain ? "plain"
                                                      : "transaction";
      const std::string *region = region_name;
      bool conflict = a.cause == trace::HtmCause::kConflict;
      bool capacity = a.cause == trace::HtmCause::kCapacity;
      if (!jsonl_) {
        o_.put("htm abort tid ");
        o_.u64(a.tid);
        o_.put(": ");
        o_.put(cause);
        if (region) {
          o_.put(" in ");
          o_.put(*region);
        }
        if (conflict) {
          o_.put(", line ");
          o_.hex(a.line);
          o_.put(a.flags & trace::kHtmOverlap ? " (true: " : " (false: ");
          o_.put("read ");
          o_.hex(a.read_mask);
          o_.put(" written ");
          o_.hex(a.write_mask);
          o_.put(a.flags & trace::kHtmOtherWrites ? ", other side wrote " : ", other side read ");
          o_.hex(a.other_mask);
          o_.put(", by ");
          o_.put(by);
          if (a.flags & trace::kHtmKeysKnown)
            o_.put(a.flags & trace::kHtmSameKey ? ", same key)" : ", other key)");
          else
            o_.put(")");
        } else if (capacity) {
          o_.put(a.flags & trace::kHtmWriteCapacity ? ", written lines" : ", read lines");
          o_.put(" overflowed L1 set ");
          o_.u64(a.set);
          o_.put(" (");
          o_.u64(a.l1_sets);
          o_.put('x');
          o_.u64(a.l1_ways);
          o_.put("); transaction: ");
          o_.u64(a.tx_lines);
          o_.put(" lines, ");
          o_.u64(a.tx_written_lines);
          o_.put(" written, ");
          o_.u64(a.tx_sets);
          o_.put(" sets; lines of that set:");
          for (uint64_t l : r_.htm_lines(a)) {
            o_.put(' ');
            o_.hex(l);
          }
        }
        o_.put('\n');
        continue;
      }
      o_.put("{\"ev\":\"htm_abort\",\"tid\":");
      o_.u64(a.tid);
      o_.put(",\"cause\":\"");
      o_.put(cause);
      o_.put('"');
      if (region)
        str("region", *region);
      if (conflict) {
        o_.put(",\"line\":\"");
        o_.hex(a.line);
        o_.put("\",\"read_mask\":\"");
        o_.hex(a.read_mask);
        o_.put("\",\"write_mask\":\"");
        o_.hex(a.write_mask);
        o_.put("\",\"other_mask\":\"");
        o_.hex(a.other_mask);
        o_.put(a.flags & trace::kHtmOverlap ? "\",\"true\":true" : "\",\"true\":false");
        o_.put(a.flags & trace::kHtmOtherWrites ? ",\"other_writes\":true"
                                                : ",\"other_writes\":false");
        o_.put(",\"by\":\"");
        o_.put(by);
        o_.put('"');
        if (a.flags & trace::kHtmKeysKnown)
          o_.put(a.flags & trace::kHtmSameKey ? ",\"same_key\":true" : ",\"same_key\":false");
      } else if (capacity) {
        num("set", a.set);
        num("l1_sets", a.l1_sets);
        num("l1_ways", a.l1_ways);
        num("tx_lines", a.tx_lines);
        num("tx_written_lines", a.tx_written_lines);
        num("tx_sets", a.tx_sets);
        o_.put(a.flags & trace::kHtmWriteCapacity ? ",\"written\":true" : ",\"written\":false");
        o_.put(",\"lines\":[");
        bool first = true;
        for (uint64_t l : r_.htm_lines(a)) {
          o_.put(first ? "\"" : ",\"");
          o_.hex(l);
          o_.put('"');
          first = false;
        }
        o_.put(']');
      }
      o_.put("}\n");
    }
  }

private:
  void num(const char *key, uint64_t v) {
    o_.put(",\"");
    o_.put(key);
    o_.put("\":");
    o_.u64(v);
  }
  template <class T> void opt(const char *key, const std::optional<T> &v) {
    if (v)
      num(key, *v);
  }
  void str(const char *key, const std::string &v, bool always = false) {
    if (v.empty() && !always)
      return;
    o_.put(",\"");
    o_.put(key);
    o_.put("\":");
    json_string(o_, v);
  }

  void event_json(const Event &e, const std::optional<FreedObject> &freed) {
    o_.put("{\"ev\":\"");
    o_.put(inspector::event_name(e));
    o_.put('"');
    switch (e.kind) {
    case EventKind::kAlloc:
    case EventKind::kRealloc:
      o_.put(",\"api\":\"");
      o_.put(trace::api_name(e.api));
      if (e.kind == EventKind::kRealloc) {
        o_.put("\",\"old\":\"");
        o_.hex(e.old_ptr);
      }
      o_.put("\",\"ptr\":\"");
      o_.hex(e.ptr);
      o_.put("\",\"size\":");
      o_.u64(e.size);
      o_.put(",\"usable\":");
      o_.u64(e.usable);
      if (e.alignment) {
        o_.put(",\"align\":");
        o_.u64(e.alignment);
      }
      break;
    case EventKind::kFree:
      o_.put(",\"api\":\"");
      o_.put(trace::api_name(e.api));
      o_.put("\",\"ptr\":\"");
      o_.hex(e.ptr);
      o_.put('"');
      if (freed) {
        o_.put(",\"size\":");
        o_.u64(freed->size);
        o_.put(",\"usable\":");
        o_.u64(freed->usable);
      } else {
        o_.put(",\"size\":null,\"usable\":null"); // an allocation the trace does not hold
      }
      break;
    case EventKind::kTag:
      o_.put(",\"ptr\":\"");
      o_.hex(e.ptr);
      o_.put('"');
      [[fallthrough]];
    case EventKind::kMark: {
      o_.put(",\"name\":");
      const std::string *name = r_.string(e.string_id);
      if (name)
        json_string(o_, *name);
      else
        o_.put("null");
      num("string_id", e.string_id);
      break;
    }
    case EventKind::kExt:
      if (e.ext == trace::ExtKind::kFreeRange) {
        o_.put(",\"ptr\":\"");
        o_.hex(e.ptr);
        o_.put("\",\"length\":");
        o_.u64(e.size);
        break;
      }
      o_.put(e.ext == trace::ExtKind::kFork   ? ",\"child\":"
             : e.ext == trace::ExtKind::kLost ? ",\"count\":"
                                              : ",\"id\":");
      o_.u64(e.ext_value);
      break;
    case EventKind::kTick:
      break;
    }
    o_.put(",\"tid\":");
    o_.u64(e.tid);
    o_.put(",\"ts_ns\":");
    o_.i64(r_.ns_since_start(e.tsc));
    if (e.kind == EventKind::kAlloc || e.kind == EventKind::kRealloc) {
      o_.put(",\"stack\":");
      o_.u64(e.stack_id);
      if (r_.has_stack(e.stack_id))
        o_.put(frames_json(e.stack_id));
    }
    o_.put("}\n");
  }

  // ,"frames":[...] for a stack, rendered once per stack id.
  const std::string &frames_json(uint64_t id) {
    auto [it, fresh] = rendered_.try_emplace(id);
    if (!fresh)
      return it->second;
    std::string &s = it->second;
    s = ",\"frames\":[";
    char tmp[24];
    auto hex = [&](uint64_t v) {
      s += "0x";
      s.append(tmp, std::to_chars(tmp, tmp + 24, v, 16).ptr);
    };
    bool first = true;
    for (uint64_t pc : r_.stack(id)) {
      if (!sym_) {
        s += first ? "\"" : ",\"";
        hex(pc);
        s += '"';
        first = false;
        continue;
      }
      const inspector::SymbolizedAddress &a = sym_->symbolize(pc);
      for (const inspector::SourceFrame &f : a.frames) {
        s += first ? "{\"addr\":\"" : ",{\"addr\":\"";
        first = false;
        hex(pc);
        s += "\",\"function\":";
        s += json_text(f.function);
        if (!a.resolved) {
          s += ",\"module\":";
          s += json_text(a.module
                             ? (a.module->path.empty() ? r_.header().executable : a.module->path)
                             : std::string());
          s += ",\"offset\":\"";
          hex(a.module_offset);
          s += "\"}";
          continue;
        }
        s += ",\"file\":";
        s += json_text(f.file);
        s += ",\"line\":";
        s += std::to_string(f.line);
        s += ",\"column\":";
        s += std::to_string(f.column);
        s += f.inlined ? ",\"inlined\":true}" : ",\"inlined\":false}";
      }
    }
    s += ']';
    return s;
  }

  static std::string json_text(std::string_view v) {
    std::string s;
    StringSink sink{s};
    json_string(sink, v);
    return s;
  }

  // "   0.000123456    4242 alloc    "
  // snprintf costs a third of a text dump's time; these do not.
  static char *put_hex(char *p, uint64_t v) {
    *p++ = '0';
    *p++ = 'x';
    return std::to_chars(p, p + 16, v, 16).ptr;
  }
  static char *put_right(char *p, uint64_t v, size_t width) {
    char tmp[24];
    char *e = std::to_chars(tmp, tmp + 24, v).ptr;
    for (size_t len = static_cast<size_t>(e - tmp); len < width; ++len)
      *p++ = ' ';
    std::memcpy(p, tmp, static_cast<size_t>(e - tmp));
    return p + (e - tmp);
  }

  void text_prefix(int64_t ns, uint64_t tid, std::string_view ev) {
    char buf[96];
    char *p = buf;
    bool neg = ns < 0;
    uint64_t a = neg ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    *p++ = neg ? '-' : ' ';
    p = put_right(p, a / 1000000000, 4);
    *p++ = '.';
    uint64_t frac = a % 1000000000;
    for (int i = 8; i >= 0; --i, frac /= 10)
      p[i] = static_cast<char>('0' + frac % 10);
    p += 9;
    *p++ = ' ';
    p = put_right(p, tid, 7);
    *p++ = ' ';
    o_.put(std::string_view(buf, static_cast<size_t>(p - buf)));
    o_.put(ev);
    for (size_t i = ev.size(); i < 9 || i == ev.size(); ++i) // "free_range" is longer
      o_.put(' ');
  }

  // At least one space after the field, so an overlong value cannot run into the next.
  void padded(std::string_view s, size_t width) {
    o_.put(s);
    for (size_t i = s.size(); i < width || i == s.size(); ++i)
      o_.put(' ');
  }

  // Names come from the traced program: keep each event on one line.
  void text_safe(std::string_view s) {
    for (char ch : s) {
      auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != 0x7f) {
        o_.put(ch);
      } else if (c == '\n') {
        o_.put("\\n");
      } else if (c == '\t') {
        o_.put("\\t");
      } else {
        char esc[5];
        std::snprintf(esc, sizeof esc, "\\x%02x", c);
        o_.put(std::string_view(esc, 4));
      }
    }
  }

  void event_text(const Event &e, const std::optional<FreedObject> &freed) {
    text_prefix(r_.ns_since_start(e.tsc), e.tid, inspector::event_name(e));
    char ptr[48];
    switch (e.kind) {
    case EventKind::kAlloc:
    case EventKind::kRealloc: {
      padded(trace::api_name(e.api), 14);
      char *p = ptr;
      if (e.kind == EventKind::kRealloc) {
        p = put_hex(p, e.old_ptr);
        *p++ = '-';
        *p++ = '>';
      }
      p = put_hex(p, e.ptr);
      padded(std::string_view(ptr, static_cast<size_t>(p - ptr)), 18);
      o_.u64(e.size);
      o_.put('/');
      o_.u64(e.usable);
      if (e.alignment) {
        o_.put(" align=");
        o_.u64(e.alignment);
      }
      if (sym_) {
        o_.put("  ");
        o_.put(caller_text(e.stack_id));
      }
      break;
    }
    case EventKind::kFree: {
      padded(trace::api_name(e.api), 14);
      char *p = put_hex(ptr, e.ptr);
      padded(std::string_view(ptr, static_cast<size_t>(p - ptr)), 18);
      if (freed) {
        o_.u64(freed->size);
        o_.put('/');
        o_.u64(freed->usable);
      } else {
        o_.put("?/?");
      }
      break;
    }
    case EventKind::kTag:
      padded("", 14);
      o_.hex(e.ptr);
      o_.put(' ');
      [[fallthrough]];
    case EventKind::kMark: {
      const std::string *name = r_.string(e.string_id);
      if (name)
        text_safe(*name);
      else {
        o_.put("string#");
        o_.u64(e.string_id);
      }
      break;
    }
    case EventKind::kExt:
      if (e.ext == trace::ExtKind::kFreeRange) {
        padded(trace::api_name(e.api), 14);
        o_.hex(e.ptr);
        o_.put(" length=");
        o_.u64(e.size);
        break;
      }
      o_.put(e.ext == trace::ExtKind::kFork   ? "child="
             : e.ext == trace::ExtKind::kLost ? "count="
                                              : "id=");
      o_.u64(e.ext_value);
      break;
    case EventKind::kTick:
      break;
    }
    o_.put('\n');
  }

  // The allocation site, decided as reports decide it; wrappers detected
  // from the debug information of the modules on its stack (a dump streams:
  // the whole trace's stacks are not weighed first).
  const std::string &caller_text(uint64_t id) {
    auto [it, fresh] = callers_.try_emplace(id);
    if (!fresh)
      return it->second;
    std::span<const uint64_t> stack = r_.stack(id);
    bool more = false;
    for (uint64_t pc : stack)
      if (const inspector::ModuleCode *m = code_->module_at(pc);
          !wrappers_decided_ && m && m->has_dwarf() && detected_in_.insert(m).second) {
        detected_order_.push_back(m);
        more = true;
      }
    // Each module's call sites are evidence for the others' wrappers: judged
    // again over all of them when one is added.
    if (more)
      inspector::detect_wrappers_in_modules(detected_order_, wrappers_);
    inspector::Group::Site site = inspector::alloc_site(stack, *sym_, wrappers_, code_.get());
    std::string &s = it->second;
    s = site.caller.empty() ? site.function : site.caller + " -> ??";
    if (!site.file.empty())
      s += " (" + std::string(basename(site.file)) +
           (site.line ? ":" + std::to_string(site.line) : "") + ")";
    return s;
  }

  TraceReader &r_;
  bool jsonl_;
  inspector::WrapperPolicy wrappers_;
  std::unique_ptr<inspector::Symbolizer> sym_;
  std::unique_ptr<inspector::CodeMaps> code_;
  std::set<const inspector::ModuleCode *> detected_in_;
  std::vector<const inspector::ModuleCode *> detected_order_;
  bool wrappers_decided_ = false; // detect_wrappers() ran over the whole trace
  Out o_;
  FreedSizes freed_;
  std::unordered_map<uint64_t, std::string> rendered_, callers_;
};

} // namespace

int dump_main(int argc, char **argv) {
  std::string file, format;
  bool symbolize = false;
  inspector::WrapperPolicy wrappers;
  auto app = make_command(
      "dump", "Prints every event of a trace, one per line, in the order it was written.\n\n"
              "Exit status: 0 complete trace, 1 truncated trace (all readable events are\n"
              "printed), 2 usage error or unreadable file.");
  app->add_option("FILE", file, "the trace")->required();
  add_format_option(*app, format, {"text", "jsonl"},
                    "text: aligned columns for reading; jsonl: one JSON object per line "
                    "(\"ev\", \"tid\", \"ts_ns\", ...)");
  app->add_flag("--symbolize", symbolize,
                "resolve allocation stacks to function, file and line; with text, each "
                "allocation's site as reports decide it");
  add_wrapper_options(*app, wrappers.wrappers, wrappers.not_wrappers);
  if (int rc = parse_command(*app, argc, argv); rc >= 0)
    return rc;

  TraceReader r;
  if (!r.open(file)) {
    std::fprintf(stderr, "memlayout dump: %s\n", r.error().message.c_str());
    return 2;
  }
  // A closed pipe must end the dump quietly, not kill it mid-line with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);

  Dumper d(r, format == "jsonl", symbolize, std::move(wrappers));
  if (symbolize && format != "jsonl") {
    // The sites a report would name need the whole trace's stacks weighed
    // first: one pass more before the dump streams.
    TraceReader whole;
    if (whole.open(file)) {
      std::unordered_map<uint64_t, uint64_t> weights;
      for (Item it; (it = whole.next()) != Item::kDone;)
        if (it == Item::kEvent) {
          const auto &e = whole.event();
          if ((e.kind == EventKind::kAlloc || e.kind == EventKind::kRealloc) && e.ptr)
            ++weights[e.stack_id];
        }
      d.detect_wrappers(whole, weights);
    }
  }
  d.pair_frees_across_threads(file);
  Out &o = d.out();
  d.header();
  for (Item it; !o.closed() && (it = r.next()) != Item::kDone;) {
    switch (it) {
    case Item::kEvent:
      d.event(r.event());
      break;
    case Item::kModules:
      d.modules();
      break;
    case Item::kThreads:
      d.threads();
      break;
    case Item::kMemoryMap:
      d.memory_map();
      break;
    case Item::kEnd:
      d.end();
      break;
    case Item::kRules:
      d.rules();
      break;
    case Item::kHtmAborts:
      d.htm_aborts();
      break;
    case Item::kStop:
      d.stop();
      break;
    case Item::kStacks:
    case Item::kStrings:
    case Item::kDone:
      break; // tables are resolved into the events that use them
    }
  }
  o.flush();
  if (o.closed()) {
    if (o.error() == 0)
      return 0; // the reader of our output stopped listening: not our failure
    std::fprintf(stderr, "memlayout dump: writing output: %s\n", std::strerror(o.error()));
    return 2;
  }

  for (const inspector::Diagnostic &w : r.warnings())
    std::fprintf(stderr, "memlayout dump: warning: %s\n", w.message.c_str());
  if (r.suppressed_warnings())
    std::fprintf(stderr, "memlayout dump: warning: %llu more warnings not shown\n",
                 static_cast<unsigned long long>(r.suppressed_warnings()));
  if (d.symbolizer())
    for (const std::string &w : d.symbolizer()->take_warnings())
      std::fprintf(stderr, "memlayout dump: warning: %s\n", w.c_str());

  switch (r.status()) {
  case ReadStatus::kOk:
    return 0;
  case ReadStatus::kTruncated:
    std::fprintf(stderr, "memlayout dump: warning: %s (everything before it was printed)\n",
                 r.error().message.c_str());
    return 1;
  case ReadStatus::kCorrupt:
  case ReadStatus::kUnreadable:
    break;
  }
  std::fprintf(stderr, "memlayout dump: error: %s (everything before it was printed)\n",
               r.error().message.c_str());
  return 2;
}

} // namespace memlayout::cli
