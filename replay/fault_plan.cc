#include "replay/fault_plan.h"

#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "events/event_type.h"

#include <nlohmann/json.hpp>

#include <set>

namespace carapace {
namespace {

using nlohmann::json;

bool supports(FaultPoint point, FaultAction action) {
  switch (action) {
    case FaultAction::kCrash:
      return true;
    case FaultAction::kError:
      return point != FaultPoint::kLogAfterAppend && point != FaultPoint::kCommitAfter &&
             point != FaultPoint::kScheduleFired;
    case FaultAction::kDelay:
      return point != FaultPoint::kSessionActor;
    case FaultAction::kHang:
      return point == FaultPoint::kProviderBeforeRequest || point == FaultPoint::kProviderAfterResponse ||
             point == FaultPoint::kToolBeforeExec || point == FaultPoint::kHook;
    case FaultAction::kMalformedStream:
      return point == FaultPoint::kProviderBeforeRequest || point == FaultPoint::kProviderAfterResponse;
    case FaultAction::kNone:
      return false;
  }
  return false;
}

}  // namespace

Status FaultPlan::make(std::vector<FaultRule> rules, uint64_t seed, std::shared_ptr<FaultPlan>* out) {
  auto plan = std::make_shared<FaultPlan>();
  for (size_t i = 0; i < rules.size(); ++i) {
    FaultRule& r = rules[i];
    std::string where = "fault rule " + std::to_string(i + 1);
    if (!supports(r.point, r.fault.action)) {
      return Status::invalid_argument(where + ": " + std::string(fault_point_name(r.point)) + " cannot " +
                                      std::string(fault_action_name(r.fault.action)));
    }
    if (r.probability < 0 || r.probability > 1) {
      return Status::invalid_argument(where + ": probability must be between 0 and 1");
    }
    Armed a;
    Status compiled = Pattern::compile(r.name_pattern, &a.name);
    if (!compiled.ok())
      return Status::invalid_argument(where + ": the tool or hook name " + compiled.message());
    if (r.fault.rule.empty()) r.fault.rule = "rule " + std::to_string(i + 1);
    a.rule = std::move(r);
    a.rng.seed(seed * 1000003 + i);
    plan->rules_.push_back(std::move(a));
  }
  *out = std::move(plan);
  return Status();
}

Status FaultPlan::parse(std::string_view json_text, const std::string& source,
                        std::shared_ptr<FaultPlan>* out) {
  json doc;
  CARAPACE_RETURN_IF_ERROR(parse_bounded_json(json_text, source, &doc));
  auto bad = [&](const std::string& where, const std::string& what) {
    return Status::invalid_argument(source + ": " + where + ": " + what);
  };
  if (!doc.is_object()) return bad("the file", "must be a JSON object with a \"faults\" array");
  for (const auto& [k, v] : doc.items()) {
    if (k != "seed" && k != "faults" && k != "description")
      return bad("the file", "unknown key \"" + k + "\"");
  }
  uint64_t seed = 0;
  if (doc.contains("seed")) {
    if (!doc["seed"].is_number_unsigned()) return bad("seed", "must be a whole number >= 0");
    seed = doc["seed"];
  }
  if (!doc.contains("faults") || !doc["faults"].is_array())
    return bad("the file", "needs a \"faults\" array");
  std::vector<FaultRule> rules;
  static const std::set<std::string> kKnown = {"point",          "action",   "tool",        "hook",
                                               "event",          "nth",      "probability", "status",
                                               "retry_after_ms", "delay_ms", "message"};
  for (size_t i = 0; i < doc["faults"].size(); ++i) {
    const json& f = doc["faults"][i];
    std::string where = "faults[" + std::to_string(i) + "]";
    if (!f.is_object()) return bad(where, "must be an object");
    for (const auto& [k, v] : f.items()) {
      if (!kKnown.count(k)) return bad(where, "unknown key \"" + k + "\"");
    }
    FaultRule r;
    auto str = [&](const char* key, std::string* dst) -> Status {
      if (!f.contains(key)) return Status();
      if (!f[key].is_string()) return bad(where + "." + key, "must be a string");
      *dst = f[key];
      return Status();
    };
    auto num = [&](const char* key, uint64_t* dst) -> Status {
      if (!f.contains(key)) return Status();
      if (!f[key].is_number_unsigned()) return bad(where + "." + key, "must be a whole number >= 0");
      *dst = f[key];
      return Status();
    };
    std::string point, action;
    CARAPACE_RETURN_IF_ERROR(str("point", &point));
    CARAPACE_RETURN_IF_ERROR(str("action", &action));
    auto p = fault_point_from_name(point);
    if (!p) return bad(where + ".point", "\"" + point + "\" is not a fault point (see docs/fault-plans.md)");
    auto a = fault_action_from_name(action);
    if (!a)
      return bad(where + ".action",
                 "\"" + action + "\" is not crash, error, delay, hang or malformed_stream");
    r.point = *p;
    r.fault.action = *a;
    CARAPACE_RETURN_IF_ERROR(str("tool", &r.name_pattern));
    if (f.contains("hook")) CARAPACE_RETURN_IF_ERROR(str("hook", &r.name_pattern));
    CARAPACE_RETURN_IF_ERROR(str("event", &r.event_type));
    if (!r.event_type.empty() && !event_type_from_name(r.event_type)) {
      return bad(where + ".event", "\"" + r.event_type +
                                       "\" is not an event type (types look like hook.decided or tool.requested)");
    }
    CARAPACE_RETURN_IF_ERROR(num("nth", &r.nth));
    if (f.contains("nth") && r.nth == 0) return bad(where + ".nth", "counts from 1 (the first occurrence is 1)");
    if (f.contains("probability")) {
      if (!f["probability"].is_number()) return bad(where + ".probability", "must be a number from 0 to 1");
      r.probability = f["probability"];
    }
    uint64_t status = 0;
    CARAPACE_RETURN_IF_ERROR(num("status", &status));
    if (f.contains("status") && (status < 400 || status > 599))
      return bad(where + ".status", "must be an HTTP error status, 400 to 599, not " + std::to_string(status));
    r.fault.http_status = static_cast<uint32_t>(status);
    if (f.contains("retry_after_ms")) {
      CARAPACE_RETURN_IF_ERROR(num("retry_after_ms", &r.fault.retry_after_ms));
      r.fault.has_retry_after = true;
    }
    CARAPACE_RETURN_IF_ERROR(num("delay_ms", &r.fault.delay_ms));
    CARAPACE_RETURN_IF_ERROR(str("message", &r.fault.message));
    r.fault.rule = source + " " + where;
    rules.push_back(std::move(r));
  }
  Status s = make(std::move(rules), seed, out);
  return s.ok() ? s : Status::invalid_argument(source + ": " + s.message());
}

Status FaultPlan::load(const std::string& path, std::shared_ptr<FaultPlan>* out) {
  std::string text;
  CARAPACE_RETURN_IF_ERROR(read_bounded_file(path, limits::kFaultPlanBytes, "the fault plan", &text));
  return parse(text, path, out);
}

Fault FaultPlan::check(const FaultSite& site) {
  std::lock_guard lock(mu_);
  // Every matching rule counts the occurrence, whichever fires.
  Armed* winner = nullptr;
  for (auto& a : rules_) {
    const FaultRule& r = a.rule;
    if (r.point != site.point) continue;
    if (!r.event_type.empty() && r.event_type != site.event_type) continue;
    if (!r.name_pattern.empty() && !a.name.search(site.name)) continue;
    ++a.matches;
    bool fire;
    if (r.nth > 0) {
      fire = a.matches == r.nth;
    } else {
      double draw = static_cast<double>(a.rng() >> 11) / static_cast<double>(uint64_t{1} << 53);
      fire = draw < r.probability;
    }
    if (fire && winner == nullptr) winner = &a;
  }
  if (winner == nullptr) return Fault{};
  ++winner->fired;
  return winner->rule.fault;
}

std::vector<uint64_t> FaultPlan::matched() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& a : rules_) out.push_back(a.matches);
  return out;
}

std::vector<FaultPoint> FaultPlan::points() const {
  std::lock_guard lock(mu_);
  std::vector<FaultPoint> out;
  for (const auto& a : rules_) out.push_back(a.rule.point);
  return out;
}

std::vector<uint64_t> FaultPlan::fired() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& a : rules_) out.push_back(a.fired);
  return out;
}

}  // namespace carapace
