#include "command_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

namespace memlayout::cli {

bool output_is_an_input(const std::string &output, const std::vector<std::string> &inputs,
                        const char *command) {
  struct stat out {};
  if (output.empty() || output == "-" || stat(output.c_str(), &out) != 0)
    return false; // a file that does not exist yet is no input
  for (const std::string &in : inputs) {
    struct stat st {};
    if (stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) {
      std::fprintf(stderr,
                   "memlayout %s: refusing to write '%s': it is the input '%s', which writing "
                   "would destroy\n",
                   command, output.c_str(), in.c_str());
      return true;
    }
  }
  return false;
}

namespace {

// "memlayout COMMAND: cannot write 'PATH': why", PATH "" for stdout.
void cannot_write(const char *command, const std::string &path, const char *why) {
  if (path.empty())
    std::fprintf(stderr, "memlayout %s: cannot write to standard output: %s\n", command, why);
  else
    std::fprintf(stderr, "memlayout %s: cannot write '%s': %s\n", command, path.c_str(), why);
}

} // namespace

bool stdout_written(const char *command) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout))
    return true;
  // errno is the failing write's when this flush made it; an earlier flush's
  // failure left only the stream's error flag.
  cannot_write(command, "", errno ? std::strerror(errno) : "a write failed");
  return false;
}

CommandOutput::~CommandOutput() {
  if (fd_ > 2)
    ::close(fd_);
}

bool CommandOutput::open(const std::string &path, const std::vector<std::string> &inputs) {
  if (path.empty() || path == "-") {
    fd_ = 1;
    return true;
  }
  if (output_is_an_input(path, inputs, command_))
    return false;
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    cannot_write(command_, path, std::strerror(errno));
    return false;
  }
  return true;
}

bool CommandOutput::is_terminal() const { return fd_ == 1 && isatty(1); }

bool CommandOutput::close() {
  std::cout.flush(); // anything a command printed itself goes first
  std::fflush(stdout);
  const std::string text = text_.str();
  size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    ok = n > 0;
    if (n == 0)
      errno = EIO;
    done += ok ? static_cast<size_t>(n) : 0;
  }
  if (ok && fd_ > 2) {
    int fd = fd_;
    fd_ = -1;
    ok = ::close(fd) == 0; // NFS and quotas report here
  }
  if (!ok) {
    cannot_write(command_, path_, std::strerror(errno));
    // A cut-off file would read as a whole one later (a rules file, a
    // report a script diffs): none, as compilers leave none. Only a regular
    // file this command wrote; a device or a pipe stays.
    struct stat st {};
    if (!path_.empty() && ::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      ::unlink(path_.c_str());
  }
  return ok;
}

} // namespace memlayout::cli
