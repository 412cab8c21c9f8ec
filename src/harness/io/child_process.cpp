#include "harness/io/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

extern char** environ;

namespace faprobe {

pid_t start_logged_child(const std::vector<std::string>& argv_text,
                         const std::vector<std::pair<std::string, std::string>>& environment_set,
                         const std::string& log_path) {
  // Everything is prepared before fork: only async-signal-safe calls between fork and exec.
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view text(*variable);
    bool replaced = false;
    for (const auto& [name, value] : environment_set) {
      replaced = replaced || (text.size() > name.size() && text.compare(0, name.size(), name) == 0 && text[name.size()] == '=');
    }
    if (!replaced) environment.emplace_back(text);
  }
  for (const auto& [name, value] : environment_set) environment.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<std::string> arguments = argv_text;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw std::system_error(errno, std::generic_category(), "open " + log_path);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    close(log);
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (child == 0) {
    setpgid(0, 0);                     // its own group: Ctrl-C reaches it through us, once
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // and it stops (between pairs) if we die
    if (getppid() != parent) _exit(127);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    close_range(3, UINT_MAX, 0);  // not our locked --out
    execve(argv[0], argv.data(), envp.data());
    static const char message[] = "faprobe: cannot execute the child process\n";
    const ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)ignored;
    _exit(127);
  }
  close(log);
  return child;
}

std::string exit_text(int wait_status) {
  if (WIFSIGNALED(wait_status)) return fmt::format("was killed by signal {}", WTERMSIG(wait_status));
  return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
}

std::string tail_of(const std::string& path, std::size_t lines) {
  std::ifstream file(path);
  std::vector<std::string> kept;
  for (std::string line; std::getline(file, line);) {
    kept.push_back(line);
    if (kept.size() > lines) kept.erase(kept.begin());
  }
  return fmt::format("{}", fmt::join(kept, "\n"));
}

std::vector<std::string> FollowedFile::new_lines() {
  std::vector<std::string> lines;
  std::ifstream file(path_, std::ios::binary);
  if (!file) return lines;
  file.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  offset_ += chunk.size();
  partial_ += chunk;
  std::size_t begin = 0;
  for (std::size_t end; (end = partial_.find('\n', begin)) != std::string::npos; begin = end + 1) {
    if (end > begin) lines.push_back(partial_.substr(begin, end - begin));
  }
  partial_.erase(0, begin);
  return lines;
}

}  // namespace faprobe
