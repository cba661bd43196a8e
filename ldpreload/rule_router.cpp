#include "rule_router.h"

#include "rules.h"
#include "sys.h"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace memlayout::preload {

bool g_routing = false;
std::atomic<bool> g_pools_exist{false};
RouteCacheEntry g_route_cache[kRouteCacheSize];
Route g_routes[64];

namespace {

rules::RuleSet *g_rules; // in our own pages: 64 rules are ~100 KiB
char g_wanted[rules::kMaxRules][rules::kMaxName]; // normalized function keys
uint64_t g_always;   // rules without a function key: candidates everywhere
uint64_t g_function_rules;

struct FunctionRange {
  uintptr_t start, end;
  uint64_t rules;
};

struct RangeTable {
  FunctionRange *ranges;
  size_t count, cap;
};

// Readers binary-search the published table while a dlopen builds the next
// one; a replaced table is kept (its pages are few), never freed under them.
std::atomic<RangeTable *> g_table{nullptr};
std::atomic<int> g_resolving{0};

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

void add_range(RangeTable *t, uintptr_t start, uintptr_t end, uint64_t rules) {
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    auto *grown = static_cast<FunctionRange *>(sys::map_pages(cap * sizeof(FunctionRange)));
    if (!grown)
      return;
    if (t->count)
      memcpy(grown, t->ranges, t->count * sizeof(FunctionRange));
    if (t->ranges)
      sys::unmap_pages(t->ranges, t->cap * sizeof(FunctionRange));
    t->ranges = grown;
    t->cap = cap;
  }
  t->ranges[t->count++] = {start, end, rules};
}

// Matches the function symbols of one ELF section against the function rules.
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
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
        s.st_size == 0 || s.st_name >= strtab.sh_size)
      continue;
    const char *name = strings + s.st_name;
    if (!memchr(name, 0, strtab.sh_size - s.st_name))
      continue;
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
      add_range(t, load_bias + s.st_value, load_bias + s.st_value + s.st_size, matched);
  }
}

void scan_module(const char *path, uintptr_t load_bias, RangeTable *t) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
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
  }
  munmap(map, size);
}

int on_module(struct dl_phdr_info *info, size_t, void *arg) {
  const char *path = info->dlpi_name;
  if (!path || !*path)
    path = "/proc/self/exe";
  else if (path[0] != '/')
    return 0; // the vDSO ("linux-vdso.so.1") has no file
  scan_module(path, info->dlpi_addr, static_cast<RangeTable *>(arg));
  return 0;
}

void resolve_functions() {
  if (!g_function_rules)
    return;
  int expected = 0;
  if (!g_resolving.compare_exchange_strong(expected, 1))
    return;
  auto *t = static_cast<RangeTable *>(sys::map_pages(sizeof(RangeTable)));
  if (t) {
    dl_iterate_phdr(on_module, t);
    std::sort(t->ranges, t->ranges + t->count,
              [](const FunctionRange &a, const FunctionRange &b) { return a.start < b.start; });
    g_table.store(t, std::memory_order_release);
    for (RouteCacheEntry &e : g_route_cache)
      e.pc.store(0, std::memory_order_release);
  }
  g_resolving.store(0);
}

uint64_t function_candidates(uintptr_t pc) {
  const RangeTable *t = g_table.load(std::memory_order_acquire);
  if (!t || !t->count)
    return 0;
  // The last range starting at or before pc, then back over the (rare)
  // ranges that overlap it: aliases of one function share an address.
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->ranges[mid].start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  uint64_t rules = 0;
  for (size_t i = lo; i-- > 0 && t->ranges[i].start + (uintptr_t{1} << 24) > pc;)
    if (pc >= t->ranges[i].start && pc < t->ranges[i].end)
      rules |= t->ranges[i].rules;
  return rules;
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

} // namespace

void router_init() {
  const char *text = getenv("MEMLAYOUT_RULES");
  if (!text || !*text || !load_rules_text(text))
    return;
  for (unsigned i = 0; i < g_rules->count; ++i) {
    const rules::Rule &r = g_rules->rules[i];
    Route &route = g_routes[i];
    route.pad = r.pad;
    route.align = r.align;
    route.size_min = r.has_size ? r.size_min : 0;
    route.size_max = r.has_size ? r.size_max : UINT64_MAX;
    if (r.pool[0]) {
      seg::PoolOptions o;
      o.alignment = r.align;
      o.pad_to = r.pad;
      o.huge_pages = r.huge_pages;
      route.pool = seg::pool_create(r.pool, o);
      if (!route.pool) {
        sys::warn("cannot create pool (rule left out)", r.pool);
        route.size_min = 1, route.size_max = 0; // never matches
        continue;
      }
      route.name = seg::pool_name(route.pool);
      g_pools_exist.store(true, std::memory_order_release);
    }
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
  resolve_functions();
  g_routing = true;
}

void router_modules_changed() {
  if (g_routing)
    resolve_functions();
}

const Route *route_slow(uintptr_t pc, size_t size) {
  uint64_t candidates = g_always | function_candidates(pc);
  unsigned chosen = 0; // rule index + 1
  for (; candidates; candidates &= candidates - 1) {
    unsigned i = static_cast<unsigned>(__builtin_ctzll(candidates));
    if (size >= g_routes[i].size_min && size <= g_routes[i].size_max) {
      chosen = i + 1;
      break;
    }
  }
  if (size < kMaxCachedSize) {
    RouteCacheEntry &e = g_route_cache[route_slot(pc, size)];
    uintptr_t old = e.pc.load(std::memory_order_relaxed);
    if (old != 1 && e.pc.compare_exchange_strong(old, 1, std::memory_order_acquire)) {
      std::atomic_thread_fence(std::memory_order_release);
      e.decision.store(static_cast<uint64_t>(size) << 8 | chosen, std::memory_order_relaxed);
      e.pc.store(pc, std::memory_order_release);
    }
  }
  return chosen ? &g_routes[chosen - 1] : nullptr;
}

} // namespace memlayout::preload
