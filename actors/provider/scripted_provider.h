// ScriptedProvider: plays a scenario file instead of calling a model. The
// embedded default: no network, no API key, the same answers every run.
//
// A scenario (docs/scenario-format.md) is an ordered list of replies, each an
// assistant message (text, tool calls, usage, simulated latency) or a failure
// (an HTTP status with an optional Retry-After, or a transport error). A
// session's n-th answered attempt gets the n-th entry (attempts that never
// reached the provider, such as timeouts, do not count), so a resumed
// session continues where its log stopped. A scenario that runs out gives
// a permanent failure naming the file and the entry asked for.
//
// Thread-safe: the scenario is read-only once loaded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "actors/provider/provider.h"
#include "base/status.h"

namespace carapace {

struct ScenarioEntry {
  bool is_failure = false;
  ProviderResponse response;  // text, tool calls, finish reason, usage
  bool has_usage = false;     // else usage is estimated from the request
  ProviderFailure failure;
  uint64_t latency_ms = 0;
};

struct Scenario {
  std::string source;  // the file, for messages
  std::string text;    // the file's content, verbatim: what session.configured records
  std::string model;   // optional default model
  std::vector<ScenarioEntry> entries;
  // What the user says after each time the session stops, in order (the
  // torture runner sends them with `--then`); the provider ignores them.
  std::vector<std::string> user_messages;
};

// Errors name the file and the entry: "demo.json: replies[2].tool_calls[0].args: must be an object".
Status parse_scenario(std::string_view json_text, const std::string& source, Scenario* out);
Status load_scenario(const std::string& path, Scenario* out);

class ScriptedProvider : public Provider {
 public:
  explicit ScriptedProvider(Scenario scenario);

  std::string name() const override { return "scripted"; }
  bool blocking() const override { return false; }
  // It answers by attempt from its scenario; the conversation's size
  // (ProviderRequest::message_chars) is all it uses, for usage it estimates.
  bool reads_messages() const override { return false; }
  ProviderReply call(const ProviderRequest& request, const DeltaSink& on_delta) override;

  const Scenario& scenario() const { return scenario_; }

 private:
  Scenario scenario_;
};

}  // namespace carapace
