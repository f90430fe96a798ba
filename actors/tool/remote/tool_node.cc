#include "actors/tool/remote/tool_node.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "base/lib_log.h"
#include "base/version.h"

namespace carapace {

bool node_safe_session_id(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

struct ToolNodeState {
  // Not an aggregate: CAF would build it from the actor's own pointer.
  ToolNodeState() = default;
  ToolSupervisorActor local;
  ToolNodeOptions options;
  // Calls running here, by ledger key: whoever asks while one runs waits for it.
  std::map<std::string, std::vector<caf::typed_response_promise<ToolOutcome>>> running;
  std::vector<caf::typed_response_promise<ToolOutcome>> silenced;  // Mutation::kSilent: never answered
  static inline const char* name = "carapace.tool_node";
};

using NodeSelf = ToolNodeActor::stateful_pointer<ToolNodeState>;

ToolOutcome refused(const ToolInvocation& inv, const std::string& node, std::string why) {
  return ToolOutcome{.call_id = inv.call.id, .output = std::move(why), .is_error = true, .node = node};
}

void answer_all(NodeSelf self, const std::string& key, const ToolOutcome& outcome) {
  auto it = self->state.running.find(key);
  if (it == self->state.running.end()) return;
  for (auto& rp : it->second) rp.deliver(outcome);
  self->state.running.erase(it);
}

void run_call(NodeSelf self, ToolInvocation inv, const std::string& key, bool idempotent) {
  auto& st = self->state;
  const std::string workspace = st.options.workspace_root + "/" + inv.session_id;
  if (::mkdir(workspace.c_str(), 0700) != 0 && errno != EEXIST) {
    return answer_all(self, key,
                      refused(inv, st.options.name,
                              "the tools node " + st.options.name + " cannot make the session's workspace: " +
                                  std::strerror(errno)));
  }
  // A directory, not a link a tool of another session left there: the
  // tools take it as the root they are confined to.
  struct stat st_ws {};
  if (::lstat(workspace.c_str(), &st_ws) != 0 || !S_ISDIR(st_ws.st_mode) || st_ws.st_uid != ::geteuid()) {
    return answer_all(self, key,
                      refused(inv, st.options.name,
                              "the tools node " + st.options.name + " refuses the session's workspace " + workspace +
                                  ": not a directory of its own (a link, or another owner's)"));
  }
  // Durable before the call starts: a restart of the node cannot make it run
  // twice. (An idempotent tool's may run twice: no sync.)
  if (Status s = st.options.ledger->begin(inv.session_id, inv.call.id, inv.call.name, inv.attempt, !idempotent);
      !s.ok()) {
    return answer_all(self, key,
                      refused(inv, st.options.name, "the tools node " + st.options.name +
                                                        " did not run the call: its ledger failed: " + s.to_string()));
  }
  inv.workspace = workspace;
  inv.node.clear();
  const std::string session = inv.session_id;
  const std::string call_id = inv.call.id;
  self->request(st.local, caf::infinite, std::move(inv))
      .then(
          [self, key, session, call_id, idempotent](ToolOutcome outcome) {
            outcome.node = self->state.options.name;
            outcome.faults.clear();  // the host's fault plan is the host's; the node has none
            if (Status s = self->state.options.ledger->finish(session, call_id, outcome, !idempotent); !s.ok()) {
              // The result stands; a later ask would find the call begun and not ended: unknown.
              lib_log().error("tools node: the outcome of {} {} was not recorded: {}", session, call_id, s.to_string());
            }
            answer_all(self, key, outcome);
          },
          [self, key, session, call_id](caf::error& e) {
            ToolOutcome outcome{.call_id = call_id,
                                .output = "the tools node's supervisor failed: " + caf::to_string(e),
                                .is_error = true,
                                .node = self->state.options.name};
            (void)self->state.options.ledger->finish(session, call_id, outcome);
            answer_all(self, key, outcome);
          });
}

ToolNodeActor::behavior_type tool_node(NodeSelf self, ToolSupervisorActor local, ToolNodeOptions options) {
  self->state.local = std::move(local);
  self->state.options = std::move(options);
  return {
      [self](ToolInvocation& inv) -> caf::typed_response_promise<ToolOutcome> {
        auto& st = self->state;
        auto rp = self->make_response_promise<ToolOutcome>();
        if (!node_safe_session_id(inv.session_id)) {
          rp.deliver(refused(inv, st.options.name, "the tools node refuses session id '" + inv.session_id.substr(0, 64) +
                                                       "': 1 to 128 of A-Z a-z 0-9 . _ -"));
          return rp;
        }
        auto tool = st.options.tools->find(inv.call.name);
        if (!tool) {
          rp.deliver(refused(inv, st.options.name,
                             "the tools node " + st.options.name + " has no tool named " + inv.call.name));
          return rp;
        }
        const std::string key = inv.session_id + '\n' + inv.call.id;
        if (auto it = st.running.find(key); it != st.running.end()) {
          it->second.push_back(rp);  // asked again while it runs: the same outcome, once
          return rp;
        }
        const CallLedger::Entry e =
            st.options.mutation == ToolNodeOptions::Mutation::kForgetfulLedger
                ? CallLedger::Entry{}
                : st.options.ledger->find(inv.session_id, inv.call.id);
        if (e.state == CallLedger::State::kDone) {
          ToolOutcome o = e.outcome_kept ? e.outcome
                                         : refused(inv, st.options.name,
                                                   "This call ran on the tools node " + st.options.name +
                                                       " before; its result is no longer kept there, so it was "
                                                       "not run again.");
          o.call_id = inv.call.id;
          o.node = st.options.name;
          rp.deliver(std::move(o));
          return rp;
        }
        if (e.state == CallLedger::State::kStarted && !tool->spec.idempotent) {
          // Begun here before the node restarted, and never ended.
          ToolOutcome o{.call_id = inv.call.id,
                        .output = "This call was interrupted: the tools node " + st.options.name +
                                  " stopped while it ran, so whether it took effect is unknown. Check before "
                                  "repeating it.",
                        .is_error = true,
                        .interrupted = true,
                        .node = st.options.name};
          (void)st.options.ledger->finish(inv.session_id, inv.call.id, o);
          rp.deliver(std::move(o));
          return rp;
        }
        st.running[key].push_back(rp);
        if (st.options.mutation == ToolNodeOptions::Mutation::kForgetfulLedger) {
          inv.recovering.clear();  // a call asked for again is a new one
        }
        if (st.options.mutation == ToolNodeOptions::Mutation::kSilent) {
          st.running.erase(key);
          st.silenced.push_back(rp);  // never answered
          return rp;
        }
        run_call(self, std::move(inv), key, tool->spec.idempotent);
        return rp;
      },
      [self](cancel_atom, const std::string& session) {
        self->send(self->state.local, cancel_atom::value, session);
      },
      [self](hello_atom) -> NodeHello {
        auto& st = self->state;
        NodeHello hello{.node_id = st.options.ledger->id(),
                        .name = st.options.name,
                        .role = "tools",
                        .tools = st.options.tools->names(),
                        .version = version(),
                        .ledger_calls = st.options.ledger->calls()};
        for (auto& spec : st.options.tools->specs()) {
          if (spec.name.rfind("mcp__", 0) == 0) hello.tool_specs.push_back(std::move(spec));
        }
        return hello;
      },
  };
}

}  // namespace

ToolNodeActor spawn_tool_node(caf::actor_system& system, ToolSupervisorActor local, ToolNodeOptions options) {
  // Its own thread: the ledger's syncs do not hold a scheduler worker.
  return system.spawn<caf::detached>(tool_node, std::move(local), std::move(options));
}

}  // namespace carapace
