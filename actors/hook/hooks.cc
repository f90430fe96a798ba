#include "base/lib_log.h"
#include "actors/hook/hook_registry.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <thread>

#include "actors/tool/process/process.h"
#include "base/bounded_json.h"

namespace carapace {
namespace {

constexpr std::array<std::string_view, 8> kEventNames = {
    "", "AgentStart", "TurnStart", "TurnEnd", "PreToolUse", "PostToolUse", "PostToolUseFailure", "AgentStop"};
constexpr std::array<std::string_view, 8> kDecisionNames = {
    "continue", "append_context", "system_message", "stop", "allow", "modify_args", "deny", "ask"};

using nlohmann::json;

json input_json(const HookInput& in) {
  json j{{"event", std::string(hook_event_name(in.event))}, {"session_id", in.session_id}, {"turn", in.turn}};
  if (is_tool_event(in.event)) {
    j["tool_name"] = in.tool_name;
    j["tool_call_id"] = in.tool_call_id;
    json args = parse_stored_json(in.args.text.empty() ? "{}" : in.args.text);
    j["args"] = args.is_discarded() ? json(in.args.text) : args;
  }
  if (in.event == HookEvent::kPostToolUse || in.event == HookEvent::kPostToolUseFailure) {
    j["result"] = in.result;
    j["is_error"] = in.is_error;
  }
  if (!in.text.empty()) j["text"] = in.text;
  return j;
}

}  // namespace

Status parse_decision(const std::string& name, const std::string& stdout_text, HookEvent event,
                      HookDecision* out) {
  out->hook_name = name;
  std::string trimmed = stdout_text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.pop_back();
  if (trimmed.empty()) {
    out->decision = event == HookEvent::kPreToolUse ? Decision::kAllow : Decision::kContinue;
    return Status();
  }
  auto too_deep = [&name] {
    return Status::invalid_argument("hook " + name + " printed JSON nested deeper than " +
                                    std::to_string(limits::kJsonDepth) +
                                    " levels (the limit on JSON depth, docs/config.md)");
  };
  if (json_depth_exceeds(trimmed)) return too_deep();
  json j = json::parse(trimmed, nullptr, false);
  if (j.is_discarded()) {
    // stdout and stderr arrive merged: accept diagnostics before a final JSON line.
    // Its depth is measured alone: a quote in the diagnostics hides its brackets
    // from a measure of the whole.
    size_t nl = trimmed.rfind('\n');
    if (nl != std::string::npos) {
      std::string_view last = std::string_view(trimmed).substr(nl + 1);
      if (json_depth_exceeds(last)) return too_deep();
      j = json::parse(last, nullptr, false);
    }
  }
  if (j.is_discarded() || !j.is_object()) {
    return Status::invalid_argument(
        "hook " + name + " printed something that is not a JSON object: " + trimmed.substr(0, 200));
  }
  if (!j.contains("decision") || !j["decision"].is_string()) {
    return Status::invalid_argument("hook " + name + " answered without a \"decision\" string");
  }
  auto d = decision_from_name(j["decision"].get<std::string>());
  if (!d || !decision_fits(event, *d)) {
    return Status::invalid_argument("hook " + name + " answered decision '" +
                                    j["decision"].get<std::string>() + "', which " +
                                    std::string(hook_event_name(event)) + " hooks cannot make");
  }
  out->decision = *d;
  if (j.contains("reason") && j["reason"].is_string()) out->reason = j["reason"];
  if (j.contains("message") && j["message"].is_string()) out->message = j["message"];
  if (*d == Decision::kModifyArgs) {
    if (!j.contains("args") || !j["args"].is_object()) {
      return Status::invalid_argument("hook " + name + " chose modify_args without an \"args\" object");
    }
    out->modified_args.text = j["args"].dump();
  }
  return Status();
}

std::string_view hook_event_name(HookEvent event) {
  auto i = static_cast<size_t>(event);
  return i < kEventNames.size() ? kEventNames[i] : "unknown";
}

std::optional<HookEvent> hook_event_from_name(std::string_view name) {
  for (size_t i = 1; i < kEventNames.size(); ++i) {
    if (kEventNames[i] == name) return static_cast<HookEvent>(i);
  }
  return std::nullopt;
}

bool is_tool_event(HookEvent event) {
  return event == HookEvent::kPreToolUse || event == HookEvent::kPostToolUse ||
         event == HookEvent::kPostToolUseFailure;
}

std::string_view decision_name(Decision d) {
  auto i = static_cast<size_t>(d);
  return i < kDecisionNames.size() ? kDecisionNames[i] : "unknown";
}

std::optional<Decision> decision_from_name(std::string_view name) {
  for (size_t i = 0; i < kDecisionNames.size(); ++i) {
    if (kDecisionNames[i] == name) return static_cast<Decision>(i);
  }
  return std::nullopt;
}

bool decision_fits(HookEvent event, Decision d) {
  bool tool_gate =
      d == Decision::kAllow || d == Decision::kDeny || d == Decision::kModifyArgs || d == Decision::kAsk;
  return event == HookEvent::kPreToolUse ? tool_gate : !tool_gate;
}

HookVerdict resolve_decisions(HookEvent event, std::vector<HookDecision> decisions) {
  HookVerdict v;
  v.decisions = std::move(decisions);
  if (event == HookEvent::kPreToolUse) {
    v.resolved = Decision::kAllow;
    bool modified = false;
    for (const auto& d : v.decisions) {
      if (d.decision == Decision::kDeny) {
        v.resolved = Decision::kDeny;
        v.reason = d.reason.empty() ? "denied by hook " + d.hook_name : d.reason;
        v.modified_args = {};
        return v;
      }
      if (d.decision == Decision::kAsk && v.resolved != Decision::kAsk) {
        v.resolved = Decision::kAsk;
        v.reason = d.reason.empty() ? "hook " + d.hook_name + " asks a person" : d.reason;
      }
      if (d.decision == Decision::kModifyArgs && !modified) {
        modified = true;
        if (v.resolved != Decision::kAsk) {
          v.resolved = Decision::kModifyArgs;
          v.reason = d.reason;
        }
        v.modified_args = d.modified_args;  // the first one's: what runs, or what is asked about
      }
    }
    return v;
  }
  // stop > system_message > append_context > continue
  auto rank = [](Decision d) {
    switch (d) {
      case Decision::kStop:
        return 3;
      case Decision::kSystemMessage:
        return 2;
      case Decision::kAppendContext:
        return 1;
      default:
        return 0;
    }
  };
  v.resolved = Decision::kContinue;
  for (const auto& d : v.decisions) {
    if (rank(d.decision) > rank(v.resolved)) {
      v.resolved = d.decision;
      v.reason = d.reason;
    }
  }
  return v;
}

Status HookRegistry::add(HookDefinition hook) {
  if (hook.name.empty()) return Status::invalid_argument("a hook needs a name");
  if (static_cast<bool>(hook.function) == !hook.command.empty()) {
    return Status::invalid_argument("hook " + hook.name + " needs either a function or a command, not both");
  }
  auto entry = std::make_shared<Entry>();
  Status compiled = Pattern::compile(hook.matcher, &entry->matcher);
  if (!compiled.ok())
    return Status::invalid_argument("hook " + hook.name + ": matcher " + compiled.message());
  entry->definition = std::move(hook);
  std::lock_guard lock(mu_);
  for (const auto& h : hooks_) {
    if (h->definition.name == entry->definition.name) {
      return Status::invalid_argument("a hook named " + entry->definition.name + " is already registered");
    }
  }
  hooks_.push_back(std::move(entry));
  return Status();
}

bool HookRegistry::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it =
      std::find_if(hooks_.begin(), hooks_.end(), [&](const auto& h) { return h->definition.name == name; });
  if (it == hooks_.end()) return false;
  hooks_.erase(it);
  return true;
}

std::vector<std::shared_ptr<const HookRegistry::Entry>> HookRegistry::matching(
    HookEvent event, const std::string& tool_name) const {
  std::vector<std::shared_ptr<const Entry>> out;
  std::lock_guard lock(mu_);
  for (const auto& h : hooks_) {
    if (h->definition.event != event) continue;
    if (is_tool_event(event) && !h->matcher.search(tool_name)) continue;
    out.push_back(h);
  }
  return out;
}

Status run_hook(const HookRegistry::Entry& hook, const HookInput& input, HookDecision* out) {
  const HookDefinition& def = hook.definition;
  if (def.function) {
    try {
      *out = def.function(input);
    } catch (const std::exception& e) {
      return Status::aborted("hook " + def.name + " threw: " + e.what());
    } catch (...) {
      return Status::aborted("hook " + def.name + " threw a non-standard exception");
    }
    out->hook_name = def.name;
    if (!decision_fits(input.event, out->decision)) {
      return Status::invalid_argument("hook " + def.name + " answered decision '" +
                                      std::string(decision_name(out->decision)) + "', which " +
                                      std::string(hook_event_name(input.event)) + " hooks cannot make");
    }
    return Status();
  }
  ProcessOptions options{.argv = def.command,
                         // A tool's output may hold bytes that are not UTF-8: replaced, since
                         // throwing here leaves every hook of the call unrun.
                         .stdin_data = input_json(input).dump(-1, ' ', false, json::error_handler_t::replace),
                         .timeout_ms = def.timeout_ms,
                         .max_output_bytes = 64 * 1024};
  ProcessResult r = run_process(options);
  if (!r.started) return Status::io_error("hook " + def.name + " did not start: " + r.error);
  if (r.timed_out)
    return Status::aborted("hook " + def.name + " timed out after " + std::to_string(def.timeout_ms) + " ms");
  if (r.exit_code != 0) {
    return Status::aborted("hook " + def.name + " exited with status " + std::to_string(r.exit_code) +
                           (r.output.empty() ? "" : ": " + r.output.substr(0, 200)));
  }
  return parse_decision(def.name, r.output, input.event, out);
}

std::optional<HookDecision> fail_closed_decision(const HookDefinition& hook, HookEvent event,
                                                 const std::string& error) {
  if (!hook.fail_closed || event != HookEvent::kPreToolUse) return std::nullopt;
  return HookDecision{.hook_name = hook.name,
                      .decision = Decision::kDeny,
                      .reason = "hook " + hook.name + " is fail-closed and failed: " + error};
}

HookVerdict run_hooks(const std::vector<std::shared_ptr<const HookRegistry::Entry>>& hooks,
                      const HookInput& input, FaultInjector* faults) {
  std::vector<HookDecision> decisions;
  std::vector<HookFailure> failures;
  std::vector<FaultNote> fired;
  for (const auto& h : hooks) {
    HookDecision d;
    Status s;
    Fault f = check_fault(faults, FaultSite{.point = FaultPoint::kHook,
                                            .session = input.session_id,
                                            .name = h->definition.name,
                                            .event_type = std::string(hook_event_name(input.event)),
                                            .turn = input.turn});
    if (f) fired.push_back(fault_note(FaultPoint::kHook, f, "hook " + h->definition.name));
    if (f.action == FaultAction::kDelay) std::this_thread::sleep_for(std::chrono::milliseconds(f.delay_ms));
    if (f.action == FaultAction::kError) {
      s = Status::aborted("hook " + h->definition.name + " failed: injected fault " + f.describe());
    } else if (f.action == FaultAction::kHang) {
      std::this_thread::sleep_for(std::chrono::milliseconds(h->definition.timeout_ms));
      s = Status::aborted("hook " + h->definition.name + " timed out after " +
                          std::to_string(h->definition.timeout_ms) + " ms (injected hang)");
    } else {
      s = run_hook(*h, input, &d);
    }
    if (s.ok()) {
      decisions.push_back(std::move(d));
    } else {
      auto deny = fail_closed_decision(h->definition, input.event, s.message());
      lib_log().warn("{} (session {}, {})", s.message(), input.session_id, deny ? "fail-closed: denied" : "skipped");
      failures.push_back(HookFailure{.hook_name = h->definition.name, .error = s.message()});
      if (deny) decisions.push_back(std::move(*deny));
    }
  }
  HookVerdict v = resolve_decisions(input.event, std::move(decisions));
  v.failures = std::move(failures);
  v.faults = std::move(fired);
  return v;
}

}  // namespace carapace
