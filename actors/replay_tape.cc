#include "actors/replay_tape.h"

namespace carapace {
namespace {

bool point_starts_with(const FaultInjected& f, std::string_view prefix) {
  return f.point.compare(0, prefix.size(), prefix) == 0;
}

FaultNote note_of(const FaultInjected& f) { return FaultNote{.point = f.point, .action = f.action, .detail = f.detail}; }

ProviderReply not_recorded(const ProviderRequest& request) {
  ProviderReply reply;
  reply.answered = true;
  reply.failure = ProviderFailure{.error = std::string(kReplayNoRecord) + "turn " + std::to_string(request.turn) +
                                           " attempt " + std::to_string(request.attempt) + " of the provider"};
  return reply;
}

}  // namespace

ReplayTape::ReplayTape(std::vector<Event> recorded, std::function<uint64_t()> written)
    : recorded_(std::move(recorded)), written_(std::move(written)), boundary_(recorded_.size() + 1) {
  boundary_[recorded_.size()] = recorded_.size();
  for (size_t i = recorded_.size(); i-- > 0;) {
    boundary_[i] = is_resume_boundary(recorded_[i]) ? i : boundary_[i + 1];
  }
}

bool ReplayTape::is_resume_boundary(const Event& e) {
  if (const auto* stopped = get_if<SessionStopped>(e)) {
    // The loop's own stop at its turn budget is replayed like any event it writes.
    return !(stopped->reason == "max_turns" && stopped->pid == 0);
  }
  return std::holds_alternative<SessionResumed>(e.body) || std::holds_alternative<TurnRolledBack>(e.body);
}

std::span<const Event> ReplayTape::ahead() const {
  size_t from = std::min<uint64_t>(written_(), recorded_.size());
  return std::span<const Event>(recorded_).subspan(from, boundary_[from] - from);
}

ProviderReply ReplayTape::provider_reply(const ProviderRequest& request) const {
  std::vector<FaultNote> faults;
  for (const Event& e : ahead()) {
    if (const auto* f = get_if<FaultInjected>(e)) {
      if (point_starts_with(*f, "provider.")) faults.push_back(note_of(*f));
      continue;
    }
    if (const auto* r = get_if<LlmResponded>(e); r && r->turn == request.turn && r->attempt == request.attempt) {
      return ProviderReply{.ok = true,
                           .response = ProviderResponse{.text = r->text,
                                                        .tool_calls = r->tool_calls,
                                                        .finish_reason = r->finish_reason,
                                                        .usage = r->usage},
                           .latency_ms = r->latency_ms,
                           .faults = std::move(faults),
                           .answered = true};
    }
    if (const auto* f = get_if<LlmFailed>(e); f && f->turn == request.turn && f->attempt == request.attempt) {
      // What the retry policy decided is not replayed: it decides again from
      // the failure as the provider reported it.
      return ProviderReply{
          .ok = false,
          .failure = ProviderFailure{.http_status = f->http_status,
                                     .error = f->error,
                                     .transport = f->http_status == 0 && f->category == ErrorCategory::kTransient,
                                     .has_retry_after = f->retry_after_ms > 0,
                                     .retry_after_ms = f->retry_after_ms},
          .latency_ms = f->latency_ms,
          .faults = std::move(faults),
          .answered = f->provider_answered};
    }
  }
  return not_recorded(request);
}

ToolOutcome ReplayTape::tool_outcome(const ToolCall& call, uint32_t attempt) const {
  std::vector<FaultNote> faults;
  for (const Event& e : ahead()) {
    if (const auto* f = get_if<FaultInjected>(e)) {
      if (point_starts_with(*f, "tool.")) faults.push_back(note_of(*f));
      continue;
    }
    if (const auto* r = get_if<ToolRequested>(e); r && r->call_id == call.id && r->attempt > attempt) {
      return ToolOutcome{.call_id = call.id, .output = r->retry_reason, .is_error = true, .node_lost = true};
    }
    if (const auto* t = get_if<ToolCompleted>(e); t && t->call_id == call.id) {
      return ToolOutcome{.call_id = call.id,
                         .output = t->output,
                         .is_error = t->is_error,
                         .timed_out = t->timed_out,
                         .truncated = t->truncated,
                         .original_bytes = t->original_bytes,
                         .duration_ms = t->duration_ms,
                         .faults = std::move(faults),
                         .interrupted = t->interrupted,
                         .node = t->node};
    }
  }
  return ToolOutcome{.call_id = call.id,
                     .output = std::string(kReplayNoRecord) + "tool call " + call.id + " (" + call.name + ")",
                     .is_error = true};
}

Status ReplayTape::tool_node(const std::string& call_id, std::string* node) const {
  node->clear();
  for (const Event& e : ahead()) {
    if (const auto* r = get_if<ToolRequested>(e); r && r->call_id == call_id) {
      *node = r->node;
      return Status();
    }
    if (const auto* t = get_if<ToolCompleted>(e); t && t->call_id == call_id) {
      // No further attempt was recorded: the session refused one then. Its
      // words, as the session composed them (tool_step.cc).
      for (std::string_view mark : {"; it was not run again: ", "The call was not run: ",
                                    "The call was interrupted and could not run again: "}) {
        if (size_t at = t->output.find(mark); at != std::string::npos) {
          return Status::unsupported(t->output.substr(at + mark.size()));
        }
      }
      *node = t->node;  // run again on a resume without a new intent: where it ran
      return Status();
    }
  }
  return Status();
}

std::optional<ReplayTape::HookRecord> ReplayTape::hook_record(HookEvent event, const std::string& hook_name,
                                                              const std::string& tool_call_id) const {
  const std::string event_name(hook_event_name(event));
  HookRecord record;
  // The decisions of one firing are written together, after any faults
  // injected into them; the tool call a PreToolUse gates may follow them.
  for (const Event& e : ahead()) {
    if (const auto* f = get_if<FaultInjected>(e)) {
      if (const std::string about = "hook " + hook_name + ": ";
          f->point == "hook" && f->detail.compare(0, about.size(), about) == 0) {
        record.faults.push_back(note_of(*f));
      }
      continue;
    }
    const auto* d = get_if<HookDecided>(e);
    if (d == nullptr) break;
    if (d->hook_event != event_name || d->hook_name != hook_name || d->tool_call_id != tool_call_id) continue;
    if (d->decision == "failed") {
      record.failure = HookFailure{.hook_name = hook_name, .error = d->reason};
      return record;
    }
    auto decision = decision_from_name(d->decision);
    if (!decision) return std::nullopt;
    record.decision = HookDecision{.hook_name = hook_name,
                                   .decision = *decision,
                                   .reason = d->reason,
                                   .modified_args = d->modified_args,
                                   .message = d->message};
    return record;
  }
  return std::nullopt;
}

}  // namespace carapace
