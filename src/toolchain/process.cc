// Runs a child process by argument vector (posix_spawnp, never a shell) and
// captures its combined output.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kjit/build.h"
#include "kjit/errors.h"

extern char** environ;

namespace kjit {

namespace {

/// A started child whose combined stdout/stderr arrive on `fd`.
struct Child {
  pid_t pid = 0;
  int fd = -1;
};

Child spawn(const std::vector<std::string>& argv) {
  internal_check(!argv.empty(), "run_process needs a program");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw ToolchainError(std::string("kjit: cannot create a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw ToolchainError("kjit: cannot run '" + argv[0] + "': " + std::strerror(rc));
  }
  return Child{pid, fds[0]};
}

ProcessResult collect(const Child& child) {
  ProcessResult result;
  char buf[4096];
  while (true) {
    ssize_t n = read(child.fd, buf, sizeof(buf));
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(child.fd);
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv) { return collect(spawn(argv)); }

std::vector<ProcessResult> run_processes(const std::vector<std::vector<std::string>>& argvs) {
  // All start before any is waited for: nvcc and the host compiler overlap. A
  // child blocked on a full pipe only waits for its turn to be read.
  std::vector<Child> children;
  try {
    for (const auto& argv : argvs) children.push_back(spawn(argv));
  } catch (...) {
    for (const Child& c : children) collect(c);
    throw;
  }
  std::vector<ProcessResult> out;
  out.reserve(children.size());
  for (const Child& c : children) out.push_back(collect(c));
  return out;
}

}  // namespace kjit
