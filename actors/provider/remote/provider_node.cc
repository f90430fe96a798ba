#include "actors/provider/remote/provider_node.h"

#include "base/lib_log.h"
#include "base/version.h"

namespace carapace {
namespace {

ProviderNodeActor::behavior_type provider_node(ProviderNodeActor::pointer self, ProviderSupervisorActor local,
                                               NodeHello hello, bool silent) {
  auto unanswered = std::make_shared<std::vector<caf::typed_response_promise<ProviderReply>>>();
  return {
      [self, local, silent, unanswered](ProviderRequest& request, DeltaSinkActor& sink) {
        // The supervisor answers every attempt, a transport failure if its
        // worker died; a failed request to it becomes one too.
        auto rp = self->make_response_promise<ProviderReply>();
        if (silent) {
          unanswered->push_back(rp);
          return rp;
        }
        self->request(local, caf::infinite, std::move(request), std::move(sink))
            .then([rp](ProviderReply& r) mutable { rp.deliver(std::move(r)); },
                  [rp](caf::error& e) mutable {
                    ProviderReply failed;
                    failed.failure = ProviderFailure{.error = "the provider node failed the attempt: " +
                                                              caf::to_string(e),
                                                     .transport = true};
                    rp.deliver(std::move(failed));
                  });
        return rp;
      },
      [hello](hello_atom) { return hello; },
  };
}

}  // namespace

ProviderNodeActor spawn_provider_node(caf::actor_system& system, ProviderSupervisorActor local,
                                      ProviderNodeOptions options) {
  NodeHello hello{.node_id = random_node_id(),
                  .name = options.name,
                  .role = "provider",
                  .version = version(),
                  .provider = options.provider->name(),
                  .render_digest = probe_render_digest(
                      [p = options.provider](const ProviderRequest& r) { return p->render_request(r); })};
  return system.spawn(provider_node, std::move(local), std::move(hello), options.silent);
}

}  // namespace carapace
