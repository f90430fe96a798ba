#include "actors/provider/replay_provider.h"

namespace carapace {

ProviderReply ReplayProvider::call(const ProviderRequest& request, const DeltaSink& on_delta) {
  ProviderReply reply = tape_->provider_reply(request);
  if (reply.ok && on_delta && !reply.response.text.empty()) {
    on_delta(StreamDelta{
        .session_id = request.session_id, .turn = request.turn, .attempt = request.attempt, .text = reply.response.text});
  }
  return reply;
}

}  // namespace carapace
