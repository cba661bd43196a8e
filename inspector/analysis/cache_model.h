// The data-cache hierarchy the analyses place objects into: levels, sets, ways,
// line size, how each level is indexed and how the last level is sliced.
// Read from sysfs on the machine that analyses, or from an override file when
// the trace came from another machine (format: docs/cache-model.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memlayout::inspector {

enum class Indexing : uint8_t {
  kVirtual,  // L1: VIPT, the index bits lie inside the 4 KiB page offset
  kPhysical, // L2, L3: the index needs the frame number above bit 11
};

const char *indexing_name(Indexing i); // "virtual", "physical"

struct CacheLevel {
  int level = 0;
  std::string type; // "Data" or "Unified"; instruction caches are left out
  uint32_t line_size = 64;
  uint32_t sets = 0; // all slices together, as sysfs reports them
  uint32_t ways = 0;
  uint64_t size_bytes = 0;
  Indexing indexing = Indexing::kPhysical;
  // LLC slices the sets are spread over (1: not sliced). A line's set is
  // (slice, set within slice); the slice is a hash of high physical bits.
  uint32_t slices = 1;
  std::string sharing; // shared_cpu_list, "" when unknown

  uint32_t sets_per_slice() const { return sets / slices; }
  unsigned line_bits() const; // log2(line_size)
  // log2(sets_per_slice()) when it is a power of two, else 0.
  unsigned index_bits() const;
};

struct CacheModel {
  std::vector<CacheLevel> levels; // ascending level, data and unified only
  std::string source;             // where it came from, for reports

  const CacheLevel *find(int level) const;
  // One line per level, e.g.
  // "L1 Data 48 KiB 12-way 64 sets 64 B line, virtually indexed, cpus 0".
  std::string describe() const;

  // Reads <root>/index*/. The slice count of an Intel LLC is not in sysfs: on
  // Intel (vendor "GenuineIntel") a last level whose set count is a multiple of
  // 2048 and larger than 2048 is taken to be sets/2048 slices of 2048 sets
  // (every Intel part since Sandy Bridge, client and server). `vendor` empty:
  // the running CPU's (CPUID). Returns nullopt with `error` set when the
  // directory has no usable data cache.
  static std::optional<CacheModel>
  from_sysfs(std::string &error, const std::string &root = kSysfsRoot, std::string vendor = {});
  // The override file (docs/cache-model.md). Errors read "PATH:LINE: what".
  static std::optional<CacheModel> from_file(const std::string &path, std::string &error);
  // The project's reference machine (design.md, "Platform facts"), for when
  // neither sysfs nor a file is available.
  static CacheModel reference();

  static constexpr const char *kSysfsRoot = "/sys/devices/system/cpu/cpu0/cache";
  static constexpr uint32_t kIntelSliceSets = 2048;
};

// "GenuineIntel", "AuthenticAMD", ... from CPUID; "" off x86.
std::string host_cpu_vendor();

} // namespace memlayout::inspector
