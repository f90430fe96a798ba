// The actor a tools node publishes (carapace node --role tools): it runs
// the calls a session host sends through the node's own tool supervisor,
// with the node's own tools, sandbox and workspace, and at most once per
// call id (its CallLedger).
//
// A call asked for again (a host that resumed after a crash, or a retry):
// running, it is answered when it ends; done, with its recorded result;
// begun but cut off by a restart of the node, as of unknown outcome (an
// idempotent tool runs again). Each session works in a directory of its own
// under the node's workspace root; the host's paths mean nothing here.
#pragma once

#include <memory>
#include <string>

#include "actors/tool/remote/call_ledger.h"
#include "actors/tool/remote/node_protocol.h"
#include "actors/tool/tool_registry.h"

namespace carapace {

struct ToolNodeOptions {
  std::string name;            // says who answered (ToolOutcome::node) and in hello
  std::string workspace_root;  // canonical; each session gets root/<session id>
  std::shared_ptr<ToolRegistry> tools;
  std::shared_ptr<CallLedger> ledger;
  // Deliberate defects for tests (carapace node --test-mutation), never set
  // otherwise: kForgetfulLedger (the torture runner's mutation check) never
  // looks calls up, and runs one asked for again after a host crash as a
  // new one; kSilent never answers a call, though the node stays up.
  enum class Mutation : uint8_t { kNone, kForgetfulLedger, kSilent };
  Mutation mutation = Mutation::kNone;
};

ToolNodeActor spawn_tool_node(caf::actor_system& system, ToolSupervisorActor local, ToolNodeOptions options);

// Whether `id` can name a directory: 1..128 of [A-Za-z0-9._-], not . or ..
bool node_safe_session_id(const std::string& id);

}  // namespace carapace
