// Runtime: Carapace embedded in a C++ program — the public API.
//
//   carapace::Runtime::Options options;
//   options.home = "/var/lib/myapp/carapace";
//   std::unique_ptr<carapace::Runtime> rt;
//   carapace::Status s = carapace::Runtime::open(options, &rt);
//   rt->register_tool({.spec = {.name = "add", .description = "Adds a and b", .schema = ...},
//                      .blocking = false,
//                      .run = [](const nlohmann::json& args, const carapace::ToolContext&) {...}});
//   std::string id;
//   s = rt->start_session({.task = "What is 2 + 3?"}, &id);
//   carapace::SessionOutcome outcome;
//   s = rt->wait(id, std::chrono::minutes(5), &outcome);
//
// A runtime owns (or borrows) a CAF actor system, the event log under its
// home directory, and the provider, tool and hook actors; it runs any number
// of sessions at once, each a SessionActor writing its own events. Sessions
// stay resumable from their log after the runtime or the process is gone.
//
// Thread safety: every method may be called from any thread, except from
// inside an event or delta callback (they run on actor threads). Destroying
// the runtime stops its sessions, kills every process their tool calls
// started, and waits for its actors.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/hook/hooks.h"
#include "actors/messages.h"
#include "actors/provider/provider.h"
#include "actors/tool/tool.h"
#include "base/fault_injection.h"
#include "base/status.h"
#include "events/events.h"
#include "runtime/config.h"
#include "runtime/session_options.h"

namespace caf {
class actor_system;
}

namespace carapace {

class BodyStore;
class SessionJournal;
struct SessionSettings;
struct ReplayReport;

class Runtime {
 public:
  struct Options {
    std::string home;  // data directory; the event log lives in home/log
    Config config;
    // Use this actor system instead of creating one. It must outlive the
    // runtime. Latency hint: call carapace::configure_scheduler on its
    // config (<carapace/scheduler.h>), as the runtime does for its own
    // system: CAF 0.17's default polling adds ~100 us to each message hop of
    // a turn, and its clock wakes a thread for every timer set or cancelled.
    caf::actor_system* system = nullptr;
    // Use this provider instead of the configured one.
    std::shared_ptr<Provider> provider;
    // Where request bodies of `provider` are captured (the configured HTTP
    // providers use home/bodies); null: none.
    std::shared_ptr<BodyStore> bodies;
    // Register the built-in tools that config.tools_enabled names (the
    // shell, the file tools). Off: a program that registers nothing offers
    // the model no tool at all (the command line turns it on).
    bool builtin_tools = false;
    // Injects faults at the named points (docs/fault-plans.md); null: none.
    std::shared_ptr<FaultInjector> faults;
    // Applied to each built-in tool before it is registered (to observe or
    // wrap it; the torture runner counts executions this way).
    std::function<ToolDefinition(ToolDefinition)> decorate_builtin_tool;
    // Process-wide changes, off unless asked for (the command line asks for
    // both). Each is made when the first runtime asking for it opens and
    // undone when the last one closes.
    //
    // child_subreaper: PR_SET_CHILD_SUBREAPER: should a tool call's guard
    // process be killed from outside, what it guarded is re-parented to this
    // process, where the runtime finds and kills it (actors/tool/process/process.h);
    // off, such orphans go to init. Leave off if the program reaps orphans
    // its own way.
    bool child_subreaper = false;
    // non_dumpable: PR_SET_DUMPABLE 0, as ssh-agent does: other processes of
    // the same user, the tools' commands among them, cannot read this
    // process's memory or environment (API keys) through /proc or ptrace, and
    // it leaves no core dump. A sandboxed command has no CAP_SYS_PTRACE to get
    // past this even as root (docs/sandbox.md).
    bool non_dumpable = false;
    // How long closing (close()'s end, the destructor) waits for C++ tool
    // calls and hooks still inside user code after their stop tokens were
    // tripped. Past it they are abandoned: a runtime that owns its actor
    // system leaves that system (and their threads) behind, logged as an
    // error, so that the destructor returns; a borrowed system will wait for
    // them when its owner destroys it.
    std::chrono::milliseconds shutdown_timeout{5000};
    // The event log's memory: its block cache (what reads keep, index and
    // filter blocks included), and its write buffers (all its memtables
    // together; written events past it are flushed to files). A long-running
    // service's memory settles a little above what these allow
    // (bench/README.md, embed_bench); the CLI's readers have their own.
    size_t log_block_cache_bytes = 2 << 20;
    size_t log_write_buffer_bytes = 1 << 20;
    // Hears every event of every session this runtime runs (started,
    // resumed, forked, recovered), with the session's id; a started
    // session's opening included. Called on an actor thread: keep it quick
    // (the collector's offer() only queues). Null: none.
    std::function<void(const std::string& session, const Event& event)> observe;
    // Hears every streamed piece of every model answer of every session
    // this runtime runs, from before each run starts (a host that shows
    // answers as they stream: carapace serve). Called on an actor thread:
    // keep it quick. Null: none.
    std::function<void(const std::string& session, const StreamDelta& delta)> observe_delta;
    // Told of every approval request a session of this runtime parks on
    // (docs/approvals.md), once it is durable; answer it with decide(), from
    // any thread, now or days later (the request survives the runtime).
    // Called on an actor thread: keep it quick. Setting it also offers the
    // model the ask_user tool (a person is there to answer). Null: none.
    std::function<void(const Approval& request)> on_approval;
  };

  // Opens the log, registers the configured tools and hooks, and starts the
  // provider, tool and hook actors. Errors name what was wrong (a missing
  // scenario, a locked home, a bad hook); options.config is checked by the
  // same rules, with the same messages, as a config file (validate_config).
  static Status open(Options options, std::unique_ptr<Runtime>* out);
  // Stops every session still running (each gets a session.stopped with the
  // stop reason, after the last event it wrote: it stays resumable, and is
  // not taken for crashed), trips the stop token of every C++ tool call,
  // kills their tool processes and closes the log. Returns within
  // options.shutdown_timeout plus the time to kill processes and stop MCP
  // servers, whatever tools and hooks do (see shutdown_timeout).
  ~Runtime();

  // The reason the destructor records in session.stopped; "the runtime was
  // closed" unless set (the command line sets "SIGINT" or "SIGTERM").
  void set_stop_reason(std::string reason);

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Tools and hooks may change while sessions run; the next turn sees them.
  Status register_tool(ToolDefinition tool);
  bool unregister_tool(const std::string& name);
  Status register_hook(HookDefinition hook);
  bool unregister_hook(const std::string& name);

  // Creates the session (its opening written durably) and starts its loop.
  Status start_session(const SessionOptions& options, std::string* id);

  enum class ResumeMode {
    kStep,  // keep every completed step of the interrupted turn
    kTurn,  // roll the interrupted turn back (turn.rolled_back) and run it again
  };

  struct ResumeOptions {
    ResumeMode mode = ResumeMode::kStep;
    // Attach a session that has finished (completed, or failed), to send it
    // more messages, instead of refusing it.
    bool allow_finished = false;
    // Follow-up messages (SessionOptions::follow_ups), recorded durably
    // before the session goes on; they are sent after what it was doing.
    std::vector<std::string> follow_ups;
    std::function<void(const Event&)> on_event;
    std::function<void(const StreamDelta&)> on_delta;
    std::function<void(const SessionOutcome&)> on_complete;  // as SessionOptions::on_complete
    std::chrono::milliseconds deadline{0};                   // as SessionOptions::deadline
    // A new turn budget from here on, recorded in session.resumed (a session
    // stopped at its budget, stop_reason "max_turns", goes on only with a
    // larger one); 0: unchanged.
    uint64_t max_turns = 0;
  };

  // Resumes a session from its log under the same id: checks every record's
  // checksum, recovers it, settles an interrupted turn by the mode, records
  // session.resumed, and runs its loop from there. Errors change nothing:
  // not_found (no such session), already_finished (it completed or failed;
  // allow_finished attaches it), busy (it runs here already — also for a
  // moment after wait() answered, while its actor closes: retry), corruption
  // (a damaged record), invalid_argument (it is stopped at its turn budget
  // and options.max_turns does not raise it).
  Status resume_session(const std::string& id, const ResumeOptions& options);

  struct ForkOptions {
    std::string id;    // the new session's id; empty: generated
    std::string task;  // a new user message for the fork; empty: go on from the checkpoint
    std::function<void(const Event&)> on_event;
    std::function<void(const StreamDelta&)> on_delta;
  };

  // Creates a new session whose history is `source`'s up to its checkpoint
  // of turn `at_turn` (session.started names the parent, turn and seq), and
  // runs it. The source is not touched.
  Status fork_session(const std::string& source, uint64_t at_turn, const ForkOptions& options,
                      std::string* id);

  // Sends another user message to a session of this runtime and returns once
  // it is durable (it survives a crash or a power loss from then on). An idle
  // session runs its loop again; a busy one takes the message when its next
  // turn starts (and, if its run ends first, runs again for it); a finished
  // one is woken from its log. A session that did not finish and does not
  // run here (crashed, stopped) is refused with needs_resume and nothing is
  // written: resume_session (with the message as a follow-up) goes on with it.
  Status send_message(const std::string& id, const std::string& text);

  // A graceful end: from now on no new session, message, resume or fork is
  // taken (busy, "the runtime is closing"); the sessions running here get up
  // to `drain` to end their runs (their tool calls finish and are recorded,
  // their model answers arrive). Returns when they all have, or when `drain`
  // is spent. Destroying the runtime then stops what still runs
  // (session.stopped recorded, tool processes killed: resumable).
  void close(std::chrono::milliseconds drain);

  // Stops session `id`, which runs in this runtime, and returns once it has
  // stopped: its actor ends, every process its tool calls started is
  // killed, and session.stopped is recorded with `reason` as its last
  // event, so that nothing takes it for a crash and resume_session goes on
  // with it. A C++ tool call in flight has its stop token tripped; it and an
  // MCP call are not waited for: their results are dropped (the resume
  // reports the call interrupted, or asks the tool's recover function). Other
  // sessions run on. wait() then answers at once: status kRunning (it did
  // not finish), stop_reason "stopped", error `reason`. not_found when no
  // session of that id runs here.
  Status stop(const std::string& id, const std::string& reason);

  // Answers approval request `answer.call_id` of session `id`
  // (docs/approvals.md) and returns once the decision is durable; the
  // session then goes on in this runtime (woken from its log if its actor
  // closed, or if another process parked it). The first durable answer wins.
  // Errors change nothing: not_found (no such session, or no request for
  // the call), already_decided (the message names the decision that
  // stands), invalid_argument (answer.args_digest names other arguments
  // than the request's; text for an approval, or approve/deny for a
  // question), expired (the request's on_expiry decided it; recorded now if
  // it was not yet). *recorded, if given, is the decision recorded or standing.
  Status decide(const std::string& id, const ApprovalAnswer& answer, ApprovalDecided* recorded = nullptr);

  // The approval requests that wait in the home (every session's), oldest
  // first; with a session id, that session's only.
  Status list_approvals(const std::string& id, std::vector<Approval>* out) const;

  // Waits until the session's loop stops; *out says how it stands. By then
  // the session's subscribers have been handed every event it appended.
  // timed_out when `timeout` passes first (it runs on); for a session not
  // running here: its outcome if it finished or waits for a decision
  // (stop_reason "waiting"), needs_resume if it did not (crashed, stopped),
  // not_found if the home has no such session.
  // A session whose loop has stopped closes its actor and releases its
  // memory (its subscriptions end with it); waiting for it afterwards
  // answers from what was remembered or from its log, and send_message
  // wakes it again from its log.
  Status wait(const std::string& id, std::chrono::milliseconds timeout, SessionOutcome* out);

  // Replays recorded session `id` offline (docs/replay.md): its loop re-run
  // with this runtime's tools and hooks — the C++ ones registered here run
  // for real, they are the code under test — and this runtime's
  // configuration, every answer from the log, every event compared with the
  // recorded one. *report says identical or where it diverged. Writes
  // nothing into the session; safe beside running sessions.
  Status replay(const std::string& id, uint64_t until_turn, ReplayReport* report);

  // Subscribes to a running session's events from now on; returns an id
  // for unsubscribe(). A callback that throws is logged (a warning) and the
  // subscription goes on. unsubscribe() returns once no callback of the
  // subscription runs or will (called from inside one, that one is the last).
  Status subscribe(const std::string& id, std::function<void(const Event&)> on_event,
                   std::function<void(const StreamDelta&)> on_delta, uint64_t* subscription);
  void unsubscribe(uint64_t subscription);

  // Session actors alive in this runtime (running, or idle and not yet closed).
  size_t live_sessions() const;

  // The sessions of the home, newest first (by the last checkpoint, else
  // the start), with the statuses of `carapace sessions` (SessionSummary),
  // filtered. A damaged index entry is skipped and named in the error only
  // when nothing could be listed.
  Status list_sessions(const SessionFilter& filter, std::vector<SessionSummary>* out) const;

  // Resumes every session of the home that did not finish and does not run
  // here (crashed or stopped), oldest first, each with `options` (its
  // callbacks for every one); one entry of *report per session tried, with
  // the outcome of its resume. The status is not ok only when the sessions
  // could not be listed.
  Status resume_unfinished(const ResumeOptions& options, std::vector<ResumedSession>* report);

  // Appends to *out the events of session `id` from seq `from_seq` (1: all)
  // to the last one written, read back from the log and checksum-checked.
  // Safe beside the running session (what it appends meanwhile may or may
  // not be included); not_found for an unknown id.
  Status read_events(const std::string& id, uint64_t from_seq, std::vector<Event>* out) const;

  const Config& config() const;
  caf::actor_system& system();
  const std::string& home() const;

 private:
  struct Impl;
  friend struct RuntimeInternals;  // runtime/runtime_internal.h: the project's own code only
  struct TestKnobs;
  static Status open_with(Options options, const TestKnobs& knobs, std::unique_ptr<Runtime>* out);
  explicit Runtime(std::unique_ptr<Impl> impl);
  // launch()'s first_input for an actor that waits for a message instead of starting.
  static const std::string kNoStart;
  Status resume(const std::string& id, const ResumeOptions& options, const std::string& first_input);
  // decide(); `by_expiry`: the runtime's own expiry decides (answer's kind ignored).
  Status decide_with(const std::string& id, ApprovalAnswer answer, ApprovalDecided* recorded, bool by_expiry);
  // A session actor failed: rebuild the session from its log (step mode)
  // under a new actor, keeping its subscribers. Runs on a thread of its own.
  void recover_failed_session(const std::string& id, const std::string& reason);
  // Spawns the session's actor over `journal`, subscribes, and starts it
  // (or hands it `first_input` as a user message).
  Status launch(const std::string& id, std::shared_ptr<SessionJournal> journal,
                SessionSettings settings, const std::function<void(const Event&)>& on_event,
                const std::function<void(const StreamDelta&)>& on_delta, const std::string& first_input,
                const std::vector<Event>& backlog = {});
  // subscribe(), with `backlog` delivered before anything the session sends.
  Status subscribe_with(const std::string& id, std::function<void(const Event&)> on_event,
                        std::function<void(const StreamDelta&)> on_delta, const std::vector<Event>& backlog,
                        uint64_t* subscription);
  std::unique_ptr<Impl> impl_;
};

// A session id from the clock and a random suffix: s-20261121-193000-4f2a09c1.
std::string generate_session_id();

}  // namespace carapace
