// carapace chat: a conversation with an agent session, one line at a time,
// as people expect a REPL: Ctrl-C stops the turn under way and returns to
// the prompt; Ctrl-C twice at the prompt, or Ctrl-D, leaves.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "events/event_summary.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "tools/cli.h"
#include "tools/cli_run.h"
#include "tools/stop_signals.h"

namespace carapace::cli {
namespace {

struct ChatArgs {
  RuntimeArgs runtime;
  std::string session;
  std::string workspace;
};

const char* kHelp =
    "  type a message to send it to the session (the first one starts it)\n"
    "  /resume [id]   continue a session from its log (an interrupted turn is finished first);\n"
    "                 alone, the current session's stopped turn\n"
    "  /sessions      list the sessions in this home\n"
    "  /fork <turn> [message]\n"
    "                 fork the current session at the end of a turn and continue in the fork,\n"
    "                 with this message (else the next line you type)\n"
    "  /help          this help\n"
    "  /exit          leave (the session stays in the log); so do Ctrl-D and Ctrl-C twice\n"
    "  Ctrl-C during a turn stops it (its tool processes killed) and returns here\n";

// A message longer than this is refused (its line is read to its end and dropped).
constexpr size_t kMaxLineBytes = 1 << 20;

// The lines of stdin, with what came instead of one: the end of the input,
// or a stop signal (taken by the signal thread, tools/stop_signals.h).
class LineReader {
 public:
  enum class Got { kLine, kEnd, kSignal, kTooLong };

  Got next(std::string* line, int* signal) {
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        const bool dropped = dropping_;
        dropping_ = false;
        *line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line->empty() && line->back() == '\r') line->pop_back();
        if (dropped) return Got::kTooLong;
        return Got::kLine;
      }
      if (end_) {
        if (buf_.empty() && !dropping_) return Got::kEnd;
        *line = std::move(buf_);
        buf_.clear();
        if (dropping_) {
          dropping_ = false;
          return Got::kTooLong;
        }
        return Got::kLine;
      }
      if (int sig = take_stop_signal(); sig != 0) {
        *signal = sig;
        return Got::kSignal;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char chunk[8192];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        end_ = true;
        continue;
      }
      buf_.append(chunk, static_cast<size_t>(n));
      if (buf_.size() > kMaxLineBytes && buf_.find('\n') == std::string::npos) {
        buf_.clear();  // the rest of this line goes too
        dropping_ = true;
      }
    }
  }

 private:
  std::string buf_;
  bool end_ = false;
  bool dropping_ = false;
};

// What a conversation shows of the session's events, compactly, on stdout:
// every model message (unless it streamed there already) and every tool
// call with its outcome.
class ChatEvents {
 public:
  ChatEvents(const Context& ctx, StatusLine& status) : ctx_(ctx), status_(status) {}

  void on_event(const Event& e) {
    std::lock_guard lock(mu_);
    if (const auto* t = get_if<TurnStarted>(e)) {
      turn_ = t->turn;
    } else if (const auto* r = get_if<LlmResponded>(e)) {
      if (r->text.empty()) return;
      said_.insert(r->text);
      if (!status_.streamed(r->text)) status_.say("agent> " + ctx_.shown(r->text));
    } else if (const auto* q = get_if<ToolRequested>(e)) {
      args_[q->call_id] = q->args.text;
    } else if (const auto* c = get_if<ToolCompleted>(e)) {
      auto a = args_.find(c->call_id);
      const std::string args = a == args_.end() ? std::string() : a->second;
      if (a != args_.end()) args_.erase(a);
      std::string outcome;
      if (c->interrupted) {
        outcome = c->stop_reason.empty() ? "interrupted by a crash" : "stopped (" + c->stop_reason + ")";
      } else if (c->is_error) {
        outcome = (c->timed_out ? "timed out: " : "error: ") + quote_preview(ctx_.shown(c->output), 60);
      } else {
        outcome = "ok, " + std::to_string(c->output.size()) + " B, " + std::to_string(c->duration_ms) + " ms";
      }
      status_.say("  · " + ctx_.shown(c->tool) + " " + quote_preview(ctx_.shown(args), 60) + "  " + outcome);
    }
  }

  // Prints how a run ended: the final answer when no event showed it, or the failure.
  void outcome(const SessionOutcome& o) {
    std::lock_guard lock(mu_);
    if (o.status == SessionStatus::kCompleted) {
      if (!o.final_answer.empty() && !said_.count(o.final_answer) && !status_.streamed(o.final_answer)) {
        status_.say("agent> " + ctx_.shown(o.final_answer));
      }
    } else if (o.status == SessionStatus::kFailed) {
      status_.say("! the turn failed: " + ctx_.shown(o.error) + " (send another message to try again)");
    }
  }

  // A new exchange: what the model says from now on has not been shown.
  void begin() {
    std::lock_guard lock(mu_);
    said_.clear();
  }

  uint64_t turn() {
    std::lock_guard lock(mu_);
    return turn_;
  }

 private:
  const Context& ctx_;
  StatusLine& status_;
  std::mutex mu_;
  uint64_t turn_ = 0;
  std::set<std::string> said_;  // the model's texts shown in this exchange
  std::map<std::string, std::string> args_;  // call id -> arguments, until its result
};

class Chat {
 public:
  Chat(Context& ctx, const ChatArgs& args)
      : ctx_(ctx),
        args_(args),
        tty_(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)),
        status_(ctx, isatty(STDERR_FILENO), tty_, "agent> "),
        shown_(ctx, status_) {}

  int run() {
    if (int rc = open_runtime(ctx_, args_.runtime, &rt_); rc != kExitOk) return rc;
    arm_stop_signals();  // from now on Ctrl-C is ours: a stop, or a way out
    if (tty_) std::printf("carapace chat: /help for commands; Ctrl-C stops a turn, Ctrl-D leaves\n");
    bool interrupted_at_prompt = false;
    for (;;) {
      if (tty_) std::printf("you> "), std::fflush(stdout);
      std::string line;
      int sig = 0;
      const LineReader::Got got = input_.next(&line, &sig);
      if (got == LineReader::Got::kEnd) return leave(kExitOk);
      if (got == LineReader::Got::kSignal) {
        if (sig != SIGINT) return leave(128 + sig);
        if (interrupted_at_prompt) return leave(kExitOk);
        interrupted_at_prompt = true;
        std::printf("\n(Ctrl-C again or Ctrl-D to leave; /help for commands)\n");
        continue;
      }
      interrupted_at_prompt = false;
      if (got == LineReader::Got::kTooLong) {
        std::printf("! a message longer than %zu bytes is refused\n", kMaxLineBytes);
        continue;
      }
      if (line.empty()) continue;
      if (line == "/exit" || line == "/quit") return leave(kExitOk);
      int rc = line[0] == '/' ? command(line) : message(line);
      if (rc != kExitOk) return rc;
    }
  }

 private:
  int leave(int code) {
    status_.clear();
    std::printf("%s", tty_ ? "\n" : "");
    if (current_.empty()) {
      std::printf("bye\n");
    } else {
      std::printf("bye: the session stays in the log (%s; %s)\n",
                  ctx_.with_home("carapace log show " + current_).c_str(),
                  ctx_.with_home("carapace chat, then /resume " + current_).c_str());
    }
    std::fflush(stdout);
    return code;
  }

  Runtime::ResumeOptions resume_options(std::vector<std::string> follow_ups = {}) {
    return Runtime::ResumeOptions{.mode = Runtime::ResumeMode::kStep,
                                  .allow_finished = true,
                                  .follow_ups = std::move(follow_ups),
                                  .on_event = [this](const Event& e) { on_event(e); },
                                  .on_delta = delta_printer(status_)};
  }

  void on_event(const Event& e) {
    status_.on_event(e);
    shown_.on_event(e);
  }

  // A line while the session waits for this person: the decision.
  int decide(const std::string& text) {
    const ApprovalRequested r = waiting_.front();
    ApprovalAnswer a{.call_id = r.call_id, .by = "chat"};
    if (r.kind == "question") {
      a.kind = ApprovalAnswer::Kind::kAnswer;
      a.text = text;
    } else if (text == "y" || text == "yes") {
      a.kind = ApprovalAnswer::Kind::kApprove;
    } else if (text == "n" || text == "no" || text.rfind("no ", 0) == 0) {
      a.kind = ApprovalAnswer::Kind::kDeny;
      if (text.size() > 3) a.reason = text.substr(3);
    } else {
      std::printf("! call %s waits for your decision: y (approve) or n [reason] (deny)\n", ctx_.shown(r.call_id).c_str());
      return kExitOk;
    }
    waiting_.clear();
    Status s = rt_->decide(current_, a);
    if (!s.ok() && !s.is_expired()) {
      std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
      return kExitOk;
    }
    if (s.is_expired()) std::printf("! %s\n", ctx_.shown(s.message()).c_str());
    return answer(current_);
  }

  int message(const std::string& text) {
    Status s;
    if (!waiting_.empty()) return decide(text);
    if (pending_fork_) {
      const uint64_t turn = *pending_fork_;
      pending_fork_.reset();
      return fork(turn, text);
    }
    if (current_.empty()) {
      // Named before it starts, so that the name comes before what it does.
      const std::string id = args_.session.empty() ? generate_session_id() : args_.session;
      std::printf("session %s\n", ctx_.shown(id).c_str());
      std::fflush(stdout);
      s = rt_->start_session(SessionOptions{.id = id,
                                            .task = text,
                                            .workspace = args_.workspace,
                                            .on_event = [this](const Event& e) { on_event(e); },
                                            .on_delta = delta_printer(status_)},
                             &current_);
    } else {
      s = send(text);
    }
    if (!s.ok()) {
      std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
      return kExitOk;
    }
    return answer(current_);
  }

  // The session woken from its log with this chat's event printers and the
  // message recorded before it goes on (a stopped turn is finished first);
  // if its actor is still open (its loop stopped a moment ago), once it has
  // closed, else the open one takes the message.
  Status send(const std::string& text) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      Status s = rt_->resume_session(current_, resume_options({text}));
      if (!s.is_busy()) {
        if (s.ok()) stopped_ = false;
        return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return rt_->send_message(current_, text);
  }

  int command(const std::string& line) {
    if (line == "/help") {
      std::printf("%s", kHelp);
    } else if (line == "/sessions") {
      std::vector<SessionMeta> sessions;
      std::vector<std::string> unreadable;
      Status s = runtime_log(*rt_).list_sessions(&sessions, &unreadable);
      if (!s.ok()) std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
      for (const auto& entry : unreadable) std::printf("! skipped the session index entry %s\n", ctx_.shown(entry).c_str());
      for (const auto& m : sessions) {
        std::printf("  %s%s  %s, %llu turns\n", m.id == current_ ? "* " : "  ", m.id.c_str(),
                    std::string(status_name(m.status)).c_str(), static_cast<unsigned long long>(m.committed_turn));
      }
    } else if (line == "/resume" || line.rfind("/resume ", 0) == 0) {
      std::string id = line.size() > 8 ? line.substr(8) : "";
      if (id.empty() && stopped_) id = current_;
      if (id.empty()) {
        std::printf("! usage: /resume <id>\n");
        return kExitOk;
      }
      Status s = rt_->resume_session(id, resume_options());
      if (!s.ok()) {
        std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
        return kExitOk;
      }
      current_ = id;
      stopped_ = false;
      std::printf("resumed %s\n", id.c_str());
      return answer(id);
    } else if (line == "/fork" || line.rfind("/fork ", 0) == 0) {
      if (current_.empty()) {
        std::printf("! no session yet: send a message or /resume one first\n");
        return kExitOk;
      }
      const std::string rest = line.size() > 6 ? line.substr(6) : "";
      const size_t space = rest.find(' ');
      const std::string number = rest.substr(0, space);
      const bool digits = !number.empty() && number.size() < 10 &&
                          number.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) {
        std::printf("! usage: /fork <turn> [message]\n");
        return kExitOk;
      }
      const uint64_t turn = std::stoull(number);
      const std::string text = space == std::string::npos ? "" : rest.substr(space + 1);
      if (!text.empty()) return fork(turn, text);
      pending_fork_ = turn;
      std::printf("forking %s at turn %llu: type the fork's first message\n", current_.c_str(),
                  static_cast<unsigned long long>(turn));
    } else {
      std::printf("! unknown command %s (/help lists them)\n", ctx_.shown(line).c_str());
    }
    return kExitOk;
  }

  int fork(uint64_t turn, const std::string& text) {
    std::string id;
    Status s = rt_->fork_session(current_, turn,
                                 Runtime::ForkOptions{.task = text,
                                                      .on_event = [this](const Event& e) { on_event(e); },
                                                      .on_delta = delta_printer(status_)},
                                 &id);
    if (!s.ok()) {
      std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
      return kExitOk;
    }
    std::printf("forked %s at turn %llu as %s\n", current_.c_str(), static_cast<unsigned long long>(turn), id.c_str());
    current_ = id;
    stopped_ = false;
    return answer(id);
  }

  // Waits for the session's runs to end, with the live status line, and
  // prints how they ended. Ctrl-C stops the session (Runtime::stop:
  // session.stopped recorded, its tool processes killed) and returns to the
  // prompt; SIGTERM stops it and ends chat (128 + 15).
  int answer(const std::string& id) {
    shown_.begin();
    SessionOutcome o;
    Status s;
    do {
      for (;;) {
        s = rt_->wait(id, std::chrono::milliseconds(100), &o);
        if (!s.is_timed_out()) break;
        if (int sig = take_stop_signal(); sig != 0) return stop(id, sig);
        status_.render();
      }
      status_.clear();
      if (!s.ok()) break;
      shown_.outcome(o);
    } while (o.continues);
    if (s.ok() && o.stop_reason == "waiting" && !o.waiting.empty()) {
      // Parked on a person: this one. The next line decides.
      waiting_ = o.waiting;
      const ApprovalRequested& r = waiting_.front();
      if (r.kind == "question") {
        std::printf("agent asks: %s\n  (your next line is the answer)\n", ctx_.shown(r.question).c_str());
      } else {
        std::printf("approve %s %s?\n  why: %s\n  (y to approve, n [reason] to deny)\n", ctx_.shown(r.tool).c_str(),
                    ctx_.shown(r.args.text).c_str(), ctx_.shown(r.reason).c_str());
      }
    }
    if (!s.ok()) std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
    std::fflush(stdout);
    return kExitOk;
  }

  int stop(const std::string& id, int sig) {
    status_.clear();
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    rt_->set_stop_reason(name);  // in the session.stopped the runtime records as it closes
    if (sig != SIGINT) {
      std::fprintf(stderr, "%s\n",
                   ctx_.with_home("carapace: " + name + ": stopping session " + id +
                                  " and killing its tool processes; resume it with `carapace resume " + id + "`")
                       .c_str());
      return 128 + sig;
    }
    const uint64_t turn = shown_.turn();
    if (Status s = rt_->stop(id, name); !s.ok()) std::printf("! %s\n", ctx_.shown(s.to_string()).c_str());
    std::printf("\nstopped turn %llu of %s (recorded; its tool processes killed)\n"
                "  your next message goes on from here: the stopped turn is finished first, then your message "
                "answered; /exit leaves\n",
                static_cast<unsigned long long>(turn), id.c_str());
    std::fflush(stdout);
    stopped_ = true;
    return kExitOk;
  }

  Context& ctx_;
  const ChatArgs& args_;
  bool tty_;
  StatusLine status_;
  ChatEvents shown_;
  LineReader input_;
  std::unique_ptr<Runtime> rt_;
  std::string current_;
  bool stopped_ = false;      // current_'s turn was stopped by Ctrl-C
  std::vector<ApprovalRequested> waiting_;  // current_ is parked on these (the first is asked)
  std::optional<uint64_t> pending_fork_;  // /fork N waits for the fork's first message
};

}  // namespace

void register_chat_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand(
      "chat", "Talk to an agent session line by line (/help for commands; Ctrl-C stops a turn, Ctrl-D leaves)");
  add_runtime_options(cmd, args->runtime);
  args->runtime.ask_user = true;  // a person is there to answer the model's questions
  cmd->add_option("--session", args->session, "Id of the session the first message starts (default: generated)");
  cmd->add_option("--workspace", args->workspace,
                  "Directory the tools are confined to (default: a new one under the home, workspaces/ID)");
  cmd->callback([&ctx, args] {
    ctx.run = [&ctx, args] {
      Chat chat(ctx, *args);
      return chat.run();
    };
  });
}

}  // namespace carapace::cli
