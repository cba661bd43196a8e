// The memlayout CLI's subcommands. Each takes the arguments after its name
// (argv[0] is the subcommand) and returns the process exit status.
//
// Two executables share them: `memlayout`, which runs programs under the
// preload (record, run) and loads no LLVM, so that a recording does not pay
// LLVM's start-up, and memlayout-full beside it, which has every command and
// to which `memlayout` hands the others. The commands that read traces and
// binaries are declared weak: null in `memlayout`, which does not link them.
#pragma once

namespace memlayout::cli {

int record_main(int argc, char **argv);
int run_main(int argc, char **argv);
[[gnu::weak]] int compare_main(int argc, char **argv);
[[gnu::weak]] int advise_main(int argc, char **argv);
[[gnu::weak]] int replay_main(int argc, char **argv);
[[gnu::weak]] int dump_main(int argc, char **argv);
[[gnu::weak]] int report_main(int argc, char **argv);
[[gnu::weak]] int diff_main(int argc, char **argv);
[[gnu::weak]] int structs_main(int argc, char **argv);

// Runs the subcommand argv[0] in memlayout-full (exec: does not return
// unless that fails, with a message and exit status 127).
int run_full_cli(int argc, char **argv);

} // namespace memlayout::cli
