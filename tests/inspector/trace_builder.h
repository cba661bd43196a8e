// A test-only trace encoder that writes exactly what ldpreload/trace_format.h
// specifies, so the reader can be tested before (and independently of) the
// recorder. Deliberately simple: clarity over speed.
#pragma once

#include "trace_format.h"

#include <zstd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace memlayout::testing {

using Bytes = std::vector<uint8_t>;

// Varint/byte writer for payloads.
class Payload {
public:
  Payload &v(uint64_t x) {
    uint8_t tmp[trace::kMaxVarintBytes];
    uint8_t *e = trace::put_varint(tmp, x);
    b.insert(b.end(), tmp, e);
    return *this;
  }
  Payload &zz(int64_t x) { return v(trace::zigzag(x)); }
  Payload &u8(uint8_t x) {
    b.push_back(x);
    return *this;
  }
  Payload &str(const std::string &s) {
    v(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes b;
};

// One kEvents block: pointer deltas are computed as the format says.
class Block {
public:
  Block(uint64_t first_tsc, uint64_t clock_tsc, uint64_t clock_ns) {
    p.v(first_tsc).v(clock_tsc).v(clock_ns);
  }
  Block &alloc(trace::Api api, uint64_t ptr, uint64_t size, uint64_t usable, uint64_t stack,
               unsigned log2_align = 0) {
    head(trace::EventKind::kAlloc, api);
    delta(ptr);
    p.v(size << 1 | 1).v(usable - size).v(stack);
    if (trace::api_is_aligned(api))
      p.v(log2_align);
    return *this;
  }
  Block &free(trace::Api api, uint64_t ptr) {
    head(trace::EventKind::kFree, api);
    delta(ptr);
    return *this;
  }
  Block &realloc(trace::Api api, uint64_t old_ptr, uint64_t ptr, uint64_t size, uint64_t usable,
                 uint64_t stack) {
    head(trace::EventKind::kRealloc, api);
    delta(old_ptr);
    p.zz(static_cast<int64_t>(ptr - old_ptr));
    prev = ptr;
    p.v(size << 1 | 1).v(usable - size).v(stack);
    return *this;
  }
  Block &tick(uint64_t d) {
    head(trace::EventKind::kTick, trace::Api::kMalloc);
    p.v(d);
    return *this;
  }
  Block &mark(uint64_t string_id) {
    head(trace::EventKind::kMark, trace::Api::kMalloc);
    p.v(string_id);
    return *this;
  }
  Block &tag(uint64_t ptr, uint64_t string_id) {
    head(trace::EventKind::kTag, trace::Api::kMalloc);
    delta(ptr);
    p.v(string_id);
    return *this;
  }
  Block &ext(trace::ExtKind k, uint64_t value) {
    head(trace::EventKind::kExt, trace::Api::kMalloc);
    p.v(static_cast<uint64_t>(k)).v(value);
    return *this;
  }
  Block &free_range(uint64_t begin, uint64_t length) {
    head(trace::EventKind::kExt, trace::Api::kSegPool);
    p.v(static_cast<uint64_t>(trace::ExtKind::kFreeRange)).v(begin).v(length);
    return *this;
  }
  Block &raw(const Bytes &bytes) {
    p.b.insert(p.b.end(), bytes.begin(), bytes.end());
    return *this;
  }

  Payload p;
  uint32_t count = 0;

private:
  void head(trace::EventKind k, trace::Api a) {
    p.u8(trace::event_head(k, a));
    ++count;
  }
  void delta(uint64_t ptr) {
    p.zz(static_cast<int64_t>(ptr - prev));
    prev = ptr;
  }
  uint64_t prev = 0;
};

struct ModuleSpec {
  uint64_t load_bias = 0;
  std::string path, build_id;
  struct Seg {
    uint64_t vaddr, memsz;
    uint8_t flags;
  };
  std::vector<Seg> segments;
  trace::ModuleEvent what = trace::ModuleEvent::kLoaded;
  uint64_t tsc = 0;
};

class TraceBuilder {
public:
  // A header like the recorder's: start pair at (tsc 1000, 5 000 ns).
  TraceBuilder() {
    u32(trace::HeaderTag::kPid, 4242);
    u32(trace::HeaderTag::kParentPid, 1);
    u64(trace::HeaderTag::kStartRealtimeNs, 1700000000000000000ull);
    u64(trace::HeaderTag::kStartTsc, 1000);
    u64(trace::HeaderTag::kStartMonotonicNs, 5000);
    u32(trace::HeaderTag::kPageSize, 4096);
    str(trace::HeaderTag::kAllocator, "native");
    str(trace::HeaderTag::kExecutable, "/usr/bin/example");
    str(trace::HeaderTag::kCommandLine, std::string("example\0--flag\0", 15));
    u32(trace::HeaderTag::kPointerBits, 64);
    u32(trace::HeaderTag::kUsableModel, 0); // none: every event spells its usable size out
  }
  static TraceBuilder bare() { return TraceBuilder(0); }

  TraceBuilder &field(uint16_t tag, const Bytes &value) {
    trace::HeaderField f{tag, static_cast<uint16_t>(value.size())};
    append(fields, &f, sizeof f);
    fields.insert(fields.end(), value.begin(), value.end());
    return *this;
  }
  TraceBuilder &u32(trace::HeaderTag t, uint32_t v) {
    return field(static_cast<uint16_t>(t),
                 Bytes(reinterpret_cast<uint8_t *>(&v), reinterpret_cast<uint8_t *>(&v) + 4));
  }
  TraceBuilder &u64(trace::HeaderTag t, uint64_t v) {
    return field(static_cast<uint16_t>(t),
                 Bytes(reinterpret_cast<uint8_t *>(&v), reinterpret_cast<uint8_t *>(&v) + 8));
  }
  TraceBuilder &str(trace::HeaderTag t, const std::string &s) {
    return field(static_cast<uint16_t>(t), Bytes(s.begin(), s.end()));
  }

  // Appends a record; compressed records hold one zstd frame of `raw`.
  TraceBuilder &record(trace::RecordType type, uint32_t tid, uint32_t count, const Bytes &raw,
                       bool compress = true) {
    trace::RecordHeader h{};
    h.magic = trace::kRecordMagic;
    h.type = static_cast<uint8_t>(type);
    h.tid = tid;
    h.count = count;
    h.raw_bytes = static_cast<uint32_t>(raw.size());
    Bytes payload = raw;
    if (compress && !raw.empty()) {
      payload.resize(ZSTD_compressBound(raw.size()));
      size_t n = ZSTD_compress(payload.data(), payload.size(), raw.data(), raw.size(), 3);
      if (ZSTD_isError(n))
        throw std::runtime_error(ZSTD_getErrorName(n));
      payload.resize(n);
      h.flags = trace::kRecordCompressed;
    }
    h.payload_bytes = static_cast<uint32_t>(payload.size());
    record_offsets.push_back(records.size());
    append(records, &h, sizeof h);
    records.insert(records.end(), payload.begin(), payload.end());
    return *this;
  }
  TraceBuilder &events(uint32_t tid, const Block &b, bool compress = true) {
    return record(trace::RecordType::kEvents, tid, b.count, b.p.b, compress);
  }
  TraceBuilder &stacks(const std::vector<std::pair<uint64_t, std::vector<uint64_t>>> &s) {
    Payload p;
    for (const auto &[id, frames] : s) {
      p.v(id).v(frames.size());
      for (uint64_t f : frames)
        p.v(f);
    }
    return record(trace::RecordType::kStacks, 0, static_cast<uint32_t>(s.size()), p.b);
  }
  TraceBuilder &strings(const std::vector<std::pair<uint64_t, std::string>> &s) {
    Payload p;
    for (const auto &[id, text] : s)
      p.v(id).str(text);
    return record(trace::RecordType::kStrings, 0, static_cast<uint32_t>(s.size()), p.b);
  }
  TraceBuilder &thread(trace::ThreadEvent what, uint64_t tsc, uint64_t tid, uint64_t name_id) {
    Payload p;
    p.u8(static_cast<uint8_t>(what)).v(tsc).v(tid).v(name_id);
    return record(trace::RecordType::kThread, static_cast<uint32_t>(tid), 1, p.b);
  }
  TraceBuilder &modules(const std::vector<ModuleSpec> &ms) {
    Payload p;
    for (const ModuleSpec &m : ms) {
      p.u8(static_cast<uint8_t>(m.what)).v(m.tsc).v(m.load_bias).str(m.path).str(m.build_id);
      p.v(m.segments.size());
      for (const auto &s : m.segments)
        p.v(s.vaddr).v(s.memsz).u8(s.flags);
    }
    return record(trace::RecordType::kModules, 0, static_cast<uint32_t>(ms.size()), p.b);
  }
  struct RegionSpec {
    uint64_t start, end;
    uint8_t prot, kind;
    uint64_t anon_huge_kib;
    std::vector<std::array<uint64_t, 3>> runs; // page_delta, npages, pfn as encoded
  };
  TraceBuilder &memory_map(uint64_t id, uint64_t tsc, uint8_t flags,
                           const std::vector<RegionSpec> &regions) {
    Payload p;
    p.v(id).v(tsc).u8(flags).v(regions.size());
    for (const RegionSpec &r : regions) {
      p.v(r.start).v(r.end).u8(r.prot).u8(r.kind).v(r.anon_huge_kib).v(r.runs.size());
      for (const auto &run : r.runs)
        p.v(run[0]).v(run[1]).v(run[2]);
    }
    return record(trace::RecordType::kMemoryMap, 0, static_cast<uint32_t>(regions.size()), p.b);
  }
  TraceBuilder &end(uint64_t tsc, uint64_t ns, uint64_t exit_status = 0, uint64_t events = 0,
                    trace::EndReason reason = trace::EndReason::kExit) {
    Payload p;
    p.u8(static_cast<uint8_t>(reason))
        .v(tsc)
        .v(ns)
        .v(exit_status)
        .v(events)
        .v(1)
        .v(2)
        .v(3)
        .v(4)
        .v(5);
    return record(trace::RecordType::kEnd, 0, 1, p.b);
  }

  Bytes bytes() const {
    Bytes out;
    trace::FileHeader fh{};
    std::memcpy(fh.magic, trace::kFileMagic, sizeof fh.magic);
    fh.version = version;
    fh.header_bytes = static_cast<uint16_t>(sizeof fh + fields.size());
    append(out, &fh, sizeof fh);
    out.insert(out.end(), fields.begin(), fields.end());
    header_size = out.size();
    out.insert(out.end(), records.begin(), records.end());
    return out;
  }
  // File offset of record i (valid after bytes()).
  size_t record_offset(size_t i) const { return header_size + record_offsets[i]; }

  uint16_t version = trace::kTraceVersion;
  Bytes fields, records;
  std::vector<size_t> record_offsets;
  mutable size_t header_size = 0;

private:
  explicit TraceBuilder(int) {}
  static void append(Bytes &b, const void *p, size_t n) {
    auto *c = static_cast<const uint8_t *>(p);
    b.insert(b.end(), c, c + n);
  }
};

inline void write_file(const std::string &path, const Bytes &b) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    throw std::runtime_error("cannot write " + path);
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

} // namespace memlayout::testing
