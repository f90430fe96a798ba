// Deep JSON for tests of the depth bound: text nested past any stack, and a
// bundle forged as an attacker would, carrying it where a model's and a
// tool's text go, with every checkpoint's hash recomputed so that `verify`
// and `bundle import` accept it. Nothing here builds a nested value.
#pragma once

#include <stdexcept>
#include <string>
#include <variant>

#include "events/fold.h"
#include "replay/bundle.h"

namespace carapace::testing {

// {"a":{"a":...1...}}, `depth` objects deep, as text.
inline std::string nested_json(size_t depth) {
  std::string out;
  out.reserve(depth * 6 + 1);
  for (size_t k = 0; k < depth; ++k) out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

// Sets each turn.committed's state hash to the fold's, as the journal does.
inline void rehash_checkpoints(Bundle& b) {
  SessionState state;
  for (Event& e : b.events) {
    if (auto* c = std::get_if<TurnCommitted>(&e.body)) c->state_hash = state_hash(state, c->hash_version);
    Status s = apply(state, e);
    if (!s.ok()) throw std::runtime_error("rehash_checkpoints: " + s.to_string());
  }
}

// The first tool call's arguments (in llm.responded and tool.requested) and
// its output become `deep`; then the checkpoints are rehashed.
inline void plant_deep_json(Bundle& b, const std::string& deep) {
  std::string call_id;
  for (Event& e : b.events) {
    if (auto* r = std::get_if<LlmResponded>(&e.body); r && call_id.empty() && !r->tool_calls.empty()) {
      call_id = r->tool_calls[0].id;
      r->tool_calls[0].args.text = deep;
    } else if (auto* q = std::get_if<ToolRequested>(&e.body); q && q->call_id == call_id) {
      q->args.text = deep;
    } else if (auto* c = std::get_if<ToolCompleted>(&e.body); c && c->call_id == call_id) {
      c->output = deep;
      c->kept_bytes = c->original_bytes = deep.size();
    }
  }
  if (call_id.empty()) throw std::runtime_error("plant_deep_json: the bundle has no tool call");
  rehash_checkpoints(b);
}

}  // namespace carapace::testing
