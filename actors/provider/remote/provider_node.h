// The actor a provider node publishes (carapace node --role provider): it
// answers the model calls session hosts send with the node's own provider,
// whose API key never leaves the node (the provider scrubs it from every
// error it reports), and streams the pieces to the host's sink.
#pragma once

#include <memory>
#include <string>

#include "actors/provider/provider.h"
#include "actors/tool/remote/node_protocol.h"

namespace carapace {

struct ProviderNodeOptions {
  std::string name;
  std::shared_ptr<Provider> provider;  // for hello: its name and how it renders
  // A deliberate defect for tests (carapace node --test-mutation silent),
  // never set otherwise: the node stays up and never answers an attempt.
  bool silent = false;
};

ProviderNodeActor spawn_provider_node(caf::actor_system& system, ProviderSupervisorActor local,
                                      ProviderNodeOptions options);

}  // namespace carapace
