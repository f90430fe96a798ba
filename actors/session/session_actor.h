// The session actor: one agent session's loop (SPEC §4), and the only writer
// of its events.
//
// Each turn: turn.started and TurnStart hooks; the prompt assembled from its
// layers, the context trimmed past its budget; the provider called through
// the retry policy (every attempt and every chosen delay recorded; backoff by
// delayed message, so tests run it in virtual time); each tool call gated by
// PreToolUse hooks, run by the tool actors, followed by PostToolUse(Failure)
// hooks; TurnEnd hooks; then a checkpoint. The loop stops at a final answer,
// at max_turns, when a hook says stop, or when the provider fails for good;
// the session then waits for another user message. Subscribers hear every
// event, in seq order, once it is written (durable writes: once durable),
// and the provider's streamed deltas.
//
// What must survive a power loss before the session acts on it is written
// durably first: the tool.requested of a tool that is not idempotent (so a
// side effect happens at most once), and a user message before it is
// acknowledged. A session resumed in step mode goes on exactly where its log
// stops, honouring every recorded decision (actors/session/session_loop.h).
//
// Nothing here blocks a scheduler thread for long: steps are unsynced
// appends; durable writes and checkpoints complete asynchronously; tools,
// hooks and providers answer by message.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "actors/caf_types.h"
#include "actors/hook/hook_registry.h"
#include "actors/session/approval_policy.h"
#include "actors/session/loop_mutation.h"
#include "actors/session/pricing.h"
#include "actors/session/prompt.h"
#include "actors/provider/retry_policy.h"
#include "actors/tool/remote/node_directory.h"
#include "actors/tool/tool_registry.h"
#include "storage/session_journal.h"

namespace carapace {

// What a session takes from the configuration.
struct SessionSettings {
  uint64_t max_turns = 20;
  uint64_t context_max_chars = 400'000;
  RetryConfig retry;
  PromptConfig prompt;
  std::string instructions;  // the session instructions layer
  PriceTable prices;
  std::string workspace;                          // canonical path the tools are confined to
  uint64_t tool_timeout_ms = 15 * 60 * 1000;      // no result by then: the call failed
  uint64_t provider_timeout_ms = 10 * 60 * 1000;  // no reply by then: a transport failure
  LoopMutation mutation = LoopMutation::kNone;
  ApprovalPolicy approvals;  // which calls wait for a person besides the hooks' asks
};

struct SessionContext {
  std::string id;
  std::shared_ptr<SessionJournal> journal;  // its opening already durable
  SessionSettings settings;
  std::shared_ptr<ToolRegistry> tools;
  std::shared_ptr<HookRegistry> hooks;
  ProviderActor provider;
  ToolActor tool_host;
  // The tools nodes, when the configuration names some: which node each
  // call goes to (docs/scale-out.md). Null: every call runs in this process.
  std::shared_ptr<NodeDirectory> nodes;
  HookActor hook_host;
  std::shared_ptr<FaultInjector> faults;  // asked at session.actor; null: none
  // Called on the actor's thread each time a run ends and no queued message
  // starts another; then the actor closes itself: it tells its subscribers,
  // which quit after everything it sent them, and quits, releasing its state.
  // Null: the actor stays until it is stopped (tests that inspect it).
  std::function<void(const SessionOutcome&)> on_settled;
  // Told of each event once it is durable, before the subscribers (the
  // runtime logs them; null in a replay).
  std::function<void(const std::string& id, const Event&)> on_durable;
  // Told of each event the loop writes, in seq order, as soon as it is
  // written (a step at the session's next write, before a durable write
  // completes); on the actor's thread. A replay compares them as they come
  // (null in the runtime).
  std::function<void(const std::string& id, const Event&)> on_written;
  // Stores the body the provider will send for a request (durably) and
  // returns its body_ref; unset or "": nothing to capture (scripted).
  std::function<std::string(const ProviderRequest&)> capture_request;
  // Whether the provider reads the conversation a request carries
  // (Provider::reads_messages). A replay's does not (it answers by turn and
  // attempt from the recording), nor does the scripted one: their requests
  // go without the copy of the conversation, which would make a replay
  // quadratic in its turns. llm.requested records the
  // conversation's digest and size from the state either way, so a replay
  // whose conversation differs still diverges there.
  bool provider_reads_messages = true;
  // Called on the actor's thread when the session parks on a request (it
  // is durable by then); null: none.
  std::function<void(const std::string& id, const PendingApproval&)> on_parked;
};

// Spawns the session's actor. Send it start_atom to run its loop.
SessionActor spawn_session(caf::actor_system& system, std::shared_ptr<SessionContext> context);

}  // namespace carapace
