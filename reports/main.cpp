// memlayout: record allocations of unmodified programs and report where they
// landed in the caches and pages. Thin dispatcher over the subcommands, in
// both executables (commands.h).
#include "commands.h"
#include "preload_launch.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Command {
  const char *name;
  int (*main)(int, char **);
  const char *summary;
};

constexpr Command kCommands[] = {
    {"record", memlayout::cli::record_main, "run a program and record its allocations"},
    {"run", memlayout::cli::run_main, "run a program with segregation rules applied"},
    {"compare", memlayout::cli::compare_main,
     "time a program without and with rules, interleaved: does the fix pay?"},
    {"dump", memlayout::cli::dump_main, "print a trace's events"},
    {"report", memlayout::cli::report_main,
     "where each allocation group landed in caches and pages, what is wrong, what to change"},
    {"diff", memlayout::cli::diff_main,
     "what changed between two traces or reports (before and after a fix)"},
    {"advise", memlayout::cli::advise_main, "turn a report's findings into segregation rules"},
    {"replay", memlayout::cli::replay_main,
     "re-run a recorded allocation sequence under rules and report the layout"},
    {"structs", memlayout::cli::structs_main,
     "record layouts as the allocators place them, and allocation sites (clang)"},
};

void usage(FILE *out) {
  std::fprintf(out, "usage: memlayout <command> [options]\n\ncommands:\n");
  for (const auto &c : kCommands)
    std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'memlayout <command> --help' describes a command.\n");
}

} // namespace

namespace memlayout::cli {

int run_full_cli(int argc, char **argv) {
  std::string full = self_dir() + "/memlayout-full";
  std::vector<char *> args;
  args.push_back(full.data());
  for (int i = 0; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(full.c_str(), args.data());
  std::fprintf(stderr, "memlayout: cannot run %s: %s\n", full.c_str(), std::strerror(errno));
  return 127;
}

} // namespace memlayout::cli

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("memlayout " MEMLAYOUT_VERSION "\n");
    return 0;
  }
  if (!std::strcmp(argv[1], "__measure")) // compare's runs (preload_launch.h), not for people
    return memlayout::cli::measure_main(argc - 1, argv + 1);
  for (const auto &c : kCommands)
    if (!std::strcmp(argv[1], c.name))
      return c.main ? c.main(argc - 1, argv + 1) : memlayout::cli::run_full_cli(argc - 1, argv + 1);
  std::fprintf(stderr, "memlayout: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
