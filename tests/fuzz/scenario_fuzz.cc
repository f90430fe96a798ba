// Fuzz target: the scripted provider's scenario file (parse_scenario,
// actors/provider/scripted_provider.h), and the provider playing a scenario
// that parses: each entry asked for once, as a session's attempts would.
//
// Checked: an entry answers as what it is (a reply or a failure), every
// tool call of a reply has an id, and what streams out as deltas adds up to
// the reply (its text, each call's arguments).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "actors/provider/scripted_provider.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

// Enough entries to see every kind; a scenario of thousands is no different.
constexpr size_t kEntriesPlayed = 64;

void play(const Scenario& scenario) {
  ScriptedProvider provider(scenario);
  size_t played = std::min(kEntriesPlayed, scenario.entries.size() + 1);  // and one past the end
  for (size_t i = 0; i < played; ++i) {
    std::string text;
    std::map<int32_t, std::string> args;
    DeltaSink on_delta = [&](const StreamDelta& d) {
      text += d.text;
      if (d.tool_index >= 0) args[d.tool_index] += d.args_fragment;
    };
    ProviderRequest request{.session_id = "fuzz", .turn = i + 1, .attempt = 1, .attempt_index = i};
    ProviderReply reply = provider.call(request, on_delta);
    if (i == scenario.entries.size()) {
      fuzz::check(!reply.ok, "a scenario answers past its last entry");
      continue;
    }
    fuzz::check(reply.ok == !scenario.entries[i].is_failure, "a scenario entry answers as what it is not");
    if (!reply.ok) continue;
    fuzz::check(text == reply.response.text, "the streamed text is not the reply's");
    for (size_t c = 0; c < reply.response.tool_calls.size(); ++c) {
      const ToolCall& call = reply.response.tool_calls[c];
      fuzz::check(!call.id.empty(), "a scripted tool call has no id");
      fuzz::check(args[static_cast<int32_t>(c)] == call.args.text, "streamed arguments are not the call's");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Scenario scenario;
  if (parse_scenario(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", &scenario)
          .ok()) {
    play(scenario);
  }
  return 0;
}
