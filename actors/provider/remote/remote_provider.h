// The session host's side of provider nodes (docs/scale-out.md): a
// Provider whose attempts run on a provider node, which holds the API key.
//
// Each attempt goes to the up node with the fewest attempts in flight; its
// streamed pieces come back to a sink actor of the host's. A node lost
// mid-attempt (its connection closed, reset, or silent past the middleman's
// connection time-out), an attempt past its deadline, or no node up at all
// gives a transport failure, which the session's retry policy retries like
// a connection reset: the next attempt goes to a node that is up. Nodes are
// connected to again after a loss.
//
// The request bodies the host records are rendered here, by a provider made
// from the host's own settings without a key; a node whose rendering of a
// probe request differs (another provider, max_tokens, cache settings) is
// refused, so the recorded body is the one the node sent.
#pragma once

#include <caf/actor.hpp>

#include <memory>
#include <vector>

#include "actors/provider/provider.h"
#include "actors/tool/remote/node_directory.h"

namespace carapace {

struct RemoteProviderOptions {
  std::vector<NodeRoute> nodes;  // role "provider"; tools unused
  bool insecure = false;         // plain TCP (loopback only)
  uint64_t connect_timeout_ms = 5000;
  uint64_t reconnect_ms = 1000;
  // An attempt's deadline on the host, past the provider's own time-outs
  // (the node enforces those): a node up but silent this long is given up.
  uint64_t attempt_deadline_ms = 15 * 60 * 1000;
  // The most a node's reply may hold (its text, tool calls and error, and
  // the pieces streamed): past it, the attempt is a transport failure.
  uint64_t max_reply_bytes = 64ull << 20;
  uint64_t max_tool_calls = 256;
  // Renders request bodies and names the provider; never asked to call.
  std::shared_ptr<Provider> renderer;
};

class RemoteProvider : public Provider {
 public:
  // Starts connecting to every node; wait_ready() waits for the first tries.
  RemoteProvider(caf::actor_system& system, RemoteProviderOptions options);
  ~RemoteProvider() override;

  std::string name() const override;
  bool blocking() const override { return true; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override;
  bool asynchronous() const override { return true; }
  uint64_t start(const ProviderRequest& request, DeltaSink on_delta, ReplySink done) override;
  // Answers the attempt cancelled at once; the node finishes it on its own.
  void cancel(uint64_t id) override;
  std::string render_request(const ProviderRequest& request) const override;

  // Returns once every node was tried once (up or not), or after `ms`.
  void wait_ready(uint64_t ms);
  // Each node: up or down and why, attempts in flight.
  std::vector<NodeState> states() const;
  // Stops the router and answers every attempt still waiting; call it
  // while the actor system lives (the destructor does, if not done).
  void shutdown();

  struct Calls;

 private:
  caf::actor_system& system_;
  RemoteProviderOptions options_;
  std::shared_ptr<Calls> calls_;
  std::shared_ptr<NodeDirectory> directory_;
  caf::actor router_;
};

}  // namespace carapace
