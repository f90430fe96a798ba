// FaultPlan: a list of fault rules, from a JSON file (docs/fault-plans.md) or
// built in C++ tests, acting as the runtime's FaultInjector.
//
// A rule names a point and an action, and fires when its filters match (a
// regex on the tool or hook name, an event type) and its trigger says so:
// the nth matching occurrence (once), or each matching occurrence with a
// probability drawn from a generator seeded by the plan's seed, or every
// matching occurrence. Every rule counts the occurrences its filters match;
// when several fire at once, the first wins. Occurrences are counted per
// process: a resumed process starts counting again.
//
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "base/fault_injection.h"
#include "base/pattern.h"
#include "base/status.h"

namespace carapace {

struct FaultRule {
  FaultPoint point = FaultPoint::kProviderBeforeRequest;
  Fault fault;
  std::string name_pattern;  // tool or hook name regex; empty: any
  std::string event_type;    // log and commit points; empty: any
  uint64_t nth = 0;          // fire on the nth match only (1-based); 0: see probability
  double probability = 1.0;  // chance of firing on each match when nth is 0
};

class FaultPlan : public FaultInjector {
 public:
  // invalid_argument naming the rule and key for a bad rule.
  static Status make(std::vector<FaultRule> rules, uint64_t seed, std::shared_ptr<FaultPlan>* out);
  static Status parse(std::string_view json_text, const std::string& source, std::shared_ptr<FaultPlan>* out);
  static Status load(const std::string& path, std::shared_ptr<FaultPlan>* out);

  Fault check(const FaultSite& site) override;

  // How often each rule fired so far.
  std::vector<uint64_t> fired() const;
  // How often each rule's point was reached where the rule matched, whether
  // it fired or not (a rule with probability 0 only counts).
  std::vector<uint64_t> matched() const;
  // The point of each rule, in order.
  std::vector<FaultPoint> points() const;

 private:
  struct Armed {
    FaultRule rule;
    Pattern name;  // RE2, searched for in the site's name
    uint64_t matches = 0;
    uint64_t fired = 0;
    std::mt19937_64 rng;
  };
  mutable std::mutex mu_;
  std::vector<Armed> rules_;
};

}  // namespace carapace
