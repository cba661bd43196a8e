#include "cache_model.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <sys/stat.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace memlayout::inspector {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool parse_u64(std::string_view s, uint64_t &v) {
  if (s.empty())
    return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// "48K", "2048K", "105M", "48KiB", "1G", "512": bytes, binary multiples.
bool parse_size(std::string_view s, uint64_t &bytes) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9')
    ++digits;
  uint64_t n = 0;
  if (!parse_u64(s.substr(0, digits), n))
    return false;
  std::string unit = lower(s.substr(digits));
  unsigned shift = 0;
  if (unit.empty() || unit == "b")
    shift = 0;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    shift = 10;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    shift = 20;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    shift = 30;
  else
    return false;
  if (n > (UINT64_MAX >> shift))
    return false;
  bytes = n << shift;
  return true;
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

bool read_line(const std::filesystem::path &p, std::string &out) {
  std::ifstream in(p);
  if (!in || !std::getline(in, out))
    return false;
  out = std::string(trim(out));
  return true;
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Intel LLCs since Sandy Bridge are built of slices of 2048 sets; sysfs and
// CPUID leaf 4 report the sum over slices, so the slice count is inferred.
void infer_slices(CacheLevel &l, bool intel, bool last_level) {
  l.slices = 1;
  if (intel && last_level && l.sets > CacheModel::kIntelSliceSets &&
      l.sets % CacheModel::kIntelSliceSets == 0)
    l.slices = l.sets / CacheModel::kIntelSliceSets;
}

void finish(CacheModel &m, bool intel) {
  std::sort(m.levels.begin(), m.levels.end(),
            [](const CacheLevel &a, const CacheLevel &b) { return a.level < b.level; });
  for (size_t i = 0; i < m.levels.size(); ++i)
    infer_slices(m.levels[i], intel, i + 1 == m.levels.size() && m.levels[i].level >= 3);
}

} // namespace

const char *indexing_name(Indexing i) { return i == Indexing::kVirtual ? "virtual" : "physical"; }

unsigned CacheLevel::line_bits() const {
  return line_size ? static_cast<unsigned>(std::countr_zero(line_size)) : 0;
}

unsigned CacheLevel::index_bits() const {
  uint32_t s = sets_per_slice();
  return is_pow2(s) ? static_cast<unsigned>(std::countr_zero(s)) : 0;
}

const CacheLevel *CacheModel::find(int level) const {
  for (const CacheLevel &l : levels)
    if (l.level == level)
      return &l;
  return nullptr;
}

std::string CacheModel::describe() const {
  std::ostringstream o;
  for (const CacheLevel &l : levels) {
    o << 'L' << l.level << ' ' << l.type << ' ' << size_text(l.size_bytes) << ' ' << l.ways
      << "-way " << l.sets << " sets";
    if (l.slices > 1)
      o << " (" << l.slices << " slices x " << l.sets_per_slice() << ')';
    o << ' ' << l.line_size << " B line, " << indexing_name(l.indexing) << "ly indexed";
    if (!l.sharing.empty())
      o << ", cpus " << l.sharing;
    o << '\n';
  }
  o << "source: " << source << '\n';
  return o.str();
}

std::string host_cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return {};
  char v[13];
  std::memcpy(v, &b, 4);
  std::memcpy(v + 4, &d, 4);
  std::memcpy(v + 8, &c, 4);
  v[12] = 0;
  return v;
#else
  return {};
#endif
}

std::optional<CacheModel> CacheModel::from_sysfs(std::string &error, const std::string &root,
                                                 std::string vendor) {
  namespace fs = std::filesystem;
  if (vendor.empty())
    vendor = host_cpu_vendor();
  CacheModel m;
  m.source = "sysfs " + root;
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) {
    error = root + ": " + ec.message();
    return std::nullopt;
  }
  std::vector<std::string> skipped;
  for (const fs::directory_entry &e : it) {
    std::string name = e.path().filename().string();
    if (name.rfind("index", 0) != 0)
      continue;
    std::string type, s;
    if (!read_line(e.path() / "type", type) || type == "Instruction")
      continue;
    CacheLevel l;
    l.type = type;
    uint64_t level = 0, line = 0, sets = 0, ways = 0, size = 0;
    bool ok = read_line(e.path() / "level", s) && parse_u64(s, level) &&
              read_line(e.path() / "coherency_line_size", s) && parse_u64(s, line) &&
              read_line(e.path() / "ways_of_associativity", s) && parse_u64(s, ways) &&
              read_line(e.path() / "size", s) && parse_size(s, size);
    // Some kernels leave number_of_sets out; size = sets * ways * line.
    if (ok && !(read_line(e.path() / "number_of_sets", s) && parse_u64(s, sets)))
      sets = (ways && line) ? size / (ways * line) : 0;
    if (!ok || !is_pow2(line) || sets == 0 || ways == 0 || sets > UINT32_MAX || ways > UINT32_MAX ||
        line > UINT32_MAX || level > 16) {
      skipped.push_back(name);
      continue;
    }
    l.level = static_cast<int>(level);
    l.line_size = static_cast<uint32_t>(line);
    l.sets = static_cast<uint32_t>(sets);
    l.ways = static_cast<uint32_t>(ways);
    l.size_bytes = size;
    l.indexing = level == 1 ? Indexing::kVirtual : Indexing::kPhysical;
    read_line(e.path() / "shared_cpu_list", l.sharing);
    m.levels.push_back(std::move(l));
  }
  if (m.levels.empty()) {
    error = root + ": no readable data or unified cache";
    if (!skipped.empty())
      error += " (unreadable: " + skipped.front() + ")";
    return std::nullopt;
  }
  finish(m, vendor == "GenuineIntel");
  return m;
}

std::optional<CacheModel> CacheModel::from_file(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open: " + std::strerror(errno);
    return std::nullopt;
  }
  // An ifstream opens a directory and reads it as nothing.
  if (struct stat st; stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    error = path + ": cannot read: " + std::strerror(EISDIR);
    return std::nullopt;
  }
  CacheModel m;
  m.source = "file " + path;
  std::string raw;
  unsigned lineno = 0;
  auto fail = [&](const std::string &what) {
    error = path + ":" + std::to_string(lineno) + ": " + what;
    return std::nullopt;
  };
  while (std::getline(in, raw)) {
    ++lineno;
    std::string_view text(raw);
    if (lineno == 1 && text.substr(0, 3) == "\xEF\xBB\xBF")
      text.remove_prefix(3); // a UTF-8 byte order mark, as editors on Windows write
    if (size_t hash = text.find('#'); hash != std::string_view::npos)
      text = text.substr(0, hash);
    text = trim(text);
    if (text.empty())
      continue;
    std::istringstream words{std::string(text)};
    std::string w;
    words >> w;
    uint64_t level = 0;
    if (w.size() < 2 || (w[0] != 'L' && w[0] != 'l') ||
        !parse_u64(std::string_view(w).substr(1), level) || level == 0 || level > 16)
      return fail("expected a level such as L1, got '" + w + "'");
    if (m.find(static_cast<int>(level)))
      return fail("L" + std::to_string(level) + " given twice");
    CacheLevel l;
    l.level = static_cast<int>(level);
    l.indexing = level == 1 ? Indexing::kVirtual : Indexing::kPhysical;
    uint64_t size = 0, ways = 0, line = 64, sets = 0, slices = 0;
    std::set<std::string> given; // what each word gave: once per line
    auto once = [&](const char *what) {
      if (given.insert(what).second)
        return true;
      fail("'" + w + "' gives the " + what + " a second time");
      return false;
    };
    while (words >> w) {
      std::string lw = lower(w);
      std::string_view v(lw);
      const char *what =
          lw == "data" || lw == "unified" || lw == "instruction" ? "type"
          : lw == "virtual" || lw == "physical"                  ? "indexing"
          : v.size() > 4 && v.ends_with("-way")                  ? "associativity"
          : v.starts_with("slices=")                             ? "slice count"
          : v.starts_with("sets=")                               ? "set count"
          : v.starts_with("cpus=")                               ? "cpu list"
          : v.starts_with("line=") || (v.size() > 1 && v.back() == 'b' &&
                                       v.find_first_not_of("0123456789") == v.size() - 1)
              ? "line size"
          : parse_size(w, size) ? "size"
                                : nullptr; // an unknown word, refused below
      if (what && !once(what))
        return std::nullopt;
      if (lw == "data" || lw == "unified") {
        l.type = lw == "data" ? "Data" : "Unified";
      } else if (lw == "instruction") {
        return fail("instruction caches hold no heap data; leave them out");
      } else if (lw == "virtual" || lw == "physical") {
        l.indexing = lw == "virtual" ? Indexing::kVirtual : Indexing::kPhysical;
      } else if (v.size() > 4 && v.ends_with("-way")) {
        if (!parse_u64(v.substr(0, v.size() - 4), ways) || ways == 0 || ways > UINT32_MAX)
          return fail("bad associativity '" + w + "'");
      } else if (v.starts_with("slices=")) {
        if (!parse_u64(v.substr(7), slices) || slices == 0 || slices > UINT32_MAX)
          return fail("bad slice count '" + w + "'");
      } else if (v.starts_with("sets=")) {
        if (!parse_u64(v.substr(5), sets) || sets == 0 || sets > UINT32_MAX)
          return fail("bad set count '" + w + "'");
      } else if (v.starts_with("cpus=")) {
        l.sharing = w.substr(5);
      } else if (v.starts_with("line=") || (v.size() > 1 && v.back() == 'b' &&
                                            v.find_first_not_of("0123456789") == v.size() - 1)) {
        std::string_view n = v.starts_with("line=") ? v.substr(5) : v.substr(0, v.size() - 1);
        if (!parse_u64(n, line) || !is_pow2(line) || line < 8 || line > 4096)
          return fail("bad line size '" + w + "' (a power of two, 8 to 4096 bytes)");
      } else if (parse_size(w, size)) {
        // A bare number with a K/M/G unit: the capacity.
      } else {
        return fail("unknown word '" + w + "'");
      }
    }
    if (l.type.empty())
      return fail("missing the type (data or unified)");
    if (size == 0)
      return fail("missing the size (e.g. 48K)");
    if (ways == 0)
      return fail("missing the associativity (e.g. 12-way)");
    uint64_t derived = size / (ways * line);
    if (derived * ways * line != size || derived == 0)
      return fail("size " + std::to_string(size) + " is not a whole number of sets of " +
                  std::to_string(ways) + " ways x " + std::to_string(line) + " B");
    if (sets && sets != derived)
      return fail("sets=" + std::to_string(sets) +
                  " but size / (ways x line) = " + std::to_string(derived));
    if (derived > UINT32_MAX)
      return fail("too many sets");
    l.sets = static_cast<uint32_t>(derived);
    l.ways = static_cast<uint32_t>(ways);
    l.line_size = static_cast<uint32_t>(line);
    l.size_bytes = size;
    if (slices) {
      if (l.sets % slices)
        return fail(std::to_string(l.sets) + " sets do not divide into " + std::to_string(slices) +
                    " slices");
      l.slices = static_cast<uint32_t>(slices);
    }
    m.levels.push_back(std::move(l));
  }
  if (m.levels.empty()) {
    lineno = std::max(lineno, 1u);
    return fail("no cache levels");
  }
  // Slices are what the file says: no inference for someone else's machine.
  std::sort(m.levels.begin(), m.levels.end(),
            [](const CacheLevel &a, const CacheLevel &b) { return a.level < b.level; });
  return m;
}

CacheModel CacheModel::reference() {
  CacheModel m;
  m.source = "built-in reference (Sapphire Rapids-class)";
  m.levels = {
      {1, "Data", 64, 64, 12, 48ull << 10, Indexing::kVirtual, 1, ""},
      {2, "Unified", 64, 2048, 16, 2ull << 20, Indexing::kPhysical, 1, ""},
      {3, "Unified", 64, 114688, 15, 105ull << 20, Indexing::kPhysical, 56, ""},
  };
  return m;
}

} // namespace memlayout::inspector
