#include "actors/session/session_keeper.h"

#include <map>

namespace carapace {
namespace {

struct KeeperState {
  KeeperState() = default;
  std::map<caf::actor_addr, std::string> watched;
};

SessionKeeperActor::behavior_type keeper(SessionKeeperActor::stateful_pointer<KeeperState> self,
                                         std::function<void(const std::string&, const caf::error&)> on_failure,
                                         std::function<void(const std::string&, const caf::actor_addr&)> on_closed) {
  self->set_down_handler([self, on_failure, on_closed](const caf::down_msg& down) {
    auto it = self->state.watched.find(down.source);
    if (it == self->state.watched.end()) return;
    std::string id = std::move(it->second);
    self->state.watched.erase(it);
    bool normal = down.reason == caf::exit_reason::normal || down.reason == caf::exit_reason::user_shutdown;
    if (!normal) {
      on_failure(id, down.reason);
    } else if (on_closed) {
      on_closed(id, down.source);
    }
  });
  return {
      [=](keep_atom, SessionActor session, const std::string& id) {
        self->state.watched[session.address()] = id;
        self->monitor(session);
      },
  };
}

}  // namespace

SessionKeeperActor spawn_session_keeper(caf::actor_system& system,
                                        std::function<void(const std::string&, const caf::error&)> on_failure,
                                        std::function<void(const std::string&, const caf::actor_addr&)> on_closed) {
  return system.spawn(keeper, std::move(on_failure), std::move(on_closed));
}

}  // namespace carapace
