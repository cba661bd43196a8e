// The memlayout CLI's subcommands. Each takes the arguments after its name
// (argv[0] is the subcommand) and returns the process exit status.
#pragma once

namespace memlayout::cli {

int record_main(int argc, char **argv);
int run_main(int argc, char **argv);
int compare_main(int argc, char **argv);
int advise_main(int argc, char **argv);
int replay_main(int argc, char **argv);
int dump_main(int argc, char **argv);
int report_main(int argc, char **argv);
int diff_main(int argc, char **argv);
int structs_main(int argc, char **argv);

} // namespace memlayout::cli
