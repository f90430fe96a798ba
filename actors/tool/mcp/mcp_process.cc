#include "actors/tool/mcp/mcp_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "actors/tool/process/process_guard.h"
#include "base/text.h"

namespace carapace {

Status McpProcess::start(const McpProcessOptions& options, std::unique_ptr<McpProcess>* out) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return Status::invalid_argument("no command given");
  }
  const std::string& program = options.argv[0];
  struct stat st;
  if (::stat(options.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::invalid_argument("cannot start '" + program + "': working directory '" + options.cwd +
                                    "' is not a directory");
  }
  std::string path;
  if (int err = resolve_program(program, search_path(options.env), &path); err != 0) {
    if (err == ENOENT && program.find('/') == std::string::npos)
      return Status::not_found("cannot start '" + program + "': no such program in PATH");
    return Status::io_error("cannot start '" + program + "': " + errno_text(err));
  }
  std::unique_ptr<McpProcess> p(new McpProcess());
  p->program_ = program;
  UniqueFd in_read, out_write, err_write, report_write;
  int err = 0;
  if (!make_pipe(&in_read, &p->stdin_, &err) || !make_pipe(&p->stdout_, &out_write, &err) ||
      !make_pipe(&p->stderr_, &err_write, &err) || !make_pipe(&p->report_, &report_write, &err)) {
    return Status::io_error("cannot start '" + program + "': cannot create a pipe: " + errno_text(err));
  }
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  process_guard::ChildPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = options.cwd.c_str();
  plan.stdin_fd = in_read.get();
  plan.output_fd = out_write.get();
  plan.stderr_fd = err_write.get();
  plan.report_fd = report_write.get();
  plan.runtime_pid = ::getpid();
  plan.confine = options.confinement.apply;
  plan.confine_data = options.confinement.data;

  // A write to a server that closed its stdin must fail with EPIPE, not
  // kill the runtime: the owning thread keeps SIGPIPE blocked.
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);

  pid_t guard = ::_Fork();
  if (guard < 0) return Status::io_error("cannot start '" + program + "': fork failed: " + errno_text(errno));
  if (guard == 0) process_guard::run_guard(plan);  // never returns
  p->guard_ = guard;
  in_read.reset();
  out_write.reset();
  err_write.reset();
  report_write.reset();
  set_nonblocking(p->stdin_.get());
  set_nonblocking(p->stdout_.get());
  set_nonblocking(p->stderr_.get());
  set_nonblocking(p->report_.get());
  *out = std::move(p);
  return Status();
}

McpProcess::~McpProcess() {
  if (guard_ > 0 && !reaped_) {
    kill_all();
    reap();
  }
}

bool McpProcess::read_reports() {
  while (report_) {
    char bytes[256];
    ssize_t n = ::read(report_.get(), bytes, sizeof bytes);
    if (n > 0) {
      reports_.append(bytes, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    report_.reset();  // EOF: the guard is gone
    gone_ = true;
  }
  size_t at = 0;
  for (; at + sizeof(process_guard::Report) <= reports_.size(); at += sizeof(process_guard::Report)) {
    process_guard::Report r;
    std::memcpy(&r, reports_.data() + at, sizeof r);
    switch (r.kind) {
      case process_guard::kWorkerPid:
        worker_ = r.value;
        break;
      case process_guard::kSetupFailed:
        setup_error_ = r.value;
        break;
      case process_guard::kExecFailed:
        exec_error_ = r.value;
        break;
      case process_guard::kWaitStatus:
        wait_status_ = r.value;
        have_status_ = true;
        break;
      default:
        break;
    }
  }
  reports_.erase(0, at);
  return gone_;
}

std::string McpProcess::exit_description() const {
  if (exec_error_ != 0) return "could not be started: '" + program_ + "': " + errno_text(exec_error_);
  if (setup_error_ != 0) {
    return "could not be started: setup step " + std::to_string(setup_error_ / 65536) +
           " failed: " + errno_text(setup_error_ % 65536);
  }
  if (!have_status_) return "ended without a report (its guard was killed)";
  if (WIFEXITED(wait_status_)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) return "was killed by signal " + std::to_string(WTERMSIG(wait_status_));
  return "ended";
}

void McpProcess::terminate() {
  // The worker is not reaped until the guard sees it exit, so its group id
  // still names it (or its zombie).
  if (worker_ > 0 && !gone_) ::kill(-worker_, SIGTERM);
}

void McpProcess::kill_all() {
  if (guard_ > 0 && !reaped_) ::kill(guard_, SIGTERM);
}

void McpProcess::reap() {
  if (guard_ <= 0 || reaped_) return;
  if (!have_status_) kill_guard_remnants(guard_, worker_);  // the guard was killed before it swept
  int status = 0;
  while (::waitpid(guard_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  gone_ = true;
}

}  // namespace carapace
