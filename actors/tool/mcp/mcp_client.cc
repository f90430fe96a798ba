#include "actors/tool/mcp/mcp_client.h"

#include "base/lib_log.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "actors/tool/mcp/mcp_jsonrpc.h"

namespace carapace {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrLinesKept = 20;
constexpr size_t kStderrLineMax = 4096;
constexpr size_t kShownLineMax = 200;
constexpr char kClientVersion[] = "0.1.0";

std::string shown(std::string_view line) {
  std::string s(line.substr(0, kShownLineMax));
  if (line.size() > kShownLineMax) s += "...";
  return s;
}

// What logging `line` adds to a log file, at most: its JSON-escaped length
// (a control byte as \u00XX, a byte past ASCII as a replacement character)
// and the line's framing (time, level, the "MCP server NAME (stderr): "
// prefix).
uint64_t log_cost(std::string_view line, size_t name_size) {
  uint64_t cost = 160 + name_size;
  for (unsigned char c : line) cost += c < 0x20 ? 6 : c == '"' || c == '\\' ? 2 : c >= 0x80 ? 3 : 1;
  return cost;
}

int poll_ms(Clock::time_point until) {
  auto now = Clock::now();
  if (until <= now) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
}

}  // namespace

McpClient::McpClient(McpClientOptions options) : options_(std::move(options)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

McpClient::~McpClient() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status McpClient::start(McpClientOptions options, std::unique_ptr<McpClient>* out) {
  std::unique_ptr<McpClient> c(new McpClient(std::move(options)));
  const std::string& name = c->options_.name;
  if (c->wake_fd_ < 0) return Status::io_error("MCP server " + name + ": cannot create an eventfd");
  std::promise<Status> started;
  std::future<Status> started_future = started.get_future();
  c->io_ = std::thread([client = c.get(), &started] { client->run_io(&started); });
  Status s = started_future.get();
  if (!s.ok()) {
    c->stop();
    return s.with_context("MCP server " + name);
  }
  auto fail = [&](const std::string& why) {
    std::string tail = c->stderr_tail();
    c->stop();
    return Status::io_error("MCP server " + name + ": " + why +
                            (tail.empty() ? "" : "; its stderr ends with:\n" + tail));
  };
  Reply init = c->request("initialize", mcp::initialize_params(kClientVersion), c->options_.request_timeout);
  if (init.kind != Reply::Kind::kResult) return fail("initialize failed: " + init.error);
  std::string version = init.result.is_object() && init.result.contains("protocolVersion") &&
                                init.result["protocolVersion"].is_string()
                            ? init.result["protocolVersion"].get<std::string>()
                            : "";
  if (!mcp::supported_protocol_version(version)) {
    return fail("it speaks protocol version \"" + version + "\"; Carapace speaks " +
                std::string(mcp::kProtocolVersion) + ", 2025-06-18 and 2025-03-26");
  }
  c->protocol_version_ = version;
  c->send(mcp::notification_line("notifications/initialized", json()));
  *out = std::move(c);
  return Status();
}

Status McpClient::list_tools(std::vector<mcp::ToolInfo>* tools, std::vector<std::string>* skipped) {
  tools->clear();
  std::string cursor;
  for (int page = 0; page < 1000; ++page) {
    json params = cursor.empty() ? json() : json{{"cursor", cursor}};
    Reply r = request("tools/list", params, options_.request_timeout);
    if (r.kind != Reply::Kind::kResult) {
      return Status::io_error("MCP server " + options_.name + ": tools/list failed: " + r.error);
    }
    std::string next;
    Status s = mcp::parse_tools_page(options_.name, r.result, tools, skipped, &next);
    if (!s.ok()) return s.with_context("MCP server " + options_.name);
    if (next.empty()) return Status();
    if (next == cursor) {
      return Status::invalid_argument("MCP server " + options_.name +
                                      ": tools/list returned the same cursor again");
    }
    cursor = next;
  }
  return Status::invalid_argument("MCP server " + options_.name + ": tools/list has more than 1000 pages");
}

McpClient::Reply McpClient::request(const std::string& method, const json& params,
                                    std::chrono::milliseconds timeout) {
  auto pending = std::make_shared<Pending>();
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (gone_ || stop_mode_ != 0) {
      return Reply{.kind = Reply::Kind::kGone,
                   .error = gone_reason_.empty() ? "the server is stopping" : gone_reason_};
    }
    id = ++next_id_;
    pending_[id] = pending;
    outgoing_.push_back(mcp::request_line(id, method, params));
  }
  wake();
  std::unique_lock lock(pending->mu);
  if (pending->cv.wait_for(lock, timeout, [&] { return pending->done; })) return pending->reply;
  lock.unlock();
  {
    std::lock_guard l(mu_);
    pending_.erase(id);
  }
  if (method != "initialize") {
    send(mcp::notification_line(
        "notifications/cancelled",
        {{"requestId", id}, {"reason", "no answer within " + std::to_string(timeout.count()) + " ms"}}));
  }
  return Reply{.kind = Reply::Kind::kTimeout,
               .error = "no answer to " + method + " within " + std::to_string(timeout.count()) + " ms"};
}

bool McpClient::alive() const {
  std::lock_guard lock(mu_);
  return !gone_ && stop_mode_ == 0;
}

std::string McpClient::exit_description() const {
  std::lock_guard lock(mu_);
  return gone_reason_;
}

std::string McpClient::stderr_tail() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& l : stderr_lines_) out += l + "\n";
  if (!out.empty()) out.pop_back();
  return out;
}

void McpClient::send(std::string line) {
  {
    std::lock_guard lock(mu_);
    if (gone_ || stop_mode_ != 0) return;
    outgoing_.push_back(std::move(line));
  }
  wake();
}

void McpClient::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void McpClient::request_stop(bool graceful) {
  {
    std::lock_guard lock(mu_);
    // Requests still waiting are cancelled first: the server may stop work
    // it was doing for them before its stdin closes.
    if (stop_mode_ == 0 && !gone_) {
      for (const auto& [id, p] : pending_) {
        outgoing_.push_back(mcp::notification_line(
            "notifications/cancelled", {{"requestId", id}, {"reason", "the client is stopping"}}));
      }
    }
    int mode = graceful ? 1 : 2;
    if (stop_mode_ < mode) stop_mode_ = mode;
  }
  wake();
  if (io_.joinable() && io_.get_id() != std::this_thread::get_id()) io_.join();
}

void McpClient::stop() { request_stop(true); }
void McpClient::kill() { request_stop(false); }

void McpClient::fail_pending(const std::string& why) {
  std::map<uint64_t, std::shared_ptr<Pending>> lost;
  {
    std::lock_guard lock(mu_);
    lost.swap(pending_);
  }
  for (auto& [id, p] : lost) {
    std::lock_guard l(p->mu);
    p->reply = Reply{.kind = Reply::Kind::kGone, .error = why};
    p->done = true;
    p->cv.notify_all();
  }
}

void McpClient::handle_stderr(std::string_view data, bool flush) {
  stderr_partial_.append(data);
  size_t start = 0;
  for (;;) {
    size_t nl = stderr_partial_.find('\n', start);
    size_t end, next;
    if (nl != std::string::npos && nl - start <= kStderrLineMax) {
      end = nl;
      next = nl + 1;
    } else if (stderr_partial_.size() - start > kStderrLineMax) {
      end = next = start + kStderrLineMax;
    } else if (flush && start < stderr_partial_.size()) {
      end = next = stderr_partial_.size();
    } else {
      break;
    }
    std::string line = stderr_partial_.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    log_stderr_line(line);
    {
      std::lock_guard lock(mu_);
      stderr_lines_.push_back(std::move(line));
      if (stderr_lines_.size() > kStderrLinesKept) stderr_lines_.pop_front();
    }
    start = next;
  }
  stderr_partial_.erase(0, start);
}

std::string McpClient::key(const char* name) const { return "mcp_servers." + options_.name + "." + name; }

void McpClient::log_stderr_line(const std::string& line) {
  StderrBudget& b = stderr_budget_;
  auto now = Clock::now();
  auto drop = [&] {
    ++b.dropped_lines;
    b.dropped_bytes += line.size() + 1;
    b.last_drop = now;
  };
  if (b.capped) return drop();
  if (now - b.window_start >= std::chrono::seconds(1)) {
    b.window_start = now;
    b.window_lines = 0;
  }
  if (b.window_lines >= options_.stderr_lines_per_second) return drop();
  uint64_t cost = log_cost(line, options_.name.size());
  if (b.logged_bytes + cost > options_.max_stderr_bytes) {
    report_dropped_stderr();
    b.capped = true;
    lib_log().warn(
        "MCP server {}: its stderr reached {} ({} bytes logged since it started); what it writes there "
        "until it stops is counted, not logged",
        options_.name, key("max_stderr_bytes"), options_.max_stderr_bytes);
    return drop();
  }
  ++b.window_lines;
  b.logged_bytes += cost;
  lib_log().info("MCP server {} (stderr): {}", options_.name, line);
}

void McpClient::report_dropped_stderr() {
  StderrBudget& b = stderr_budget_;
  if (b.dropped_lines == 0) return;
  std::string why = b.capped
                        ? "past " + key("max_stderr_bytes") + " (" +
                              std::to_string(options_.max_stderr_bytes) + " bytes logged since it started)"
                        : "more than " + std::to_string(options_.stderr_lines_per_second) +
                              " lines in a second (" + key("stderr_lines_per_second") + ")";
  std::string text = "MCP server " + options_.name + ": " + std::to_string(b.dropped_lines) + " lines (" +
                     std::to_string(b.dropped_bytes) + " bytes) of its stderr were not logged: " + why;
  b.logged_bytes += log_cost(text, 0);
  b.dropped_lines = b.dropped_bytes = 0;
  lib_log().warn("{}", text);
}

std::string McpClient::handle_line(std::string_view line) {
  if (line.empty() || line == "\r") return "";
  mcp::Message m = mcp::parse_message(line);
  switch (m.kind) {
    case mcp::Message::Kind::kInvalid:
      if (m.too_deep) return "it wrote a message on stdout nested past the bound: " + m.problem;
      lib_log().warn("MCP server {} wrote a line on stdout that is not a JSON-RPC message ({}); ignored: {}",
                   options_.name, m.problem, shown(line));
      return "";
    case mcp::Message::Kind::kRequest:
      if (m.method == "ping") {
        send(mcp::result_line(m.id, json::object()));
      } else {
        lib_log().info("MCP server {} asked for {}, which Carapace does not support; answered with an error",
                     options_.name, shown(m.method));
        send(mcp::error_line(m.id, mcp::kMethodNotFound, "method not supported by this client: " + m.method));
      }
      return "";
    case mcp::Message::Kind::kNotification:
      if (m.method == "notifications/tools/list_changed") {
        tools_changed_ = true;
        if (options_.on_tools_changed) options_.on_tools_changed();
      } else if (m.method == "notifications/message") {
        lib_log().info("MCP server {} (log): {}", options_.name, shown(m.params.dump()));
      }
      return "";
    case mcp::Message::Kind::kResponse: {
      std::shared_ptr<Pending> p;
      if (m.id.is_number_unsigned()) {
        std::lock_guard lock(mu_);
        auto it = pending_.find(m.id.get<uint64_t>());
        if (it != pending_.end()) {
          p = it->second;
          pending_.erase(it);
        }
      }
      if (!p) {
        lib_log().warn("MCP server {} answered request id {}, which is not waiting for an answer; ignored",
                     options_.name, shown(m.id.dump()));
        return "";
      }
      std::lock_guard l(p->mu);
      if (m.is_error) {
        p->reply = Reply{.kind = Reply::Kind::kError,
                         .error = "JSON-RPC error " + std::to_string(m.error_code) + ": " + m.error_message};
      } else {
        p->reply = Reply{.kind = Reply::Kind::kResult, .result = std::move(m.result)};
      }
      p->done = true;
      p->cv.notify_all();
      return "";
    }
  }
  return "";
}

void McpClient::run_io(std::promise<Status>* started) {
  std::unique_ptr<McpProcess> proc;
  Status s = McpProcess::start(options_.process, &proc);
  started->set_value(s);
  if (!s.ok()) {
    std::lock_guard lock(mu_);
    gone_ = true;
    gone_reason_ = s.message();
    return;
  }
  std::string in;      // stdout bytes not yet a whole line
  size_t scanned = 0;  // of `in`, bytes known to hold no '\n'
  std::string out;     // bytes queued for stdin
  std::vector<char> buffer(1 << 20);
  int stop_phase = 0;  // 1: stdin closed, 2: SIGTERM sent, 3: killed
  Clock::time_point phase_deadline{};
  std::string ended_why;  // set when the client ends the connection itself
  Clock::time_point gone_at{};

  auto start_kill = [&] {
    if (stop_phase < 3) {
      stop_phase = 3;
      proc->kill_all();
    }
  };

  for (;;) {
    int mode;
    {
      std::lock_guard lock(mu_);
      mode = stop_mode_;
      if (stop_phase == 0) {
        while (!outgoing_.empty()) {
          out += outgoing_.front();
          outgoing_.pop_front();
        }
      }
    }
    if (mode == 1 && stop_phase == 0) {
      // What is queued (the cancellations) goes out if the pipe takes it now.
      if (!out.empty() && proc->stdin_fd() >= 0) {
        [[maybe_unused]] ssize_t w = ::write(proc->stdin_fd(), out.data(), out.size());
      }
      stop_phase = 1;
      proc->close_stdin();
      out.clear();
      phase_deadline = Clock::now() + options_.stop_grace;
    }
    if (mode == 2) start_kill();
    if (stop_phase == 1 && Clock::now() >= phase_deadline) {
      stop_phase = 2;
      proc->terminate();
      phase_deadline = Clock::now() + options_.stop_grace;
    }
    if (stop_phase == 2 && Clock::now() >= phase_deadline) start_kill();
    if (!ended_why.empty() && stop_phase < 3) start_kill();

    if (proc->gone()) {
      if (gone_at == Clock::time_point{}) gone_at = Clock::now();
      // What the server wrote before it went is read; what a stray process
      // holds open is not waited for.
      if ((proc->stdout_fd() < 0 && proc->stderr_fd() < 0) ||
          Clock::now() >= gone_at + std::chrono::milliseconds(200))
        break;
    }

    pollfd fds[5];
    nfds_t n = 0;
    int i_wake = -1, i_out = -1, i_err = -1, i_rep = -1, i_in = -1;
    fds[i_wake = n++] = pollfd{wake_fd_, POLLIN, 0};
    if (proc->stdout_fd() >= 0) fds[i_out = n++] = pollfd{proc->stdout_fd(), POLLIN, 0};
    if (proc->stderr_fd() >= 0) fds[i_err = n++] = pollfd{proc->stderr_fd(), POLLIN, 0};
    if (proc->report_fd() >= 0) fds[i_rep = n++] = pollfd{proc->report_fd(), POLLIN, 0};
    if (!out.empty() && proc->stdin_fd() >= 0) fds[i_in = n++] = pollfd{proc->stdin_fd(), POLLOUT, 0};
    int timeout = -1;
    if (stop_phase == 1 || stop_phase == 2) timeout = poll_ms(phase_deadline);
    // Dropped stderr lines are reported once the flood has paused a second.
    if (stderr_budget_.dropped_lines > 0 && !stderr_budget_.capped) {
      Clock::time_point quiet = stderr_budget_.last_drop + std::chrono::seconds(1);
      if (Clock::now() >= quiet) {
        report_dropped_stderr();
      } else {
        timeout = timeout < 0 ? poll_ms(quiet) : std::min(timeout, poll_ms(quiet));
      }
    }
    if (proc->gone()) timeout = 10;
    int ready = ::poll(fds, n, timeout);
    if (ready < 0 && errno != EINTR) {
      ended_why = "poll failed: " + std::string(std::strerror(errno));
      continue;
    }
    if (ready <= 0) continue;
    if (fds[i_wake].revents != 0) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
    }
    if (i_in >= 0 && fds[i_in].revents != 0) {
      ssize_t w = ::write(proc->stdin_fd(), out.data(), out.size());
      if (w > 0) {
        out.erase(0, static_cast<size_t>(w));
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        proc->close_stdin();  // it stopped reading; its exit tells the rest
        out.clear();
      }
    }
    if (i_out >= 0 && fds[i_out].revents != 0) {
      ssize_t r = ::read(proc->stdout_fd(), buffer.data(), buffer.size());
      if (r > 0) {
        in.append(buffer.data(), static_cast<size_t>(r));
        size_t begin = 0;
        for (;;) {
          size_t nl = in.find('\n', std::max(begin, scanned));
          if (nl == std::string::npos) break;
          std::string over = handle_line(std::string_view(in).substr(begin, nl - begin));
          begin = nl + 1;
          scanned = begin;
          if (!over.empty() && ended_why.empty()) {
            ended_why = std::move(over);
            lib_log().warn("MCP server {}: {}; stopping it", options_.name, ended_why);
            begin = in.size();
            proc->close_stdout();
            break;
          }
        }
        in.erase(0, begin);
        scanned = in.size();
        if (in.size() > options_.max_message_bytes && ended_why.empty()) {
          ended_why = "it wrote a message longer than " + std::to_string(options_.max_message_bytes) +
                      " bytes on stdout (" + key("max_message_bytes") + ")";
          lib_log().warn("MCP server {}: {}; stopping it", options_.name, ended_why);
          in.clear();
          scanned = 0;
          proc->close_stdout();
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        proc->close_stdout();
      }
    }
    if (i_err >= 0 && fds[i_err].revents != 0) {
      ssize_t r = ::read(proc->stderr_fd(), buffer.data(), std::min<size_t>(buffer.size(), 65536));
      if (r > 0) {
        handle_stderr(std::string_view(buffer.data(), static_cast<size_t>(r)), false);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        proc->close_stderr();
      }
    }
    if (i_rep >= 0 && fds[i_rep].revents != 0) {
      proc->read_reports();
      if (pid_.load() == 0) pid_ = proc->pid();
    }
  }
  handle_stderr("", true);
  report_dropped_stderr();
  proc->reap();
  std::string why;
  int mode = 0;
  {
    std::lock_guard lock(mu_);
    mode = stop_mode_;
    why = !ended_why.empty() ? ended_why
          : mode != 0        ? "the server was stopped"
                             : "the server " + proc->exit_description();
    gone_ = true;
    gone_reason_ = why;
    outgoing_.clear();
  }
  if (mode == 0 && ended_why.empty())
    lib_log().warn("MCP server {} {}", options_.name, proc->exit_description());
  fail_pending(why);
}

}  // namespace carapace
