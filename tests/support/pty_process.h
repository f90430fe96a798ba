// PtyProcess: a program on a pseudo-terminal (stdin, stdout and stderr all
// on it), as a person runs it: what it writes is read back, keys are typed
// into it (Ctrl-C as "\x03" reaches it as SIGINT through the terminal).
#pragma once

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace carapace::testing {

struct PtyProcess {
  pid_t pid = -1;
  int master = -1;
  std::string out;

  PtyProcess(const std::string& binary, const std::vector<std::string>& args, const std::vector<std::string>& env) {
    std::vector<std::string> argv_s = {binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s = env;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    if (pid == 0) {
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~PtyProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (master >= 0) ::close(master);
  }

  // Reads until `pred(out)` holds or the timeout passes; whether it held.
  bool read_until(const std::function<bool(const std::string&)>& pred,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred(out)) {
      if (std::chrono::steady_clock::now() > until) return false;
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) return pred(out);  // the child closed the terminal
      out.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  void write(const std::string& text) {
    [[maybe_unused]] ssize_t n = ::write(master, text.data(), text.size());
  }

  int wait() {
    read_until([](const std::string&) { return false; }, std::chrono::seconds(30));
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

}  // namespace carapace::testing
