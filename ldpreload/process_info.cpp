#include "process_info.h"

#include "options.h"
#include "spinlock.h"
#include "sys.h"
#include "trace_format.h"
#include "trace_writer.h"

#include <cerrno>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace memlayout::preload {

namespace {

using trace::put_varint;

// ---- Modules ---------------------------------------------------------------

struct Module {
  uintptr_t bias;
  uint64_t name_hash;
  const ElfW(Phdr) * phdr;
  // What put_module reads, kept so that a forked child's trace can list the
  // modules it inherited where dl_iterate_phdr cannot be called (a signal).
  const char *name;
  ElfW(Half) phnum;
};
constexpr size_t kMaxModules = 8192;
SpinLock g_module_lock;
Module *g_known = nullptr; // kMaxModules entries each
Module *g_seen = nullptr;
size_t g_nknown = 0, g_nseen = 0;
// A forked child's trace has listed none of the modules in g_known yet.
bool g_relist = false;
unsigned char *g_module_buf = nullptr;
constexpr size_t kModuleBufBytes = 4 << 20;
unsigned char *g_module_w = nullptr;
uint32_t g_module_count = 0;

uint64_t hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s)
    h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001b3ull;
  return h;
}

bool same(const Module &a, const Module &b) {
  return a.bias == b.bias && a.name_hash == b.name_hash;
}

const char *module_path(const char *name, char *buf, size_t cap) {
  if (name && *name)
    return name;
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

// The GNU build-id note, if the module has one mapped.
const unsigned char *build_id(const dl_phdr_info *info, size_t *len) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    auto *p = reinterpret_cast<const unsigned char *>(info->dlpi_addr + ph.p_vaddr);
    auto *end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto *nh = reinterpret_cast<const ElfW(Nhdr) *>(p);
      auto *name = p + sizeof *nh;
      auto *desc = name + ((nh->n_namesz + 3) & ~3u);
      if (desc + nh->n_descsz > end)
        break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
        *len = nh->n_descsz;
        return desc;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  *len = 0;
  return nullptr;
}

void put_module(trace::ModuleEvent what, const dl_phdr_info *info, uintptr_t bias) {
  if (g_module_w - g_module_buf > static_cast<long>(kModuleBufBytes - 8192))
    return;
  unsigned char *w = g_module_w;
  *w++ = static_cast<uint8_t>(what);
  w = put_varint(w, sys::rdtsc());
  w = put_varint(w, bias);
  char exe[4096];
  const char *path = info ? module_path(info->dlpi_name, exe, sizeof exe) : "";
  size_t plen = strnlen(path, 4096);
  w = put_varint(w, plen);
  memcpy(w, path, plen);
  w += plen;
  size_t idlen = 0;
  const unsigned char *id = info ? build_id(info, &idlen) : nullptr;
  if (idlen > 64)
    idlen = 0;
  w = put_varint(w, idlen);
  if (idlen)
    memcpy(w, id, idlen);
  w += idlen;
  unsigned nseg = 0;
  for (int i = 0; info && i < info->dlpi_phnum; ++i)
    nseg += info->dlpi_phdr[i].p_type == PT_LOAD;
  w = put_varint(w, nseg);
  for (int i = 0; info && i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD)
      continue;
    w = put_varint(w, ph.p_vaddr);
    w = put_varint(w, ph.p_memsz);
    *w++ = static_cast<uint8_t>(ph.p_flags & 7);
  }
  g_module_w = w;
  ++g_module_count;
}

int on_module(dl_phdr_info *info, size_t, void *) {
  if (g_nseen >= kMaxModules)
    return 1;
  Module m{info->dlpi_addr, hash_str(info->dlpi_name ? info->dlpi_name : ""), info->dlpi_phdr,
           info->dlpi_name, info->dlpi_phnum};
  g_seen[g_nseen++] = m;
  for (size_t i = 0; i < g_nknown; ++i)
    if (same(g_known[i], m))
      return 0;
  put_module(trace::ModuleEvent::kLoaded, info, info->dlpi_addr);
  return 0;
}

// ---- Memory map --------------------------------------------------------------

SpinLock g_map_lock;
uint32_t g_snapshot_id = 0;
char *g_maps_text = nullptr;
size_t g_maps_cap = 0;
unsigned char *g_map_buf = nullptr;
size_t g_map_cap = 0;
uint64_t *g_pagemap_buf = nullptr;
unsigned char *g_mincore_buf = nullptr;
constexpr size_t kPagemapChunk = 1 << 16; // pages per pread
constexpr size_t kMaxMapPayload = 48u << 20;
constexpr size_t kMaxOwnCopy = 4096;
sys::Range g_own[kMaxOwnCopy]; // under g_map_lock

struct Region {
  uintptr_t start, end;
  uint8_t prot;
  trace::RegionKind kind;
  uint64_t anon_huge_kib;
};

uint64_t parse_hex(const char *&p) {
  uint64_t v = 0;
  for (;; ++p) {
    char c = *p;
    if (c >= '0' && c <= '9')
      v = v * 16 + static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + static_cast<uint64_t>(c - 'a' + 10);
    else
      return v;
  }
}

// Reads /proc/self/smaps whole; grows the buffer until it fits.
bool read_smaps() {
  for (;;) {
    if (!g_maps_text) {
      g_maps_cap = 4 << 20;
      g_maps_text = static_cast<char *>(sys::map_pages(g_maps_cap));
      if (!g_maps_text)
        return false;
    }
    // The calling thread's view: once main has called pthread_exit, the
    // process's (its leader's, a zombie) is empty.
    long n = sys::read_file("/proc/thread-self/smaps", g_maps_text, g_maps_cap);
    if (n < 0)
      n = sys::read_file("/proc/self/smaps", g_maps_text, g_maps_cap);
    if (n < 0)
      return false;
    if (static_cast<size_t>(n) + 1 < g_maps_cap)
      return true;
    sys::unmap_pages(g_maps_text, g_maps_cap);
    g_maps_text = nullptr;
    g_maps_cap *= 2;
    if (g_maps_cap > (size_t{1} << 30))
      return false;
    size_t next = g_maps_cap;
    g_maps_text = static_cast<char *>(sys::map_pages(next));
    if (!g_maps_text)
      return false;
  }
}

// Parses one smaps header line ("start-end perms offset dev inode   path").
bool parse_header(const char *line, Region *r) {
  const char *p = line;
  r->start = parse_hex(p);
  if (*p++ != '-')
    return false;
  r->end = parse_hex(p);
  if (*p++ != ' ')
    return false;
  r->prot = static_cast<uint8_t>((p[0] == 'r') | (p[1] == 'w') << 1 | (p[2] == 'x') << 2);
  bool priv = p[3] == 'p';
  p += 4;
  // offset dev inode
  for (int field = 0; field < 3; ++field) {
    while (*p == ' ')
      ++p;
    while (*p && *p != ' ' && *p != '\n')
      ++p;
  }
  while (*p == ' ')
    ++p;
  const char *path = p;
  r->anon_huge_kib = 0;
  if (!strncmp(path, "[anon:", 6) &&
      !strncmp(path + 6, sys::kMappingName, strlen(sys::kMappingName)))
    return false; // the recorder's own memory
  if (*path == '\n' || *path == '\0' || !strncmp(path, "[anon:", 6))
    r->kind = trace::RegionKind::kAnonymous;
  else if (!strncmp(path, "[heap]", 6))
    r->kind = trace::RegionKind::kHeap;
  else if (!strncmp(path, "[stack", 6))
    r->kind = trace::RegionKind::kStack;
  else
    r->kind = trace::RegionKind::kOther;
  // Heap objects live in private writable anonymous memory; skip the rest.
  return priv && (r->prot & 2) &&
         (r->kind == trace::RegionKind::kAnonymous || r->kind == trace::RegionKind::kHeap);
}

unsigned char *put_frames(unsigned char *w, const Region &r, int pagemap, bool *have_pfns,
                          bool *partial, uint32_t *nruns_out, unsigned char *limit) {
  size_t ps = sys::page_size();
  size_t npages = (r.end - r.start) / ps;
  uint64_t run_start = 0, run_len = 0, run_pfn = 0, prev_end = 0;
  uint32_t nruns = 0;
  auto close_run = [&]() {
    if (!run_len)
      return;
    if (w + 3 * trace::kMaxVarintBytes > limit) {
      *partial = true;
      run_len = 0;
      return;
    }
    w = put_varint(w, run_start - prev_end);
    w = put_varint(w, run_len);
    w = put_varint(w, run_pfn);
    prev_end = run_start + run_len;
    ++nruns;
    run_len = 0;
  };
  for (size_t first = 0; first < npages; first += kPagemapChunk) {
    size_t n = npages - first < kPagemapChunk ? npages - first : kPagemapChunk;
    // A chunk with no page resident has no frames: mincore says so without
    // the pagemap's 8 bytes per page (a program reserving 256 GiB it never
    // touches made the exit snapshot read 512 MB of pagemap).
    if (g_mincore_buf &&
        mincore(reinterpret_cast<void *>(r.start + first * ps), n * ps, g_mincore_buf) == 0) {
      bool any = false;
      for (size_t i = 0; i < n && !any; ++i)
        any = g_mincore_buf[i] & 1;
      if (!any) {
        close_run();
        continue;
      }
    }
    off_t off = static_cast<off_t>((r.start / ps + first) * 8);
    long got = sys::pread_some(pagemap, g_pagemap_buf, n * 8, static_cast<uint64_t>(off));
    if (got <= 0)
      break;
    n = static_cast<size_t>(got) / 8;
    for (size_t i = 0; i < n; ++i) {
      uint64_t e = g_pagemap_buf[i];
      bool present = e >> 63;
      uint64_t pfn = e & ((1ull << 55) - 1);
      if (present && pfn)
        *have_pfns = true;
      uint64_t page = first + i;
      if (present && pfn && run_len && page == run_start + run_len && pfn == run_pfn + run_len) {
        ++run_len;
        continue;
      }
      close_run();
      if (present && pfn) {
        run_start = page;
        run_len = 1;
        run_pfn = pfn;
      }
    }
  }
  close_run();
  *nruns_out = nruns;
  return w;
}

} // namespace

void record_module_changes() {
  LockGuard g(g_module_lock);
  if (!g_known) {
    g_known = static_cast<Module *>(sys::map_pages(2 * kMaxModules * sizeof(Module)));
    g_module_buf = static_cast<unsigned char *>(sys::map_pages(kModuleBufBytes));
    if (!g_known || !g_module_buf)
      return;
    g_seen = g_known + kMaxModules;
  }
  g_module_w = g_module_buf;
  g_module_count = 0;
  g_nseen = 0;
  if (g_relist) { // every module, as loaded
    g_nknown = 0;
    g_relist = false;
  }
  dl_iterate_phdr(on_module, nullptr);
  for (size_t i = 0; i < g_nknown; ++i) {
    bool still = false;
    for (size_t j = 0; j < g_nseen && !still; ++j)
      still = same(g_known[i], g_seen[j]);
    if (!still)
      put_module(trace::ModuleEvent::kUnloaded, nullptr, g_known[i].bias);
  }
  memcpy(g_known, g_seen, g_nseen * sizeof(Module));
  g_nknown = g_nseen;
  if (g_module_count)
    g_writer.write_record(trace::RecordType::kModules, 0, g_module_count, g_module_buf,
                          static_cast<size_t>(g_module_w - g_module_buf));
}

uint32_t record_memory_map() {
  if (!g_map_lock.try_lock())
    return 0; // another thread is taking one right now; that one will do
  uint32_t id = 0;
  if (!read_smaps()) {
    g_map_lock.unlock();
    return 0;
  }
  if (!g_pagemap_buf)
    g_pagemap_buf = static_cast<uint64_t *>(sys::map_pages(kPagemapChunk * 8));
  if (!g_mincore_buf)
    g_mincore_buf = static_cast<unsigned char *>(sys::map_pages(kPagemapChunk));
  int pagemap = sys::open_file("/proc/thread-self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0)
    pagemap = sys::open_file("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  // Size the payload for the worst case (one run per page, bounded).
  size_t pages = 0;
  for (const char *line = g_maps_text; *line;) {
    Region r;
    if (*line >= '0' && *line <= '9' ? true : (*line >= 'a' && *line <= 'f'))
      if (parse_header(line, &r))
        pages += (r.end - r.start) / sys::page_size();
    const char *nl = strchr(line, '\n');
    if (!nl)
      break;
    line = nl + 1;
  }
  size_t need = 4096 + pages * 3 * trace::kMaxVarintBytes;
  if (need > kMaxMapPayload)
    need = kMaxMapPayload;
  if (need > g_map_cap) {
    sys::unmap_pages(g_map_buf, g_map_cap);
    g_map_cap = (need + 0xfffff) & ~size_t{0xfffff};
    g_map_buf = static_cast<unsigned char *>(sys::map_pages(g_map_cap));
    if (!g_map_buf)
      g_map_cap = 0;
  }
  if (g_map_buf && g_pagemap_buf) {
    id = ++g_snapshot_id;
    unsigned char *w = g_map_buf;
    unsigned char *limit = g_map_buf + g_map_cap;
    w = put_varint(w, id);
    w = put_varint(w, sys::rdtsc());
    unsigned char *flags_at = w++;
    unsigned char *count_at = w;
    w += 3; // region count as a fixed 3-byte varint, patched below
    uint32_t nregions = 0;
    bool have_pfns = false, partial = false;
    Region cur{};
    bool in_region = false;
    auto emit = [&](const Region &piece) {
      if (w + 64 > limit) {
        partial = true;
        return;
      }
      w = put_varint(w, piece.start);
      w = put_varint(w, piece.end);
      *w++ = piece.prot;
      *w++ = static_cast<uint8_t>(piece.kind);
      w = put_varint(w, piece.anon_huge_kib);
      uint32_t nruns = 0;
      unsigned char *nruns_at = w;
      w += 5; // fixed 5-byte varint
      if (pagemap >= 0 && g_options.page_frames)
        w = put_frames(w, piece, pagemap, &have_pfns, &partial, &nruns, limit);
      for (int i = 0; i < 5; ++i)
        nruns_at[i] = static_cast<uint8_t>(((nruns >> (7 * i)) & 0x7f) | (i < 4 ? 0x80 : 0));
      ++nregions;
    };
    // The kernel merges adjacent anonymous mappings, ours with the program's:
    // emit what is left of a region once the recorder's memory is cut out.
    size_t nown = sys::own_mappings(g_own, kMaxOwnCopy);
    nown = nown < kMaxOwnCopy ? nown : kMaxOwnCopy;
    auto finish = [&]() {
      if (!in_region)
        return;
      in_region = false;
      uintptr_t at = cur.start;
      bool first = true;
      auto piece_until = [&](uintptr_t end) {
        Region piece = cur;
        piece.start = at;
        piece.end = end;
        if (!first)
          piece.anon_huge_kib = 0; // smaps counts it per region: keep it once
        first = false;
        emit(piece);
      };
      for (size_t i = 0; i < nown && at < cur.end; ++i) {
        if (g_own[i].end <= at)
          continue;
        if (g_own[i].start >= cur.end)
          break;
        if (g_own[i].start > at)
          piece_until(g_own[i].start);
        at = g_own[i].end;
      }
      if (at < cur.end)
        piece_until(cur.end);
    };
    for (const char *line = g_maps_text; *line;) {
      const char *nl = strchr(line, '\n');
      bool header = (*line >= '0' && *line <= '9') || (*line >= 'a' && *line <= 'f');
      if (header) {
        finish();
        in_region = parse_header(line, &cur);
      } else if (in_region && !strncmp(line, "AnonHugePages:", 14)) {
        const char *p = line + 14;
        while (*p == ' ')
          ++p;
        uint64_t kib = 0;
        while (*p >= '0' && *p <= '9')
          kib = kib * 10 + static_cast<uint64_t>(*p++ - '0');
        cur.anon_huge_kib = kib;
      }
      if (!nl)
        break;
      line = nl + 1;
    }
    finish();
    // Without CAP_SYS_ADMIN every frame reads as 0 and put_frames emits no
    // runs, so the flag alone tells the reader.
    *flags_at = static_cast<uint8_t>((have_pfns ? trace::kMapPfns : 0) |
                                     (partial ? trace::kMapPartial : 0));
    for (int i = 0; i < 3; ++i)
      count_at[i] = static_cast<uint8_t>(((nregions >> (7 * i)) & 0x7f) | (i < 2 ? 0x80 : 0));
    g_writer.write_record(trace::RecordType::kMemoryMap, sys::gettid(), nregions, g_map_buf,
                          static_cast<size_t>(w - g_map_buf));
  }
  if (pagemap >= 0)
    sys::close_file(pagemap);
  g_map_lock.unlock();
  return id;
}

void process_info_prepare_fork() {
  g_module_lock.lock();
  g_map_lock.lock();
}
void process_info_parent_after_fork() {
  g_map_lock.unlock();
  g_module_lock.unlock();
}
void record_inherited_modules_from_signal() {
  if (!g_relist || !g_known || !g_module_lock.try_lock())
    return;
  g_module_w = g_module_buf;
  g_module_count = 0;
  for (size_t i = 0; i < g_nknown; ++i) {
    dl_phdr_info info{};
    info.dlpi_addr = g_known[i].bias;
    info.dlpi_name = g_known[i].name;
    info.dlpi_phdr = g_known[i].phdr;
    info.dlpi_phnum = g_known[i].phnum;
    put_module(trace::ModuleEvent::kLoaded, &info, info.dlpi_addr);
  }
  g_relist = false;
  if (g_module_count)
    g_writer.write_record(trace::RecordType::kModules, 0, g_module_count, g_module_buf,
                          static_cast<size_t>(g_module_w - g_module_buf));
  g_module_lock.unlock();
}

void process_info_child_after_fork() {
  g_relist = true; // the child's trace lists every module again
  g_map_lock.unlock();
  g_module_lock.unlock();
}

} // namespace memlayout::preload
