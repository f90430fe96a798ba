// carapace chat: a conversation with an agent session, one line at a time.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

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
    "  /resume <id>   continue a session from its log (an interrupted turn is finished first)\n"
    "  /sessions      list the sessions in this home\n"
    "  /fork <turn>   fork the current session at the end of a turn, and continue in the fork\n"
    "  /help          this help\n"
    "  /exit          leave (the session stays in the log)\n";

int run_chat(Context& ctx, const ChatArgs& args) {
  std::unique_ptr<Runtime> rt;
  if (int rc = open_runtime(ctx, args.runtime, &rt); rc != kExitOk) return rc;
  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  StatusLine status(ctx, isatty(STDERR_FILENO), tty, "agent> ");
  auto on_event = [&status](const Event& e) { status.on_event(e); };
  auto on_delta = delta_printer(status);
  std::string current;
  std::string line;
  if (tty) std::printf("carapace chat: /help for commands\n");
  // Waits for the session's answer and prints it. A SIGINT or SIGTERM while
  // it runs stops it as `run` does (session.stopped, its tool processes
  // killed): the signal is returned, and the command exits 128 + it.
  auto answer = [&](const std::string& id) -> int {
    SessionOutcome o;
    Status s;
    arm_stop_signals();
    for (;;) {
      s = rt->wait(id, std::chrono::milliseconds(100), &o);
      if (!s.is_busy()) break;
      if (int sig = stop_signal(); sig != 0) {
        status.clear();
        std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        rt->set_stop_reason(name);  // in the session.stopped the runtime records as it closes
        std::fprintf(stderr, "%s\n",
                     ctx.with_home("carapace: " + name + ": stopping session " + id +
                                   " and killing its tool processes; resume it with `carapace resume " + id + "`")
                         .c_str());
        return sig;
      }
      status.render();
    }
    disarm_stop_signals();
    if (int sig = stop_signal(); sig != 0) return sig;  // it came as the turn ended
    status.clear();
    if (!s.ok()) {
      std::printf("! %s\n", ctx.shown(s.to_string()).c_str());
    } else if (o.status == SessionStatus::kCompleted) {
      if (!status.streamed(o.final_answer)) std::printf("agent> %s\n", ctx.shown(o.final_answer).c_str());
    } else {
      std::printf("! the turn failed: %s (send another message to try again)\n", ctx.shown(o.error).c_str());
    }
    std::fflush(stdout);
    return 0;
  };
  for (;;) {
    if (tty) std::printf("you> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/help") {
      std::printf("%s", kHelp);
      continue;
    }
    if (line == "/sessions") {
      std::vector<SessionMeta> sessions;
      std::vector<std::string> unreadable;
      Status s = runtime_log(*rt).list_sessions(&sessions, &unreadable);
      if (!s.ok()) std::printf("! %s\n", ctx.shown(s.to_string()).c_str());
      for (const auto& entry : unreadable)
        std::printf("! skipped the session index entry %s\n", ctx.shown(entry).c_str());
      for (const auto& m : sessions) {
        std::printf("  %s%s  %s, %llu turns\n", m.id == current ? "* " : "  ", m.id.c_str(),
                    std::string(status_name(m.status)).c_str(),
                    static_cast<unsigned long long>(m.committed_turn));
      }
      continue;
    }
    if (line.rfind("/resume", 0) == 0) {
      std::string id = line.size() > 8 ? line.substr(8) : "";
      if (id.empty()) {
        std::printf("! usage: /resume <id>\n");
        continue;
      }
      Status s = rt->resume_session(
          id, Runtime::ResumeOptions{.allow_finished = true, .on_event = on_event, .on_delta = on_delta});
      if (!s.ok()) {
        std::printf("! %s\n", ctx.shown(s.to_string()).c_str());
        continue;
      }
      current = id;
      std::printf("resumed %s\n", id.c_str());
      if (int sig = answer(id)) return 128 + sig;
      continue;
    }
    if (line.rfind("/fork", 0) == 0) {
      if (current.empty()) {
        std::printf("! no session yet: send a message or /resume one first\n");
        continue;
      }
      uint64_t turn = 0;
      try {
        turn = std::stoull(line.substr(5));
      } catch (...) {
        std::printf("! usage: /fork <turn>\n");
        continue;
      }
      std::string id;
      Status s = rt->fork_session(current, turn,
                                  Runtime::ForkOptions{.on_event = on_event, .on_delta = on_delta}, &id);
      if (!s.ok()) {
        std::printf("! %s\n", ctx.shown(s.to_string()).c_str());
        continue;
      }
      std::printf("forked %s at turn %llu as %s\n", current.c_str(), static_cast<unsigned long long>(turn),
                  id.c_str());
      current = id;
      if (int sig = answer(id)) return 128 + sig;
      continue;
    }
    if (line[0] == '/') {
      std::printf("! unknown command %s (/help lists them)\n", ctx.shown(line).c_str());
      continue;
    }
    Status s;
    if (current.empty()) {
      s = rt->start_session(SessionOptions{.id = args.session,
                                           .task = line,
                                           .workspace = args.workspace,
                                           .on_event = on_event,
                                           .on_delta = on_delta},
                            &current);
      if (s.ok()) std::printf("session %s\n", current.c_str());
    } else {
      s = rt->send_message(current, line);
    }
    if (!s.ok()) {
      std::printf("! %s\n", ctx.shown(s.to_string()).c_str());
      continue;
    }
    if (int sig = answer(current)) return 128 + sig;
  }
  if (!current.empty()) {
    std::printf("the session stays in the log: %s\n", ctx.with_home("carapace log show " + current).c_str());
  }
  return kExitOk;
}

}  // namespace

void register_chat_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Talk to an agent session line by line (/help for commands)");
  add_runtime_options(cmd, args->runtime);
  cmd->add_option("--session", args->session,
                  "Id of the session the first message starts (default: generated)");
  cmd->add_option("--workspace", args->workspace,
                  "Directory the tools are confined to (default: the current one)");
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_chat(ctx, *args); }; });
}

}  // namespace carapace::cli
