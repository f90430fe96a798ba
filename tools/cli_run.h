// What the commands that run sessions share: the runtime options, opening a
// runtime from the config and the command line, the live status line, and
// reporting a session's outcome.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "base/text.h"
#include "events/event_summary.h"
#include "runtime/runtime.h"
#include "tools/cli.h"

namespace carapace::cli {

struct RuntimeArgs {
  std::string scenario;
  std::string provider;
  std::string model;
  std::string base_url;
  bool resuming = false;  // sessions keep the model they recorded: no --model needed
  bool ask_user = false;  // a person is there (chat): offer the model the ask_user tool
  // Told of each approval request a session parks on (serve); null: none.
  std::function<void(const Approval&)> on_approval;
  // Hears every streamed piece of every session's answers (serve); null: none.
  std::function<void(const std::string&, const StreamDelta&)> observe_delta;
  // A session imported from a bundle runs with the configuration it
  // recorded, not the home's (--trust-bundle-config).
  bool trust_bundle_config = false;
  std::string config;
  std::string faults;
  // Hidden, for the torture runner and the durability tests:
  std::string exec_log;       // a line per real tool execution: "<session> <call> <tool> <idempotent>" (and "... again" per recovery verdict "run again")
  std::string ack_log;        // a line per acknowledgement: "checkpoint <seq> <turn>", "message <text>"
  std::string sync_ledger;    // run the log over a SyncLedgerFileSystem writing this ledger
  bool ignore_wal_syncs = false;  // mutation: the ledger does not honour WAL syncs
  std::string test_mutation;  // a deliberate defect in the session loop (LoopMutation)
  std::string fault_counts;   // at the end, "<point> <times reached>" per rule of --faults, one a line
};

// Appends one line to `path` (O_APPEND, no sync: it survives the process's
// death, as the page cache does). Errors are ignored: a record for tests.
void append_line(const std::string& path, const std::string& line);

void add_runtime_options(CLI::App* cmd, RuntimeArgs& args);

// --exec-log: `tool` wrapped so that each execution appends "<session>
// <call id> <tool> <idempotent>" to `path` before it runs (run, and tools nodes).
ToolDefinition record_executions(ToolDefinition tool, std::string path);

// --trust-bundle-config, for the commands that go on with a stored session.
CLI::Option* add_trust_bundle_option(CLI::App* cmd, RuntimeArgs& args);

// Loads the config: `config_flag`, else the home's config.json if there is
// one, else the defaults (warnings to stderr). kExitOk, or the exit code
// after printing the error.
int load_cli_config(Context& ctx, const std::string& config_flag, Config* config);

// Loads the config (warnings to stderr), applies the command line, opens the
// runtime. kExitOk, or the exit code after printing the error.
// With `stored_session` (a resume or fork), the configuration and scenario
// stored with that session are used unless --config, --scenario or
// --provider is given; but the ones a session imported from a bundle
// recorded are used only with --trust-bundle-config (and never its prompt
// files): else the home's, with a notice on stderr listing every setting
// in which the two differ.
int open_runtime(Context& ctx, const RuntimeArgs& args, std::unique_ptr<Runtime>* rt,
                 const std::string& stored_session = "");

// What the status line shows, updated from the session's events; and, on a
// terminal, the model's answers printed on stdout as they stream.
class StatusLine {
 public:
  // `tty`: stderr is a terminal (a live line). `stream`: stdout is one
  // (answers are printed as they arrive, each line after `prefix`). What
  // the session's events say is shown through ctx.shown(): redacted before
  // it is cut to fit, its terminal controls made visible.
  StatusLine(const Context& ctx, bool tty, bool stream = false, std::string prefix = "")
      : ctx_(ctx), tty_(tty), stream_(stream), prefix_(std::move(prefix)) {}

  void on_delta(const StreamDelta& d) {
    if (!stream_ || d.text.empty()) return;
    std::lock_guard lock(mu_);
    if (!streaming_) {
      if (tty_) std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
      std::fputs(prefix_.c_str(), stdout);
      streaming_ = true;
      streamed_.clear();
    }
    // A C1 control's two bytes may arrive in two deltas: a trailing lead
    // byte waits for the next one.
    std::string piece = pending_lead_ + d.text;
    pending_lead_.clear();
    if (!piece.empty() && static_cast<unsigned char>(piece.back()) == 0xC2) {
      pending_lead_ = piece.substr(piece.size() - 1);
      piece.pop_back();
    }
    std::string safe = terminal_safe(piece);
    std::fwrite(safe.data(), 1, safe.size(), stdout);
    std::fflush(stdout);
    streamed_ += d.text;
  }

  // Whether `answer` was printed in full as it streamed (then it is not printed again).
  bool streamed(const std::string& answer) {
    std::lock_guard lock(mu_);
    return !answer.empty() && answer == last_streamed_;
  }

  void on_event(const Event& e) {
    std::lock_guard lock(mu_);
    if (streaming_ && (get_if<LlmResponded>(e) || get_if<LlmFailed>(e))) {
      std::fputs((terminal_safe(pending_lead_) + "\n").c_str(), stdout);
      pending_lead_.clear();
      std::fflush(stdout);
      streaming_ = false;
    }
    if (const auto* r = get_if<LlmResponded>(e)) last_streamed_ = r->text == streamed_ ? streamed_ : "";
    retry_until_ = {};
    if (const auto* f = get_if<LlmFailed>(e)) {
      std::string what = f->http_status ? std::to_string(f->http_status) : ctx_.shown(f->error);
      if (f->will_retry) {
        retry_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(f->retry_delay_ms);
        retry_what_ = "(" + what + ", attempt " + std::to_string(f->attempt + 1) + ")";
        if (!tty_) line("retrying in " + seconds(f->retry_delay_ms) + " " + retry_what_);
      } else {
        line("model call failed: " + what);
      }
    } else if (const auto* t = get_if<TurnStarted>(e)) {
      turn_ = t->turn;
      status_ = "turn " + std::to_string(t->turn) + ": starting";
    } else if (const auto* r = get_if<LlmRequested>(e)) {
      turn_ = r->turn;
      status_ = "turn " + std::to_string(r->turn) + ": waiting for the model";
    } else if (const auto* q = get_if<ToolRequested>(e)) {
      const std::string what = "running " + ctx_.shown(q->tool) + " " + quote_preview(ctx_.shown(q->args.text), 50);
      status_ = turn_ == 0 ? what : "turn " + std::to_string(turn_) + ": " + what;
      if (!tty_) line(what);
    } else if (const auto* c = get_if<ToolCompleted>(e)) {
      if (c->is_error && !tty_)
        line(ctx_.shown(c->tool) + " failed: " + quote_preview(ctx_.shown(c->output), 60));
    } else if (const auto* h = get_if<HookDecided>(e)) {
      if (h->decision != "allow" && h->decision != "continue") {
        line(ctx_.shown("hook " + h->hook_name + " (" + h->hook_event + "): " + h->decision +
                        (h->reason.empty() ? "" : " - " + h->reason)));
      }
    }
  }

  // Redraws the live line (a terminal only).
  void render() {
    if (!tty_) return;
    std::lock_guard lock(mu_);
    if (streaming_) return;  // the answer's line is being written
    std::string text = status_;
    if (retry_until_ != std::chrono::steady_clock::time_point{}) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(retry_until_ -
                                                                        std::chrono::steady_clock::now());
      text = "retrying in " + seconds(static_cast<uint64_t>(std::max<int64_t>(0, left.count()))) + " " +
             retry_what_;
    }
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
  }

  void clear() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

  // Prints `text` as a line of its own on stdout, the live line cleared
  // first (from any thread: the events' and the waiting one share a lock).
  void say(const std::string& text) {
    std::lock_guard lock(mu_);
    if (streaming_) {
      std::fputs("\n", stdout);
      streaming_ = false;
    }
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    std::fputs((text + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

  // What the status line says now.
  std::string status() {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  static std::string seconds(uint64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
    return buf;
  }

  void line(const std::string& text) {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "  %s\n", text.c_str());
  }

  const Context& ctx_;
  bool tty_;
  bool stream_;
  std::string prefix_;
  bool streaming_ = false;     // an answer's line is open on stdout
  std::string streamed_;       // the text streamed since it opened
  std::string pending_lead_;   // a last byte that may begin a C1 control
  std::string last_streamed_;  // the last answer, if it was streamed in full
  std::mutex mu_;
  std::string status_ = "starting";
  uint64_t turn_ = 0;  // of the last turn.started or llm.requested
  std::chrono::steady_clock::time_point retry_until_{};
  std::string retry_what_;
};

// Waits for the session's loop to stop with a live status line (through the
// runs its follow-ups start), then prints the outcome: the final answer (or
// JSON). Exit 0 if it completed.
int report_outcome(Context& ctx, Runtime& rt, const std::string& id, StatusLine& status);

// What waits for a person in a parked session, and the commands that answer
// it, on stderr (the lines `run` prints when it exits with kExitWaiting).
void print_waiting(const Context& ctx, const std::string& id, const std::vector<ApprovalRequested>& waiting);
nlohmann::json approval_json(const std::string& session, uint64_t seq, const ApprovalRequested& r);

// What the run and resume commands print for each event: the status line,
// and the acknowledgement log.
std::function<void(const Event&)> event_printer(const RuntimeArgs& args, StatusLine& status);

// Prints streamed answers on a terminal (StatusLine::on_delta).
std::function<void(const StreamDelta&)> delta_printer(StatusLine& status);

}  // namespace carapace::cli
