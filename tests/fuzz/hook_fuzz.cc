// Fuzz target: what a command hook prints on stdout, read as its decision
// (parse_decision, actors/hook/hooks.h). A hook is the user's command, but
// what it prints may echo what a model or a tool wrote. The first byte of
// an input chooses the hook event, the rest is the hook's stdout.
//
// Checked: a decision read is one its event allows, and modify_args carries
// a JSON object no deeper than the bound on outside JSON (limits::kJsonDepth).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "actors/hook/hooks.h"
#include "base/bounded_json.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

constexpr int kHookEvents = 7;  // AgentStart (1) to AgentStop (7)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto event = static_cast<HookEvent>(1 + data[0] % kHookEvents);
  std::string printed(reinterpret_cast<const char*>(data) + 1, size - 1);
  HookDecision decision;
  if (!parse_decision("fuzz", printed, event, &decision).ok()) return 0;
  fuzz::check(decision_fits(event, decision.decision), "a hook's decision does not fit its event");
  if (decision.decision == Decision::kModifyArgs) {
    fuzz::check(!json_depth_exceeds(decision.modified_args.text), "a hook's new arguments nest past the bound");
    fuzz::check(parse_stored_json(decision.modified_args.text).is_object(),
                "a hook's new arguments are not a JSON object");
  }
  (void)resolve_decisions(event, {decision});
  return 0;
}
