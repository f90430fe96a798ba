#include "actors/session/session_keeper.h"

#include <map>

namespace carapace {
namespace {

struct KeeperState {
  KeeperState() = default;
  std::map<caf::actor_addr, std::string> watched;
};

SessionKeeperActor::behavior_type keeper(SessionKeeperActor::stateful_pointer<KeeperState> self,
                                         std::function<void(const std::string&, const caf::error&)> on_failure) {
  self->set_down_handler([self, on_failure](const caf::down_msg& down) {
    auto it = self->state.watched.find(down.source);
    if (it == self->state.watched.end()) return;
    std::string id = std::move(it->second);
    self->state.watched.erase(it);
    bool normal = down.reason == caf::exit_reason::normal || down.reason == caf::exit_reason::user_shutdown;
    if (!normal) on_failure(id, down.reason);
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
                                        std::function<void(const std::string&, const caf::error&)> on_failure) {
  return system.spawn(keeper, std::move(on_failure));
}

}  // namespace carapace
