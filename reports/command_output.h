// Where a command writes what it produces: standard output, or the file its
// -o names. Every command's output gets the same checks: a file that is one
// of the command's inputs is refused before anything truncates it, and a
// write that fails (a full disk, a closed pipe, /dev/full) names the file or
// standard output and the reason, for a status of 2.
#pragma once

#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace memlayout::inspector {
struct Report;
}

namespace memlayout::cli {

// `inputs` and what the analysis of `r` also read: its type map, its cache
// model and the recorded program (whose symbols it read).
std::vector<std::string> with_files_read(std::vector<std::string> inputs,
                                         const inspector::Report &r);

// True, with "memlayout COMMAND: refusing to write ..." on stderr, when
// `output` is one of `inputs` (the same file, by any path). For commands
// that check before they spend time on the analysis; CommandOutput::open
// checks again.
bool output_is_an_input(const std::string &output, const std::vector<std::string> &inputs,
                        const char *command);

// For a command that printed to stdout with stdio: flushes it, and false,
// said on stderr, when any of it did not get out.
bool stdout_written(const char *command);

class CommandOutput {
public:
  explicit CommandOutput(const char *command) : command_(command) {}

  ~CommandOutput();
  CommandOutput(const CommandOutput &) = delete;
  CommandOutput &operator=(const CommandOutput &) = delete;

  // "" or "-": standard output. False, said on stderr, when the file is an
  // input or cannot be created.
  bool open(const std::string &path, const std::vector<std::string> &inputs = {});
  // What is written here goes out at close(), in one go: the error of the
  // write that failed is the one reported.
  std::ostream &stream() { return text_; }
  bool is_terminal() const;
  // Writes it all. False, said on stderr, when any of it did not reach the
  // file.
  bool close();

private:
  const char *command_;
  std::string path_; // empty: standard output
  int fd_ = -1;
  std::ostringstream text_;
};

} // namespace memlayout::cli
