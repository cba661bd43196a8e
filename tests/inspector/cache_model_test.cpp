#include "cache_model.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace memlayout::inspector;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "memlayout-cache-XXXXXX").string();
    char *p = mkdtemp(templ.data());
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void put(const fs::path &p, const std::string &text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << '\n';
}

void put_index(const fs::path &root, int i, const std::string &level, const std::string &type,
               const std::string &line, const std::string &sets, const std::string &ways,
               const std::string &size, const std::string &cpus) {
  fs::path d = root / ("index" + std::to_string(i));
  put(d / "level", level);
  put(d / "type", type);
  put(d / "coherency_line_size", line);
  if (!sets.empty())
    put(d / "number_of_sets", sets);
  put(d / "ways_of_associativity", ways);
  put(d / "size", size);
  put(d / "shared_cpu_list", cpus);
}

// The reference machine as its kernel lists it.
void sapphire_rapids(const fs::path &root) {
  put_index(root, 0, "1", "Data", "64", "64", "12", "48K", "0");
  put_index(root, 1, "1", "Instruction", "64", "64", "8", "32K", "0");
  put_index(root, 2, "2", "Unified", "64", "2048", "16", "2048K", "0");
  put_index(root, 3, "3", "Unified", "64", "114688", "15", "107520K", "0-1");
  put(root / "uevent", "");
}

std::string write_file(const TempDir &t, const std::string &text) {
  fs::path p = t.path / "cache.txt";
  std::ofstream(p) << text;
  return p.string();
}

} // namespace

TEST_CASE("sysfs: data and unified levels, instruction cache left out", "[cache_model]") {
  TempDir t;
  sapphire_rapids(t.path);
  std::string err;
  auto m = CacheModel::from_sysfs(err, t.path.string(), "GenuineIntel");
  REQUIRE(m);
  REQUIRE(m->levels.size() == 3);
  const CacheLevel &l1 = m->levels[0];
  CHECK(l1.level == 1);
  CHECK(l1.type == "Data");
  CHECK(l1.sets == 64);
  CHECK(l1.ways == 12);
  CHECK(l1.line_size == 64);
  CHECK(l1.size_bytes == 48 * 1024);
  CHECK(l1.indexing == Indexing::kVirtual);
  CHECK(l1.slices == 1);
  CHECK(l1.line_bits() == 6);
  CHECK(l1.index_bits() == 6);
  const CacheLevel &l2 = *m->find(2);
  CHECK(l2.indexing == Indexing::kPhysical);
  CHECK(l2.sets == 2048);
  CHECK(l2.slices == 1); // only the last level is sliced
  const CacheLevel &l3 = *m->find(3);
  CHECK(l3.sets == 114688);
  CHECK(l3.slices == 56);
  CHECK(l3.sets_per_slice() == 2048);
  CHECK(l3.index_bits() == 11);
  CHECK(l3.sharing == "0-1");
  CHECK(l3.size_bytes == 105ull << 20);
  CHECK(m->find(4) == nullptr);
  std::string d = m->describe();
  CHECK(d.find("L1 Data 48 KiB 12-way 64 sets 64 B line, virtually indexed, cpus 0") !=
        std::string::npos);
  CHECK(d.find("L3 Unified 105 MiB 15-way 114688 sets (56 slices x 2048)") != std::string::npos);
  CHECK(d.find("source: sysfs ") != std::string::npos);
}

TEST_CASE("sysfs: slices are inferred on Intel only", "[cache_model]") {
  TempDir t;
  sapphire_rapids(t.path);
  std::string err;
  auto amd = CacheModel::from_sysfs(err, t.path.string(), "AuthenticAMD");
  REQUIRE(amd);
  CHECK(amd->find(3)->slices == 1);
  CHECK(amd->find(3)->index_bits() == 0); // 114688 is no power of two
}

TEST_CASE("sysfs: a missing number_of_sets is derived from the size", "[cache_model]") {
  TempDir t;
  put_index(t.path, 0, "1", "Data", "64", "", "8", "32K", "0");
  std::string err;
  auto m = CacheModel::from_sysfs(err, t.path.string(), "GenuineIntel");
  REQUIRE(m);
  CHECK(m->levels[0].sets == 64);
}

TEST_CASE("sysfs: unreadable trees are errors", "[cache_model]") {
  TempDir t;
  std::string err;
  CHECK_FALSE(CacheModel::from_sysfs(err, (t.path / "absent").string(), "GenuineIntel"));
  CHECK(err.find("absent") != std::string::npos);
  put_index(t.path, 0, "1", "Data", "sixty-four", "64", "12", "48K", "0");
  CHECK_FALSE(CacheModel::from_sysfs(err, t.path.string(), "GenuineIntel"));
  CHECK(err.find("no readable data or unified cache") != std::string::npos);
  CHECK(err.find("index0") != std::string::npos);
}

TEST_CASE("this machine's sysfs", "[cache_model]") {
  if (!fs::exists(std::string(CacheModel::kSysfsRoot) + "/index0")) {
    WARN("no " << CacheModel::kSysfsRoot);
    return;
  }
  std::string err;
  auto m = CacheModel::from_sysfs(err);
  REQUIRE(m);
  const CacheLevel *l1 = m->find(1);
  REQUIRE(l1);
  CHECK(l1->type == "Data");
  CHECK(l1->indexing == Indexing::kVirtual);
  CHECK(uint64_t(l1->sets) * l1->ways * l1->line_size == l1->size_bytes);
  if (l1->size_bytes == 48 * 1024 && l1->ways == 12 && l1->line_size == 64)
    CHECK(l1->sets == 64);
  for (const CacheLevel &l : m->levels) {
    CHECK(l.type != "Instruction");
    CHECK(l.sets % l.slices == 0);
  }
  INFO(m->describe());
  SUCCEED();
}

TEST_CASE("override file: the reference machine", "[cache_model]") {
  TempDir t;
  std::string path = write_file(t, "# reference machine\n"
                                   "L1 data 48K 12-way 64B virtual\n"
                                   "\n"
                                   "L3 unified 105M 15-way 64B physical slices=56  # LLC\n"
                                   "L2 Unified 2MiB 16-way cpus=0\n");
  std::string err;
  auto m = CacheModel::from_file(path, err);
  REQUIRE(m);
  INFO(err);
  REQUIRE(m->levels.size() == 3);
  CHECK(m->levels[0].sets == 64);
  CHECK(m->levels[0].indexing == Indexing::kVirtual);
  CHECK(m->levels[1].level == 2); // sorted
  CHECK(m->levels[1].sets == 2048);
  CHECK(m->levels[1].line_size == 64); // the default
  CHECK(m->levels[1].sharing == "0");
  CHECK(m->levels[1].indexing == Indexing::kPhysical);
  CHECK(m->levels[2].sets == 114688);
  CHECK(m->levels[2].slices == 56);
  CHECK(m->levels[2].sets_per_slice() == 2048);
  CHECK(m->source == "file " + path);
}

TEST_CASE("override file: errors name the file and line", "[cache_model]") {
  TempDir t;
  struct Case {
    const char *text;
    int line;
    const char *what;
  } cases[] = {
      {"L1 data 48K 12-way\nX2 unified 2M 16-way\n", 2, "expected a level"},
      {"L1 data 48K 12-way\n\nL1 data 32K 8-way\n", 3, "L1 given twice"},
      {"L1 data 48K\n", 1, "missing the associativity"},
      {"L1 48K 12-way\n", 1, "missing the type"},
      {"L1 data 12-way\n", 1, "missing the size"},
      {"# c\nL2 unified 2M 16-way 48B\n", 2, "bad line size"},
      {"L1 instruction 32K 8-way\n", 1, "instruction caches"},
      {"L1 data 48K 12-way fast\n", 1, "unknown word 'fast'"},
      {"L1 data 48K 0-way\n", 1, "bad associativity"},
      {"L1 data 50K 12-way\n", 1, "not a whole number of sets"},
      {"L2 unified 2M 16-way sets=1024\n", 1, "sets=1024 but"},
      {"L3 unified 105M 15-way slices=5\n", 1, "do not divide into 5 slices"},
      {"# nothing\n", 1, "no cache levels"},
      // A word of a kind already given: the later one no longer wins silently.
      {"L1 data 48K 12-way 32B 128B\n", 1, "'128B' gives the line size a second time"},
      {"L1 data 48K 12-way 6-way\n", 1, "'6-way' gives the associativity a second time"},
      {"L1 data 48K 12-way virtual physical\n", 1, "'physical' gives the indexing a second time"},
      {"L1 data unified 48K 12-way\n", 1, "'unified' gives the type a second time"},
      {"L1 data 48K 32K 12-way\n", 1, "'32K' gives the size a second time"},
  };
  for (const Case &c : cases) {
    std::string path = write_file(t, c.text);
    std::string err;
    INFO(c.text);
    CHECK_FALSE(CacheModel::from_file(path, err));
    CHECK(err.rfind(path + ":" + std::to_string(c.line) + ": ", 0) == 0);
    CHECK(err.find(c.what) != std::string::npos);
  }
  std::string err;
  CHECK_FALSE(CacheModel::from_file((t.path / "nope").string(), err));
  CHECK(err.find("cannot open") != std::string::npos);
  // A byte order mark (Windows editors) is no part of the first level's name.
  std::string bom = write_file(t, "\xEF\xBB\xBF"
                                  "L1 data 48K 12-way 64B virtual\r\n");
  auto m = CacheModel::from_file(bom, err);
  INFO(err);
  REQUIRE(m);
  CHECK(m->levels.size() == 1);
}

TEST_CASE("reference model matches the platform facts", "[cache_model]") {
  CacheModel m = CacheModel::reference();
  REQUIRE(m.levels.size() == 3);
  for (const CacheLevel &l : m.levels)
    CHECK(uint64_t(l.sets) * l.ways * l.line_size == l.size_bytes);
  CHECK(m.find(3)->sets_per_slice() == 2048);
}
