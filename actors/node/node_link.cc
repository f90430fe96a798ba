#include "actors/node/node_link.h"

#include <caf/io/all.hpp>

#include <chrono>

namespace carapace {

void connect_to_node(caf::event_based_actor* self, const NodeConnect& spec,
                     std::function<void(caf::strong_actor_ptr, const NodeHello&)> up,
                     std::function<void(const std::string&)> failed) {
  const auto timeout = std::chrono::milliseconds(spec.timeout_ms);
  auto mm = node_middleman(self->system(), spec.insecure);
  self->request(mm, timeout, caf::connect_atom::value, spec.host, spec.port)
      .then(
          [self, spec, timeout, up, failed](const caf::node_id&, caf::strong_actor_ptr& ptr,
                                            const std::set<std::string>& interface) {
            if (!ptr) return failed("nothing is published at that port");
            if (!self->system().assignable(interface, spec.interface)) {
              return failed("the actor there is not a " + spec.role + " node of this version (another interface)");
            }
            auto handle = caf::actor_cast<caf::actor>(ptr);
            self->request(handle, timeout, hello_atom::value)
                .then(
                    [spec, ptr, up, failed](const NodeHello& hello) {
                      if (hello.role != spec.role) {
                        return failed("the node at " + spec.address + " is a " + hello.role + " node, not a " +
                                      spec.role + " node");
                      }
                      if (spec.check) {
                        if (std::string why = spec.check(hello); !why.empty()) return failed(why);
                      }
                      up(ptr, hello);
                    },
                    [failed](caf::error& e) { failed("no hello: " + caf::to_string(e)); });
          },
          [failed](caf::error& e) { failed("cannot connect: " + caf::to_string(e)); });
}

}  // namespace carapace
