// Programs whose objects live in a runtime's own heap: the report says what
// it cannot see, by the modules the trace lists.
#include "managed_heap.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace memlayout::inspector;

namespace {

ModuleEntry module(const std::string &path) {
  ModuleEntry m;
  m.path = path;
  return m;
}

bool mentions(const std::vector<std::string> &notes, const std::string &text) {
  for (const std::string &n : notes)
    if (n.find(text) != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST_CASE("managed heaps are named by the modules that carry them", "[managed_heap]") {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  CHECK(managed_heap_notes({module("/usr/bin/sqlite3"), module(libc)}, "/usr/bin/sqlite3").empty());

  auto jvm = managed_heap_notes({module("/usr/lib/jvm/java-17/bin/java"), module(libc),
                                 module("/usr/lib/jvm/java-17/lib/server/libjvm.so")},
                                "/usr/lib/jvm/java-17/bin/java");
  REQUIRE(jvm.size() == 1);
  CHECK(mentions(jvm, "Java objects live in its garbage-collected heap"));

  auto node = managed_heap_notes({module("/usr/bin/node"), module("/usr/lib/libnode.so.108")},
                                 "/usr/bin/node");
  REQUIRE(node.size() == 1);
  CHECK(mentions(node, "JavaScript objects live in V8's"));

  auto python =
      managed_heap_notes({module("/usr/bin/python3.11"), module(libc)}, "/usr/bin/python3.11");
  REQUIRE(python.size() == 1);
  CHECK(mentions(python, "PYTHONMALLOC=malloc"));
  // An embedding program, by its libpython.
  CHECK(mentions(
      managed_heap_notes({module("/opt/app"), module("/usr/lib/libpython3.11.so.1.0")}, "/opt/app"),
      "pymalloc"));
  // A library whose name merely contains one of them is not one.
  CHECK(managed_heap_notes({module("/opt/mylibjvm.so.helper")}, "/opt/app").empty());
}

// Go's linker writes a .go.buildinfo section into every binary: a copy of
// this test's own executable with one added stands for a Go program.
TEST_CASE("a Go program is known by its .go.buildinfo section", "[managed_heap]") {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = '\0';
  CHECK_FALSE(is_go_binary(self));
  CHECK_FALSE(is_go_binary("/nonexistent/program"));

  char dir[] = "/tmp/managed-heap-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string info = std::string(dir) + "/info", go = std::string(dir) + "/go-program";
  std::ofstream(info) << "\xff Go buildinf:";
  const std::string cmd = "objcopy --add-section .go.buildinfo='" + info + "' '" +
                          std::string(self) + "' '" + go + "' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(is_go_binary(go));
  auto notes = managed_heap_notes({module(go)}, go);
  REQUIRE(notes.size() == 1);
  CHECK(mentions(notes, "Go values live in the Go runtime's own heap"));
  std::remove(go.c_str());
  std::remove(info.c_str());
  rmdir(dir);
}
