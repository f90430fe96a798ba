// Fuzz target: the fault plan file (FaultPlan::parse, replay/fault_plan.h),
// and a plan that parses asked at every fault point as the runtime asks it:
// with a tool or hook name for its rules' regular expressions to search,
// and an event type.
//
// Checked: the plan's count of rules fired (fired()) is the number of
// faults it returned.
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "replay/fault_plan.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

// Asked this many times at each point: enough for nth and probability rules to fire.
constexpr int kRounds = 4;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<FaultPlan> plan;
  if (!FaultPlan::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", &plan)
           .ok()) {
    return 0;
  }
  uint64_t returned = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int p = 0; p < kFaultPointCount; ++p) {
      FaultSite site{.point = static_cast<FaultPoint>(p),
                     .session = "fuzz",
                     .name = round % 2 ? "shell" : "mcp__fs__read_file",
                     .event_type = round % 2 ? "tool.completed" : "llm.responded",
                     .turn = static_cast<uint64_t>(round + 1)};
      Fault fault = plan->check(site);
      if (!fault) continue;
      ++returned;
      (void)fault.describe();
    }
  }
  std::vector<uint64_t> fired = plan->fired();
  fuzz::check(std::accumulate(fired.begin(), fired.end(), uint64_t{0}) == returned,
              "a fault plan counts another number of faults fired than it returned");
  return 0;
}
