#include "rule_router.h"

#include "recorder.h"
#include "route_table_format.h"
#include "rules.h"
#include "spinlock.h"
#include "sys.h"
#include "trace_format.h"
#include "unwind_cfi.h"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memlayout::preload {

ML_HOT_DATA bool g_routing = false;
void (*g_arm_thread_exit)();
ML_HOT_DATA std::atomic<bool> g_pools_exist{false};
RouteCacheEntry g_route_cache[kRouteCacheSize];
Route g_routes[64];

namespace {

rules::RuleSet *g_rules;                          // in our own pages: 64 rules are ~100 KiB
char g_wanted[rules::kMaxRules][rules::kMaxName]; // normalized function keys
uint64_t g_always;                                // rules without a function key
uint64_t g_function_rules;
// Where `memlayout run` wants the counts (read at start: our variables leave
// the environment).
char g_stats_path[4096];

// The CLI's labels (route_table_format.h), mapped read-only.
const routes::TableHeader *g_table_file;
const routes::ModuleEntry *g_table_modules;
const routes::RangeEntry *g_table_ranges;
const routes::WrapperName *g_table_wrappers;

// A labelled range of loaded code, in run-time addresses.
struct CodeRange {
  uintptr_t start, end;
  uint64_t rules;
  uint64_t flags;
  uintptr_t reach; // the largest end of this range and those before it
};

// A module as it was labelled: the same file at the same addresses keeps
// its labels when the next dlopen relabels (scanning every module's symbols
// again made each dlopen under rules take 15-20 ms).
struct LabelledModule {
  dev_t dev;
  ino_t ino;
  timespec modified;
  uintptr_t lo, hi; // its loaded segments' extent
};

struct RangeTable {
  CodeRange *ranges;
  size_t count, cap;
  LabelledModule *modules;
  size_t module_count, module_cap;
};

// Readers binary-search the published table while a dlopen builds the next
// one; a replaced table is kept for a while, never freed under them.
std::atomic<RangeTable *> g_code{nullptr};
std::atomic<int> g_resolving{0};

// Lookups in flight: a replaced table is unmapped once none is, since a
// lookup that begins after the swap reads the new one (seq_cst on both
// sides). Replaced tables were all kept, and a program that loads plugins
// on demand grew by 265 KiB a dlopen (3,000 dlopens: 796 MB).
std::atomic<uint32_t> g_label_readers{0};
constexpr size_t kRetiredTables = 64;
RangeTable *g_retired[kRetiredTables];
size_t g_retired_count;

void unmap_table(RangeTable *t) {
  if (t->ranges)
    sys::unmap_pages(t->ranges, t->cap * sizeof(CodeRange));
  if (t->modules)
    sys::unmap_pages(t->modules, t->module_cap * sizeof(LabelledModule));
  sys::unmap_pages(t, sizeof(RangeTable));
}

// Under g_resolving, after the swap. Where lookups never pause, the
// oldest past kRetiredTables is left mapped, as all were.
void retire_table(RangeTable *old) {
  if (old) {
    if (g_retired_count == kRetiredTables) {
      memmove(g_retired, g_retired + 1, (kRetiredTables - 1) * sizeof(RangeTable *));
      --g_retired_count;
    }
    g_retired[g_retired_count++] = old;
  }
  if (g_label_readers.load() != 0)
    return;
  for (size_t i = 0; i < g_retired_count; ++i)
    unmap_table(g_retired[i]);
  g_retired_count = 0;
}

// The last scope of a normalized name: a cheap substring filter before the
// demangling match.
const char *last_scope(const char *name) {
  const char *p = name, *last = name;
  while ((p = strstr(p, "::")) != nullptr) {
    p += 2;
    last = p;
  }
  return last;
}

// Room for one more element in an array of the recorder's own pages
// (never the heap it routes).
template <typename T> bool make_room(T *&items, size_t count, size_t &cap, size_t first_cap) {
  if (count < cap)
    return true;
  size_t grown_cap = cap ? cap * 2 : first_cap;
  auto *grown = static_cast<T *>(sys::map_pages(grown_cap * sizeof(T)));
  if (!grown)
    return false;
  if (count)
    memcpy(grown, items, count * sizeof(T));
  if (items)
    sys::unmap_pages(items, cap * sizeof(T));
  items = grown;
  cap = grown_cap;
  return true;
}

void add_range(RangeTable *t, uintptr_t start, uintptr_t end, uint64_t rules, uint64_t flags) {
  if (make_room(t->ranges, t->count, t->cap, 1024))
    t->ranges[t->count++] = {start, end, rules, flags, end};
}

// Copies the labels of `m` from the table before, where it was labelled at
// the same addresses from the same file. False when it was not.
bool copy_labels(const RangeTable *before, const LabelledModule &m, RangeTable *t) {
  if (!before)
    return false;
  bool found = false;
  for (size_t i = 0; i < before->module_count && !found; ++i) {
    const LabelledModule &b = before->modules[i];
    found = b.dev == m.dev && b.ino == m.ino && b.lo == m.lo && b.hi == m.hi &&
            b.modified.tv_sec == m.modified.tv_sec && b.modified.tv_nsec == m.modified.tv_nsec;
  }
  if (!found)
    return false;
  // Sorted by start; modules do not overlap, so its ranges are those that
  // start within its extent.
  const CodeRange *r =
      std::lower_bound(before->ranges, before->ranges + before->count, m.lo,
                       [](const CodeRange &c, uintptr_t lo) { return c.start < lo; });
  for (; r != before->ranges + before->count && r->start < m.hi; ++r)
    add_range(t, r->start, r->end, r->rules, r->flags);
  return true;
}

bool is_wrapper_symbol(const char *name, bool *listed) {
  *listed = false;
  if (!g_table_file)
    return false;
  for (uint32_t i = 0; i < g_table_file->wrappers; ++i)
    if (strstr(name, last_scope(g_table_wrappers[i].name)) &&
        rules::symbol_matches(name, g_table_wrappers[i].name)) {
      *listed = true;
      if (g_table_wrappers[i].not_wrapper)
        return false;
    }
  return *listed;
}

// Labels the function symbols of one ELF section of a module the table does
// not list: rules by their function names, wrappers by theirs.
void scan_symbols(const unsigned char *image, size_t size, const Elf64_Shdr &symtab,
                  const Elf64_Shdr &strtab, uintptr_t load_bias, RangeTable *t) {
  if (symtab.sh_offset > size || symtab.sh_size > size - symtab.sh_offset ||
      strtab.sh_offset > size || strtab.sh_size > size - strtab.sh_offset ||
      symtab.sh_entsize != sizeof(Elf64_Sym))
    return;
  auto *syms = reinterpret_cast<const Elf64_Sym *>(image + symtab.sh_offset);
  size_t n = symtab.sh_size / sizeof(Elf64_Sym);
  const char *strings = reinterpret_cast<const char *>(image + strtab.sh_offset);
  for (size_t i = 0; i < n; ++i) {
    const Elf64_Sym &s = syms[i];
    unsigned type = ELF64_ST_TYPE(s.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_size == 0 ||
        s.st_name >= strtab.sh_size)
      continue;
    const char *name = strings + s.st_name;
    if (!memchr(name, 0, strtab.sh_size - s.st_name))
      continue;
    bool listed;
    if (is_wrapper_symbol(name, &listed)) {
      add_range(t, load_bias + s.st_value, load_bias + s.st_value + s.st_size, 0,
                routes::kSkipFrame);
      continue;
    }
    uint64_t matched = 0;
    for (unsigned r = 0; r < g_rules->count; ++r) {
      if (!(g_function_rules >> r & 1))
        continue;
      if (!strstr(name, last_scope(g_wanted[r])))
        continue;
      if (rules::symbol_matches(name, g_wanted[r]))
        matched |= uint64_t{1} << r;
    }
    if (matched)
      add_range(t, load_bias + s.st_value, load_bias + s.st_value + s.st_size, matched, 0);
  }
}

// Code of a module the table does not list that no symbol names
// (routes::symbol_extents), labelled kUnnamedCode: a frame there is pending
// (route_table_format.h).
void label_unnamed_code(const unsigned char *image, size_t size, const Elf64_Ehdr &eh,
                        uintptr_t load_bias, RangeTable *t) {
  auto *sh = reinterpret_cast<const Elf64_Shdr *>(image + eh.e_shoff);
  const Elf64_Shdr *table = nullptr;
  for (unsigned i = 0; i < eh.e_shnum; ++i)
    if (sh[i].sh_type == SHT_SYMTAB && sh[i].sh_size >= 2 * sizeof(Elf64_Sym))
      table = &sh[i];
  for (unsigned i = 0; i < eh.e_shnum && !table; ++i)
    if (sh[i].sh_type == SHT_DYNSYM)
      table = &sh[i];
  size_t n = 0;
  const Elf64_Sym *syms = nullptr;
  if (table && table->sh_entsize == sizeof(Elf64_Sym) && table->sh_offset <= size &&
      table->sh_size <= size - table->sh_offset) {
    syms = reinterpret_cast<const Elf64_Sym *>(image + table->sh_offset);
    n = table->sh_size / sizeof(Elf64_Sym);
  }
  using Sym = routes::SymbolExtent;
  size_t bytes = (n ? n : 1) * sizeof(Sym);
  auto *found = static_cast<Sym *>(sys::map_pages(bytes));
  if (!found)
    return;
  size_t count = 0;
  for (size_t i = 1; i < n; ++i) { // 0: the null symbol
    unsigned type = ELF64_ST_TYPE(syms[i].st_info);
    if (syms[i].st_shndx == SHN_UNDEF || syms[i].st_shndx >= SHN_LORESERVE ||
        (type != STT_NOTYPE && type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC))
      continue;
    found[count++] = {syms[i].st_value, syms[i].st_size};
  }
  const size_t named = routes::symbol_extents(found, count);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    if ((sh[i].sh_flags & (SHF_EXECINSTR | SHF_ALLOC)) != (SHF_EXECINSTR | SHF_ALLOC) ||
        sh[i].sh_type == SHT_NOBITS || !sh[i].sh_size)
      continue;
    uint64_t at = sh[i].sh_addr, end = sh[i].sh_addr + sh[i].sh_size;
    // The first symbol that may name something at or after `at`.
    size_t k = std::upper_bound(found, found + named, at,
                                [](uint64_t v, const Sym &x) { return v < x.lo; }) -
               found;
    if (k > 0)
      --k;
    for (; k < named && found[k].lo < end; ++k) {
      if (found[k].hi <= at)
        continue;
      if (found[k].lo > at)
        add_range(t, load_bias + at, load_bias + found[k].lo, 0, routes::kUnnamedCode);
      at = found[k].hi;
    }
    if (at < end)
      add_range(t, load_bias + at, load_bias + end, 0, routes::kUnnamedCode);
  }
  sys::unmap_pages(found, bytes);
}

void scan_module(const char *path, uintptr_t load_bias, RangeTable *t) {
  int fd = sys::open_file(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    sys::close_file(fd);
    return;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  sys::close_file(fd);
  if (map == MAP_FAILED)
    return;
  auto *image = static_cast<const unsigned char *>(map);
  auto *eh = reinterpret_cast<const Elf64_Ehdr *>(image);
  bool ok = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff < size &&
            eh->e_shnum <= (size - eh->e_shoff) / sizeof(Elf64_Shdr);
  if (ok) {
    auto *sh = reinterpret_cast<const Elf64_Shdr *>(image + eh->e_shoff);
    // .symtab holds every function (static ones too); .dynsym only the
    // exported ones. Scan both: a stripped library has only the latter.
    for (unsigned i = 0; i < eh->e_shnum; ++i)
      if ((sh[i].sh_type == SHT_SYMTAB || sh[i].sh_type == SHT_DYNSYM) &&
          sh[i].sh_link < eh->e_shnum)
        scan_symbols(image, size, sh[i], sh[sh[i].sh_link], load_bias, t);
    label_unnamed_code(image, size, *eh, load_bias, t);
  }
  munmap(map, size);
}

struct Relabelling {
  RangeTable *next;
  const RangeTable *before; // the table it replaces, or null
};

int on_module(struct dl_phdr_info *info, size_t, void *arg) {
  auto *relabelling = static_cast<Relabelling *>(arg);
  RangeTable *t = relabelling->next;
  const char *path = info->dlpi_name;
  if (!path || !*path)
    path = "/proc/self/exe";
  else if (!std::strchr(path, '/'))
    return 0; // the vDSO ("linux-vdso.so.1") has no file
  // A relative name is the one dlopen was given ("./plugin.so"), from the
  // working directory of then: as long as it has not changed, it opens.
  struct stat st;
  if (stat(path, &st) != 0)
    return 0; // no file to read labels from
  LabelledModule m{st.st_dev, st.st_ino, st.st_mtim, UINTPTR_MAX, 0};
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      m.lo = std::min<uintptr_t>(m.lo, info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
      m.hi = std::max<uintptr_t>(m.hi, info->dlpi_addr + info->dlpi_phdr[i].p_vaddr +
                                           info->dlpi_phdr[i].p_memsz);
    }
  if (m.lo < m.hi) {
    if (make_room(t->modules, t->module_count, t->module_cap, 64))
      t->modules[t->module_count++] = m;
    if (copy_labels(relabelling->before, m, t))
      return 0;
  }
  if (g_table_file) {
    for (uint32_t i = 0; i < g_table_file->modules; ++i) {
      const routes::ModuleEntry &e = g_table_modules[i];
      if (e.dev != st.st_dev || e.ino != st.st_ino)
        continue;
      for (uint32_t r = 0; r < e.range_count; ++r) {
        const routes::RangeEntry &x = g_table_ranges[e.first_range + r];
        add_range(t, info->dlpi_addr + x.lo, info->dlpi_addr + x.hi, x.rules, x.flags);
      }
      return 0;
    }
  }
  scan_module(path, info->dlpi_addr, t);
  return 0;
}

void label_loaded_code() {
  int expected = 0;
  if (!g_resolving.compare_exchange_strong(expected, 1))
    return;
  auto *t = static_cast<RangeTable *>(sys::map_pages(sizeof(RangeTable)));
  if (t) {
    Relabelling relabelling{t, g_code.load(std::memory_order_acquire)};
    dl_iterate_phdr(on_module, &relabelling);
    std::sort(t->ranges, t->ranges + t->count,
              [](const CodeRange &a, const CodeRange &b) { return a.start < b.start; });
    for (size_t i = 1; i < t->count; ++i)
      t->ranges[i].reach = std::max(t->ranges[i].end, t->ranges[i - 1].reach);
    retire_table(g_code.exchange(t));
    for (RouteCacheEntry &e : g_route_cache)
      e.pc.store(0, std::memory_order_release);
  }
  g_resolving.store(0);
}

const CodeRange *find_label(const RangeTable *t, uintptr_t pc) {
  if (!t || !t->count || pc == 0)
    return nullptr;
  uintptr_t at = pc - 1;
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->ranges[mid].start <= at)
      lo = mid + 1;
    else
      hi = mid;
  }
  // Symbol-table ranges of a later module may overlap (aliases): the last
  // range starting at or before pc, then back over those that may reach it
  // (the table's own ranges are disjoint: one step).
  for (size_t i = lo;
       i-- > 0 && t->ranges[i].reach > at && t->ranges[i].start + (uintptr_t{1} << 24) > at;)
    if (at < t->ranges[i].end)
      return &t->ranges[i];
  return nullptr;
}

// The label of the code a return address returns to (the call is at pc - 1),
// copied out while the table cannot be unmapped. False: unlabelled code.
bool label_of(uintptr_t pc, CodeRange *label) {
  g_label_readers.fetch_add(1);
  const CodeRange *found = find_label(g_code.load(), pc);
  if (found)
    *label = *found;
  g_label_readers.fetch_sub(1, std::memory_order_release);
  return found != nullptr;
}

// The first of `candidates` whose size range holds `size`: kind 0 or index + 1.
uint64_t first_fitting(uint64_t candidates, size_t size) {
  for (; candidates; candidates &= candidates - 1) {
    unsigned i = static_cast<unsigned>(__builtin_ctzll(candidates));
    if (size >= g_routes[i].size_min && size <= g_routes[i].size_max)
      return i + 1;
  }
  return 0;
}

void cache_decision(uintptr_t pc, size_t size, uint64_t kind) {
  if (size >= kMaxCachedSize)
    return;
  RouteCacheEntry &e = g_route_cache[route_slot(pc, size)];
  uintptr_t old = e.pc.load(std::memory_order_relaxed);
  if (old != 1 && e.pc.compare_exchange_strong(old, 1, std::memory_order_acquire)) {
    std::atomic_thread_fence(std::memory_order_release);
    e.decision.store(static_cast<uint64_t>(size) << 8 | kind, std::memory_order_relaxed);
    e.pc.store(pc, std::memory_order_release);
  }
}

// The rules' text from the environment, with '\n' between rules (the CLI
// writes it; a hand-set value may use ';').
bool load_rules_text(const char *text) {
  size_t len = strlen(text);
  char *copy = static_cast<char *>(sys::map_pages(len + 1));
  if (!copy)
    return false;
  for (size_t i = 0; i < len; ++i)
    copy[i] = text[i] == ';' ? '\n' : text[i];
  g_rules = static_cast<rules::RuleSet *>(sys::map_pages(sizeof(rules::RuleSet)));
  if (!g_rules)
    return false;
  rules::ParseError err{};
  if (!rules::parse_rules(copy, len, g_rules, &err)) {
    char line[32];
    line[sys::format_u64(line, err.line)] = 0;
    sys::warn("ignoring MEMLAYOUT_RULES: a bad rule on line", line);
    sys::warn(err.message);
    g_rules->count = 0;
    return false;
  }
  return g_rules->count > 0;
}

void load_route_table(const char *path) {
  int fd = sys::open_file(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sys::warn("cannot open the route table (rules match by symbol names only)", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(routes::TableHeader))) {
    sys::close_file(fd);
    return sys::warn("the route table is truncated (rules match by symbol names only)", path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  sys::close_file(fd);
  if (map == MAP_FAILED)
    return;
  auto *h = static_cast<const routes::TableHeader *>(map);
  size_t need = sizeof *h + size_t{h->modules} * sizeof(routes::ModuleEntry) +
                size_t{h->ranges} * sizeof(routes::RangeEntry) +
                size_t{h->wrappers} * sizeof(routes::WrapperName);
  bool ok = memcmp(h->magic, routes::kMagic, sizeof h->magic) == 0 &&
            h->version == routes::kVersion && h->modules <= routes::kMaxModules &&
            h->ranges <= routes::kMaxRanges && h->wrappers <= routes::kMaxWrapperNames &&
            need == size;
  if (ok) {
    auto *mods = reinterpret_cast<const routes::ModuleEntry *>(h + 1);
    for (uint32_t m = 0; m < h->modules && ok; ++m)
      ok = mods[m].first_range <= h->ranges &&
           mods[m].range_count <= h->ranges - mods[m].first_range;
  }
  if (!ok) {
    munmap(map, size);
    return sys::warn("not a route table of this version (rules match by symbol names only)", path);
  }
  g_table_file = h;
  g_table_modules = reinterpret_cast<const routes::ModuleEntry *>(h + 1);
  g_table_ranges = reinterpret_cast<const routes::RangeEntry *>(g_table_modules + h->modules);
  g_table_wrappers = reinterpret_cast<const routes::WrapperName *>(g_table_ranges + h->ranges);
}

// ---- Per-rule counts ----------------------------------------------------------

struct RuleCounts {
  uint64_t allocs[rules::kMaxRules];
  uint64_t bytes[rules::kMaxRules];
  RuleCounts *next; // all blocks ever made: live threads' and recycled ones
  bool in_use;
};

__thread RuleCounts *tl_counts __attribute__((tls_model("initial-exec")));
__thread bool tl_unwinding __attribute__((tls_model("initial-exec")));
std::atomic<RuleCounts *> g_all_counts{nullptr};
SpinLock g_counts_lock; // recycling only
uint64_t g_exited_allocs[rules::kMaxRules], g_exited_bytes[rules::kMaxRules];

[[gnu::noinline]] RuleCounts *attach_counts() {
  {
    LockGuard g(g_counts_lock);
    for (RuleCounts *c = g_all_counts.load(std::memory_order_acquire); c; c = c->next)
      if (!c->in_use) {
        c->in_use = true;
        tl_counts = c;
        break;
      }
  }
  if (!tl_counts) {
    auto *c = static_cast<RuleCounts *>(sys::map_pages(sizeof(RuleCounts)));
    if (!c)
      return nullptr;
    c->in_use = true;
    RuleCounts *head = g_all_counts.load(std::memory_order_relaxed);
    do
      c->next = head;
    while (!g_all_counts.compare_exchange_weak(head, c, std::memory_order_release));
    tl_counts = c;
  }
  if (g_arm_thread_exit)
    g_arm_thread_exit();
  return tl_counts;
}

void sum_counts(uint64_t *allocs, uint64_t *bytes) {
  for (unsigned i = 0; i < rules::kMaxRules; ++i) {
    allocs[i] = __atomic_load_n(&g_exited_allocs[i], __ATOMIC_RELAXED);
    bytes[i] = __atomic_load_n(&g_exited_bytes[i], __ATOMIC_RELAXED);
  }
  for (RuleCounts *c = g_all_counts.load(std::memory_order_acquire); c; c = c->next)
    for (unsigned i = 0; i < rules::kMaxRules; ++i) {
      allocs[i] += __atomic_load_n(&c->allocs[i], __ATOMIC_RELAXED);
      bytes[i] += __atomic_load_n(&c->bytes[i], __ATOMIC_RELAXED);
    }
}

} // namespace

void count_routed(const Route &r, size_t size) {
  RuleCounts *c = tl_counts ? tl_counts : attach_counts();
  if (!c)
    return;
  // Plain stores: only this thread writes its block; readers at exit take
  // what is there.
  __atomic_store_n(&c->allocs[r.index], c->allocs[r.index] + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&c->bytes[r.index], c->bytes[r.index] + size, __ATOMIC_RELAXED);
}

void router_thread_exit() {
  RuleCounts *c = tl_counts;
  if (!c)
    return;
  tl_counts = nullptr;
  LockGuard g(g_counts_lock);
  for (unsigned i = 0; i < rules::kMaxRules; ++i) {
    __atomic_fetch_add(&g_exited_allocs[i], c->allocs[i], __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_exited_bytes[i], c->bytes[i], __ATOMIC_RELAXED);
    __atomic_store_n(&c->allocs[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->bytes[i], 0, __ATOMIC_RELAXED);
  }
  c->in_use = false;
}

void router_child_after_fork() {
  for (unsigned i = 0; i < rules::kMaxRules; ++i)
    g_exited_allocs[i] = g_exited_bytes[i] = 0;
  for (RuleCounts *c = g_all_counts.load(std::memory_order_relaxed); c; c = c->next) {
    memset(c->allocs, 0, sizeof c->allocs);
    memset(c->bytes, 0, sizeof c->bytes);
    c->in_use = c == tl_counts; // the other threads are gone
  }
  g_counts_lock.reset_after_fork();
  // Lookups the other threads had in flight ended with them; a relabelling
  // one held (g_resolving) too.
  g_label_readers.store(0);
  g_resolving.store(0);
}

void router_write_stats() {
  if (!g_routing || !g_rules)
    return;
  const char *path = g_stats_path;
  if (!*path)
    return;
  uint64_t allocs[rules::kMaxRules], bytes[rules::kMaxRules];
  sum_counts(allocs, bytes);
  // One line per process, written at once: "memlayout-rules PID A0 B0 A1 B1 ...".
  char line[64 + rules::kMaxRules * 44];
  size_t n = 0;
  memcpy(line, "memlayout-rules ", 16);
  n = 16;
  n += sys::format_u64(line + n, static_cast<uint64_t>(sys::getpid()));
  for (unsigned i = 0; i < g_rules->count; ++i) {
    line[n++] = ' ';
    n += sys::format_u64(line + n, allocs[i]);
    line[n++] = ' ';
    n += sys::format_u64(line + n, bytes[i]);
  }
  line[n++] = '\n';
  int fd = sys::open_file(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    return;
  sys::write_all(fd, line, n);
  sys::close_file(fd);
}

size_t router_encode_stats(uint8_t *buf, size_t cap) {
  if (!g_routing || !g_rules || !g_rules->count)
    return 0;
  uint64_t allocs[rules::kMaxRules], bytes[rules::kMaxRules];
  sum_counts(allocs, bytes);
  uint8_t *w = buf, *end = buf + cap;
  auto room = [&](size_t n) { return static_cast<size_t>(end - w) >= n; };
  w = trace::put_varint(w, g_rules->count);
  for (unsigned i = 0; i < g_rules->count; ++i) {
    char text[4096];
    size_t len = rules::format_rule(g_rules->rules[i], text, sizeof text);
    if (!room(len + 40))
      return 0;
    w = trace::put_varint(w, len);
    memcpy(w, text, len);
    w += len;
    w = trace::put_varint(w, allocs[i]);
    w = trace::put_varint(w, bytes[i]);
  }
  if (!room(8))
    return 0;
  w = trace::put_varint(w, g_rules->wrapper_count);
  for (unsigned i = 0; i < g_rules->wrapper_count; ++i) {
    const rules::WrapperDecl &d = g_rules->wrappers[i];
    size_t len = strlen(d.function);
    if (!room(len + 16))
      return 0;
    *w++ = d.not_wrapper ? 1 : 0;
    w = trace::put_varint(w, len);
    memcpy(w, d.function, len);
    w += len;
  }
  return static_cast<size_t>(w - buf);
}

namespace {
SpinLock g_pool_lock;
std::atomic<bool> g_pool_failed[rules::kMaxRules];
} // namespace

seg::Pool *make_route_pool(const Route &cr, ThreadState &ts) {
  if (g_pool_failed[cr.index].load(std::memory_order_relaxed))
    return nullptr;
  Route &r = g_routes[cr.index];
  const rules::Rule &rule = g_rules->rules[cr.index];
  // Whatever the pool's making allocates goes to the program's allocator
  // unrecorded (a handler interrupting it too): no lock is taken twice.
  // Its system calls are ours: the allocation that makes the pool, when it
  // succeeds, leaves the program's errno as it was.
  sys::KeepErrno keep_errno;
  uint8_t was = ts.busy;
  enter_busy(ts);
  seg::Pool *p;
  {
    LockGuard g(g_pool_lock);
    p = r.pool.load(std::memory_order_acquire);
    if (!p && !g_pool_failed[cr.index].load(std::memory_order_relaxed)) {
      seg::PoolOptions o;
      o.alignment = rule.align;
      o.pad_to = rule.pad;
      o.huge_pages = rule.huge_pages;
      p = seg::pool_create(rule.pool, o);
      if (p) {
        g_pools_exist.store(true, std::memory_order_release);
        r.pool.store(p, std::memory_order_release);
      } else {
        g_pool_failed[cr.index].store(true, std::memory_order_relaxed);
        sys::warn("cannot create pool (its allocations go to the program's allocator)", rule.pool);
      }
    }
  }
  ts.busy = was;
  return p;
}

void router_init() {
  const char *text = getenv("MEMLAYOUT_RULES");
  if (!text || !*text || !load_rules_text(text))
    return;
  if (const char *table = getenv("MEMLAYOUT_ROUTE_TABLE"); table && *table)
    load_route_table(table);
  if (const char *stats = getenv("MEMLAYOUT_RULE_STATS");
      stats && strlen(stats) < sizeof g_stats_path)
    strcpy(g_stats_path, stats);
  for (unsigned i = 0; i < g_rules->count; ++i) {
    const rules::Rule &r = g_rules->rules[i];
    Route &route = g_routes[i];
    route.index = i;
    route.pad = r.pad;
    route.align = r.align;
    route.size_min = r.has_size ? r.size_min : 0;
    route.size_max = r.has_size ? r.size_max : UINT64_MAX;
    if (r.pool[0])
      route.name = r.pool; // the pool itself at the first allocation (route_pool)
    // file= and type= keys are resolved by the CLI into function names; a
    // rule left with only them cannot be placed here and matches nothing.
    if (r.function[0]) {
      if (rules::normalize_function(r.function, g_wanted[i], sizeof g_wanted[i]))
        g_function_rules |= uint64_t{1} << i;
    } else if (r.file[0] || r.type[0]) {
      route.size_min = 1, route.size_max = 0;
    } else {
      g_always |= uint64_t{1} << i;
    }
  }
  label_loaded_code();
  g_routing = true;
}

void router_modules_changed() {
  if (g_routing)
    label_loaded_code();
}

uint64_t frame_decision_slow(uintptr_t pc, size_t size) {
  uint64_t kind;
  if (!g_function_rules) {
    // Labels carry function rules only: whatever the frames above, the
    // rules without a function key decide (no unwinding).
    kind = first_fitting(g_always, size);
    cache_decision(pc, size, kind);
    return kind;
  }
  CodeRange label{};
  label_of(pc, &label); // unlabelled: no flags, no rules
  if (label.flags & routes::kSkipFrame)
    kind = kDecideByCaller;
  else if (label.flags & routes::kUnnamedCode)
    kind = kUnnamedFrame;
  else
    kind = first_fitting(g_always | label.rules, size);
  if (label.flags & routes::kTailCallInWrapper)
    kind |= kInWrapper;
  cache_decision(pc, size, kind);
  return kind;
}

const Route *route_by_callers(const UnwindStart &start, size_t size, uint64_t first) {
  // alloc_site()'s rule over the frames: wrapper frames are looked through;
  // an unnamed frame is pending until a wrapper above clears it (it was the
  // wrapper's inside), and the site when a named frame comes first, which
  // only rules without a function key route.
  auto unnamed_site = [size]() -> const Route * {
    uint64_t k = first_fitting(g_always, size);
    return k ? &g_routes[k - 1] : nullptr;
  };
  bool pending = first == kUnnamedFrame;
  if (first != kDecideByCaller && !pending) {
    uint64_t k = first & ~kInWrapper; // a tail call's return address: nothing below is pending
    return k ? &g_routes[k - 1] : nullptr;
  }
  // Wrappers nest a few deep at most: unwind just past the first wrapper,
  // and deeper only when the caller is a wrapper too. The unwinder's rules
  // are cached per return address, so a frame costs a few ns once warm.
  constexpr size_t kDepths[] = {3, 10};
  uintptr_t frames[10];
  size_t decided = 1; // frames[1, decided) were looked through
  for (size_t depth : kDepths) {
    size_t n = 1;
    // The unwinder's first use on a thread may allocate: that allocation is
    // decided by its own frame alone.
    if (!tl_unwinding) {
      tl_unwinding = true;
      n = cfi::unwind_rules_only(start, frames, depth);
      tl_unwinding = false;
    }
    for (size_t i = decided; i < n; ++i) {
      uint64_t kind = frame_decision(frames[i], size);
      if (kind == kDecideByCaller) {
        pending = false;
        continue;
      }
      if (kind == kUnnamedFrame) {
        pending = true; // the innermost after the last wrapper: the same decision
        continue;
      }
      if (kind & kInWrapper) {
        if (pending) {
          pending = false; // no tail call above a pending frame: wrapper code
          continue;
        }
        kind &= ~kInWrapper;
      }
      if (pending)
        return unnamed_site();
      return kind ? &g_routes[kind - 1] : nullptr;
    }
    decided = std::max(decided, n);
    if (n < depth)
      break; // the stack ended: every frame was looked through
  }
  // Every frame looked through (or the unwind stopped): the outermost, or
  // the pending unnamed one, is the site; no function rule names either.
  return unnamed_site();
}

} // namespace memlayout::preload
