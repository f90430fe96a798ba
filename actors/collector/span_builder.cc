#include "actors/collector/span_builder.h"

#include <algorithm>
#include <iterator>

#include "base/bounded_json.h"
#include "base/digest.h"
#include "events/event_summary.h"

namespace carapace {
namespace {

std::string preview(std::string_view text, size_t max_chars) {
  std::string q = quote_preview(text, max_chars);
  return q.size() >= 2 ? q.substr(1, q.size() - 2) : q;  // without the quotes
}

std::string short_digest(std::string_view text) { return short_hex(digest128(text)); }

void add_to(SpanAttrs& attrs, const char* key, const nlohmann::json& value) {
  nlohmann::json* it = attrs.get(key);
  if (it == nullptr) {
    attrs[key] = value;
  } else if (value.is_number_float() || it->is_number_float()) {
    *it = it->get<double>() + value.get<double>();
  } else {
    *it = it->get<uint64_t>() + value.get<uint64_t>();
  }
}

// Room for the attributes a span of `kind` gets, a few more than most have:
// its attributes then never move as they are set.
size_t attr_room(std::string_view kind) {
  if (kind == kSpanSession) return 24;
  if (kind == kSpanLlm) return 20;
  if (kind == kSpanTurn || kind == kSpanTool || kind == kSpanApproval) return 14;
  return 8;
}

std::string hook_status(const std::string& decision) {
  if (decision == "allow" || decision == "continue" || decision == "append_context" ||
      decision == "system_message" || decision == "modify_args")
    return "ok";
  if (decision == "deny") return "denied";
  if (decision == "failed") return "error";
  if (decision == "stop") return "stopped";
  return decision;
}

}  // namespace

SpanBuilder::SpanBuilder(std::string session, Changes changes)
    : session_(std::move(session)), trace_id_(trace_id_of(session_)), track_changes_(changes == Changes::kTracked) {}

size_t SpanBuilder::open_span(std::string_view kind, std::string name, const Event& e, size_t parent) {
  Span& s = spans_.emplace_back();
  s.trace_id = trace_id_;
  s.span_id = span_id_of(session_, e.seq, kind);
  if (parent != kNone) s.parent_id = spans_[parent].span_id;
  s.session = session_;
  s.kind = std::string(kind);
  s.name = std::move(name);
  s.open_seq = e.seq;
  s.start_us = e.ts_us;
  s.attrs.reserve(attr_room(kind));
  if (!parent_.empty() && e.seq <= parent_seq_) s.attrs["copied_from_parent"] = true;
  touch(spans_.size() - 1);
  return spans_.size() - 1;
}

void SpanBuilder::close_span(size_t index, const Event& e, std::string status) {
  Span& s = spans_[index];
  s.close_seq = e.seq;
  s.end_us = e.ts_us;
  s.status = std::move(status);
  touch(index);
}

size_t SpanBuilder::current_parent() const { return turn_ != kNone ? turn_ : root_; }

size_t SpanBuilder::innermost_open() const {
  size_t parent = current_parent();
  if (parent == kNone) return kNone;
  for (size_t i = spans_.size(); i-- > parent + 1;) {
    if (spans_[i].open() && spans_[i].parent_id == spans_[parent].span_id) return i;
  }
  return parent;
}

size_t SpanBuilder::tool_span(const std::string& call_id, const Event& e) {
  auto it = tools_.find(call_id);
  if (it != tools_.end()) return it->second;
  auto name = call_names_.find(call_id);
  std::string tool = name == call_names_.end() ? "" : name->second;
  size_t i = open_span(kSpanTool, "tool " + tool, e, current_parent());
  spans_[i].attrs["call_id"] = call_id;
  if (!tool.empty()) spans_[i].attrs["tool"] = tool;
  if (turn_ != kNone) add_to(spans_[turn_].attrs, "tool_calls", 1);
  add_to_root("tool_calls", 1);
  tools_[call_id] = i;
  return i;
}

void SpanBuilder::add_to_root(const char* key, const nlohmann::json& value) {
  if (root_ == kNone) return;
  add_to(spans_[root_].attrs, key, value);
  touch(root_);
}

void SpanBuilder::span_event(size_t index, const Event& e, std::string name, SpanAttrs attrs) {
  if (index == kNone) return;
  spans_[index].events.push_back(SpanEvent{e.seq, e.ts_us, std::move(name), std::move(attrs)});
  touch(index);
}

void SpanBuilder::add(const Event& e) {
  if (e.seq <= last_seq_) return;  // already folded (a collector may see an event twice)
  const uint64_t previous_seq = last_seq_;
  const int64_t previous_us = last_ts_;
  last_seq_ = e.seq;
  last_ts_ = e.ts_us;

  if (const auto* ev_session_started = get_if<SessionStarted>(e)) {
    root_ = open_span(kSpanSession, "session " + session_, e, kNone);
    auto& a = spans_[root_].attrs;
    a["agent"] = ev_session_started->agent_id;
    a["provider"] = ev_session_started->provider;
    a["model"] = ev_session_started->model;
    if (ev_session_started->max_turns) a["max_turns"] = ev_session_started->max_turns;
    if (!ev_session_started->parent_session.empty()) {
      parent_ = ev_session_started->parent_session;
      parent_seq_ = ev_session_started->parent_seq;
      a["parent_session"] = ev_session_started->parent_session;
      a["parent_turn"] = ev_session_started->parent_turn;
      a["parent_seq"] = ev_session_started->parent_seq;
      if (ev_session_started->parent_turn == 0 || ev_session_started->parent_seq == 0) {
        spans_[root_].links.push_back(SpanLink{trace_id_of(parent_), span_id_of(parent_, 1, kSpanSession), parent_,
                                               1, "fork"});
      }
    }
  } else if (root_ == kNone) {
    // A log that does not open with session.started (damaged, or a partial
    // read): the spans hang off a synthetic root opened by this event.
    root_ = open_span(kSpanSession, "session " + session_, e, kNone);
    spans_[root_].attrs["incomplete_log"] = true;
  }

  if (const auto* ev_session_configured = get_if<SessionConfigured>(e)) {
    auto tools = parse_stored_json(ev_session_configured->tools.text);
    std::string names;
    if (tools.is_array()) {
      for (const auto& t : tools) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
        if (!names.empty()) names += ",";
        names += t["name"].get<std::string>();
      }
    }
    spans_[root_].attrs["tools_offered"] = names;
    spans_[root_].attrs["tools_offered_seq"] = e.seq;
    touch(root_);
  } else if (const auto* ev_user_message = get_if<UserMessage>(e)) {
    span_event(root_, e, "user_message",
               {{"chars", ev_user_message->text.size()}, {"queued", ev_user_message->queued}, {"text", preview(ev_user_message->text, 60)}});
  } else if (const auto* ev_turn_started = get_if<TurnStarted>(e)) {
    if (turn_ != kNone) close_span(turn_, e, "incomplete");
    turn_ = open_span(kSpanTurn, "turn " + std::to_string(ev_turn_started->turn), e, root_);
    spans_[turn_].attrs["turn"] = ev_turn_started->turn;
    turn_by_number_[ev_turn_started->turn] = turn_;
    llm_.clear();
  } else if (const auto* ev_prompt_assembled = get_if<PromptAssembled>(e)) {
    if (turn_ != kNone) {
      auto& a = spans_[turn_].attrs;
      a["prompt_chars"] = ev_prompt_assembled->total_chars;
      a["prompt_segments"] = ev_prompt_assembled->segments.size();
      a["prompt_digest"] = short_hex(ev_prompt_assembled->digest);
      touch(turn_);
    }
  } else if (const auto* ev_llm_requested = get_if<LlmRequested>(e)) {
    size_t i = open_span(kSpanLlm, "llm attempt " + std::to_string(ev_llm_requested->attempt), e, current_parent());
    auto& a = spans_[i].attrs;
    a["turn"] = ev_llm_requested->turn;
    a["attempt"] = ev_llm_requested->attempt;
    a["model"] = ev_llm_requested->model;
    a["messages"] = ev_llm_requested->message_count;
    a["request_digest"] = short_hex(ev_llm_requested->request_digest);
    if (!ev_llm_requested->body_ref.empty()) a["request_body"] = ev_llm_requested->body_ref;
    llm_[{ev_llm_requested->turn, ev_llm_requested->attempt}] = i;
    if (turn_ != kNone) add_to(spans_[turn_].attrs, "llm_attempts", 1);
    add_to_root("llm_attempts", 1);
  } else if (const auto* ev_llm_failed = get_if<LlmFailed>(e)) {
    auto it = llm_.find({ev_llm_failed->turn, ev_llm_failed->attempt});
    size_t i = it != llm_.end() ? it->second
                                : open_span(kSpanLlm, "llm attempt " + std::to_string(ev_llm_failed->attempt), e, current_parent());
    if (it == llm_.end()) {
      spans_[i].attrs["turn"] = ev_llm_failed->turn;
      spans_[i].attrs["attempt"] = ev_llm_failed->attempt;
    } else {
      llm_.erase(it);
    }
    auto& a = spans_[i].attrs;
    if (ev_llm_failed->http_status) a["http_status"] = ev_llm_failed->http_status;
    a["error"] = preview(ev_llm_failed->error, 200);
    a["category"] = ev_llm_failed->category == ErrorCategory::kPermanent ? "permanent" : "transient";
    a["will_retry"] = ev_llm_failed->will_retry;
    if (ev_llm_failed->will_retry) a["retry_delay_ms"] = ev_llm_failed->retry_delay_ms;
    if (ev_llm_failed->retry_after_ms) a["retry_after_ms"] = ev_llm_failed->retry_after_ms;
    a["latency_ms"] = ev_llm_failed->latency_ms;
    a["provider_answered"] = ev_llm_failed->provider_answered;
    if (!ev_llm_failed->body_ref.empty()) a["response_body"] = ev_llm_failed->body_ref;
    close_span(i, e, "error");
    if (ev_llm_failed->will_retry) {
      if (turn_ != kNone) add_to(spans_[turn_].attrs, "retries", 1);
      add_to_root("retries", 1);
    }
  } else if (const auto* ev_llm_responded = get_if<LlmResponded>(e)) {
    auto it = llm_.find({ev_llm_responded->turn, ev_llm_responded->attempt});
    size_t i = it != llm_.end() ? it->second
                                : open_span(kSpanLlm, "llm attempt " + std::to_string(ev_llm_responded->attempt), e, current_parent());
    if (it != llm_.end()) llm_.erase(it);
    auto& a = spans_[i].attrs;
    a["turn"] = ev_llm_responded->turn;
    a["attempt"] = ev_llm_responded->attempt;
    a["tokens_in"] = ev_llm_responded->usage.input;
    a["tokens_out"] = ev_llm_responded->usage.output;
    a["cache_read"] = ev_llm_responded->usage.cache_read;
    a["cache_write"] = ev_llm_responded->usage.cache_write;
    a["cost_usd"] = ev_llm_responded->cost_usd;
    a["latency_ms"] = ev_llm_responded->latency_ms;
    a["finish_reason"] = ev_llm_responded->finish_reason;
    a["text_chars"] = ev_llm_responded->text.size();
    a["tool_calls"] = ev_llm_responded->tool_calls.size();
    std::string names, ids;
    for (const auto& c : ev_llm_responded->tool_calls) {
      call_names_[c.id] = c.name;
      names += (names.empty() ? "" : ",") + c.name;
      ids += (ids.empty() ? "" : ",") + c.id;
    }
    if (!names.empty()) {
      a["tool_names"] = names;
      a["call_ids"] = ids;
    }
    if (!ev_llm_responded->body_ref.empty()) a["response_body"] = ev_llm_responded->body_ref;
    close_span(i, e, "ok");
    for (size_t target : {turn_, root_}) {
      if (target == kNone) continue;
      auto& t = spans_[target].attrs;
      add_to(t, "tokens_in", ev_llm_responded->usage.input);
      add_to(t, "tokens_out", ev_llm_responded->usage.output);
      add_to(t, "cache_read", ev_llm_responded->usage.cache_read);
      add_to(t, "cache_write", ev_llm_responded->usage.cache_write);
      add_to(t, "cost_usd", ev_llm_responded->cost_usd);
      touch(target);
    }
  } else if (const auto* ev_hook_decided = get_if<HookDecided>(e)) {
    size_t parent = ev_hook_decided->tool_call_id.empty() ? current_parent() : tool_span(ev_hook_decided->tool_call_id, e);
    size_t i = open_span(kSpanHook, "hook " + ev_hook_decided->hook_event + " " + ev_hook_decided->hook_name, e, parent);
    auto& a = spans_[i].attrs;
    a["hook_event"] = ev_hook_decided->hook_event;
    a["hook_name"] = ev_hook_decided->hook_name;
    a["decision"] = ev_hook_decided->decision;
    if (!ev_hook_decided->reason.empty()) a["reason"] = preview(ev_hook_decided->reason, 200);
    if (!ev_hook_decided->tool_call_id.empty()) a["call_id"] = ev_hook_decided->tool_call_id;
    close_span(i, e, hook_status(ev_hook_decided->decision));
    if (ev_hook_decided->decision == "deny" && !ev_hook_decided->tool_call_id.empty()) {
      spans_[parent].attrs["denied_by"] = ev_hook_decided->hook_name;
      touch(parent);
    }
  } else if (const auto* ev_approval_requested = get_if<ApprovalRequested>(e)) {
    const auto& r = *ev_approval_requested;
    call_names_[r.call_id] = r.tool;
    size_t parent = tool_span(r.call_id, e);
    size_t i = open_span(kSpanApproval, r.kind == "question" ? "question" : "approval " + r.tool, e, parent);
    auto& a = spans_[i].attrs;
    a["call_id"] = r.call_id;
    a["tool"] = r.tool;
    a["kind"] = r.kind;
    a["asked_by"] = r.asked_by;
    a["reason"] = preview(r.reason, 200);
    a["args_digest"] = r.args_digest.hex();
    if (!r.question.empty()) a["question"] = preview(r.question, 200);
    if (r.expires_after_ms != 0) {
      a["expires_after_ms"] = r.expires_after_ms;
      a["on_expiry"] = r.on_expiry;
    }
    approvals_[r.call_id] = i;
    add_to_root("approvals", 1);
    spans_[parent].attrs["awaiting_decision"] = true;
    touch(parent);
    if (root_ != kNone) {
      spans_[root_].attrs["waiting_call"] = r.call_id;
      touch(root_);
    }
  } else if (const auto* ev_approval_decided = get_if<ApprovalDecided>(e)) {
    const auto& d = *ev_approval_decided;
    auto it = approvals_.find(d.call_id);
    if (it != approvals_.end() && spans_[it->second].open() &&
        spans_[it->second].attrs.value("args_digest", std::string()) == d.args_digest.hex()) {
      Span& sp = spans_[it->second];
      const uint64_t waited_ms = e.ts_us > sp.start_us ? static_cast<uint64_t>(e.ts_us - sp.start_us) / 1000 : 0;
      sp.attrs["decision"] = d.decision;
      sp.attrs["by"] = d.by;
      if (!d.who.empty()) sp.attrs["who"] = preview(d.who, 120);
      if (!d.reason.empty()) sp.attrs["decision_reason"] = preview(d.reason, 200);
      sp.attrs["wait_ms"] = waited_ms;
      if (d.expired) sp.attrs["expired"] = true;
      close_span(it->second, e, d.expired ? "expired" : d.decision);
      add_to_root("waiting_ms", waited_ms);
      if (auto t = tools_.find(d.call_id); t != tools_.end()) {
        spans_[t->second].attrs.erase("awaiting_decision");
        touch(t->second);
      }
      if (root_ != kNone && spans_[root_].attrs.value("waiting_call", std::string()) == d.call_id) {
        spans_[root_].attrs.erase("waiting_call");
        touch(root_);
      }
      if (auto t = tools_.find(d.call_id); d.decision == "denied" && t != tools_.end()) {
        spans_[t->second].attrs["denied_by"] = d.expired ? "expiry" : d.by;
        touch(t->second);
      }
    } else if (it != approvals_.end()) {
      // A second answer, or one for other arguments: recorded, ignored.
      span_event(it->second, e, "decision ignored", {{"decision", d.decision}, {"by", d.by}});
    }
  } else if (const auto* ev_tool_requested = get_if<ToolRequested>(e)) {
    call_names_[ev_tool_requested->call_id] = ev_tool_requested->tool;
    size_t i = tool_span(ev_tool_requested->call_id, e);
    auto& s = spans_[i];
    s.name = "tool " + ev_tool_requested->tool;
    s.attrs["tool"] = ev_tool_requested->tool;
    if (!ev_tool_requested->node.empty()) s.attrs["node"] = ev_tool_requested->node;
    if (ev_tool_requested->attempt > 1) {
      // Its node was lost; the call runs again elsewhere (docs/scale-out.md).
      s.attrs["attempts"] = ev_tool_requested->attempt;
      span_event(i, e, "run again on another node",
                 {{"node", ev_tool_requested->node}, {"attempt", ev_tool_requested->attempt},
                  {"why", preview(ev_tool_requested->retry_reason, 200)}});
    } else {
      s.attrs["requested_seq"] = e.seq;
      s.attrs["args_bytes"] = ev_tool_requested->args.text.size();
      s.attrs["args_digest"] = short_digest(ev_tool_requested->args.text);
      s.attrs["args"] = preview(ev_tool_requested->args.text, 120);
    }
    touch(i);
  } else if (const auto* ev_tool_completed = get_if<ToolCompleted>(e)) {
    call_names_[ev_tool_completed->call_id] = ev_tool_completed->tool;
    size_t i = tool_span(ev_tool_completed->call_id, e);
    auto& s = spans_[i];
    s.name = "tool " + ev_tool_completed->tool;
    auto& a = s.attrs;
    a["tool"] = ev_tool_completed->tool;
    a["duration_ms"] = ev_tool_completed->duration_ms;
    a["output_bytes"] = ev_tool_completed->output.size();
    a["output_digest"] = short_digest(ev_tool_completed->output);
    a["is_error"] = ev_tool_completed->is_error;
    if (ev_tool_completed->timed_out) a["timed_out"] = true;
    if (ev_tool_completed->interrupted) a["interrupted"] = true;
    if (ev_tool_completed->truncated) {
      a["truncated"] = true;
      a["original_bytes"] = ev_tool_completed->original_bytes;
      a["kept_bytes"] = ev_tool_completed->kept_bytes;
    }
    if (ev_tool_completed->is_error) a["error"] = preview(ev_tool_completed->output, 120);
    // An interrupted call was cut short by a stop or a crash: it says which,
    // and ends there (the time the session was down is not the call's).
    auto cut = cut_.find(i);
    std::string stop_reason = ev_tool_completed->stop_reason;
    if (stop_reason.empty() && cut != cut_.end())
      stop_reason = cut->second.stop_reason;  // a log before the field
    const bool stopped = ev_tool_completed->interrupted && !stop_reason.empty();
    if (!ev_tool_completed->node.empty()) a["node"] = ev_tool_completed->node;
    if (ev_tool_completed->interrupted) {
      a["interrupted_by"] = stopped ? "stop" : !ev_tool_completed->node.empty() ? "node lost" : "crash";
      if (stopped) a["stop_reason"] = stop_reason;
    }
    const std::string status = stopped                          ? "stopped"
                               : ev_tool_completed->interrupted ? "interrupted"
                               : ev_tool_completed->timed_out   ? "timed_out"
                               : a.contains("denied_by")        ? "denied"
                               : ev_tool_completed->is_error    ? "error"
                                                                : "ok";
    close_span(i, e, status);
    if (ev_tool_completed->interrupted && cut != cut_.end() && cut->second.at_us >= s.start_us) {
      s.end_us = cut->second.at_us;
    }
    if (cut != cut_.end()) cut_.erase(cut);
    if (ev_tool_completed->is_error || ev_tool_completed->interrupted) {
      if (turn_ != kNone) add_to(spans_[turn_].attrs, "tool_errors", 1);
      add_to_root("tool_errors", 1);
    }
  } else if (const auto* ev_context_trimmed = get_if<ContextTrimmed>(e)) {
    span_event(current_parent(), e, "context_trimmed",
               {{"first_index", ev_context_trimmed->first_index},
                {"messages_removed", ev_context_trimmed->messages_removed},
                {"chars_before", ev_context_trimmed->chars_before},
                {"chars_after", ev_context_trimmed->chars_after}});
    add_to_root("context_trims", 1);
  } else if (const auto* ev_turn_committed = get_if<TurnCommitted>(e)) {
    if (turn_ != kNone && spans_[turn_].attrs.value("turn", uint64_t{0}) == ev_turn_committed->turn) {
      close_span(turn_, e, "ok");
      turn_ = kNone;
    }
    spans_[root_].attrs["turns"] = ev_turn_committed->turn;
    touch(root_);
    if (!parent_.empty() && e.seq == parent_seq_ && spans_[root_].links.empty()) {
      auto t = turn_by_number_.find(ev_turn_committed->turn);
      if (t != turn_by_number_.end()) {
        uint64_t seq = spans_[t->second].open_seq;
        spans_[root_].links.push_back(
            SpanLink{trace_id_of(parent_), span_id_of(parent_, seq, kSpanTurn), parent_, seq, "fork"});
      }
    }
  } else if (const auto* ev_turn_rolled_back = get_if<TurnRolledBack>(e)) {
    // A resume in turn mode writes the rollback first: the crash it reports
    // is before this event, in the span the rollback is about to close.
    rollback_seq_ = e.seq;
    before_rollback_seq_ = previous_seq;
    before_rollback_us_ = previous_us;
    rollback_cut_ = innermost_open();
    for (size_t i = 0; i < spans_.size(); ++i) {
      Span& s = spans_[i];
      if (s.kind == kSpanSession || s.open_seq < ev_turn_rolled_back->from_seq || s.open_seq > ev_turn_rolled_back->to_seq) continue;
      if (s.open()) close_span(i, e, "rolled_back");
      if (s.kind == kSpanTurn) {
        s.status = "rolled_back";
        span_event(i, e, "rolled_back", {{"from_seq", ev_turn_rolled_back->from_seq}, {"to_seq", ev_turn_rolled_back->to_seq}, {"reason", ev_turn_rolled_back->reason}});
        if (turn_ == i) turn_ = kNone;
      }
    }
    for (auto it = tools_.begin(); it != tools_.end();) {
      it = spans_[it->second].open_seq >= ev_turn_rolled_back->from_seq && spans_[it->second].open_seq <= ev_turn_rolled_back->to_seq ? tools_.erase(it)
                                                                                                 : std::next(it);
    }
    llm_.clear();
    add_to_root("rollbacks", 1);
  } else if (const auto* ev_session_stopped = get_if<SessionStopped>(e)) {
    // Model calls the stop cut short never answer; the turn and a tool call
    // in flight stay open, for the resume that settles them.
    span_event(innermost_open(), e, "stopped", {{"reason", ev_session_stopped->reason}, {"pid", ev_session_stopped->pid}});
    for (auto& [key, i] : llm_) close_span(i, e, "stopped");
    llm_.clear();
    for (const auto& [call, i] : tools_) {
      if (spans_[i].open()) cut_[i] = Cut{.at_us = e.ts_us, .stop_reason = ev_session_stopped->reason};
    }
    spans_[root_].attrs["stop_reason"] = ev_session_stopped->reason;
    close_span(root_, e, "stopped");
    add_to_root("stops", 1);
  } else if (const auto* ev_session_resumed = get_if<SessionResumed>(e)) {
    // Parked on a person: the process that parked it left on purpose (a
    // resume, or an answer, goes on from the wait), not a crash.
    const bool parked = !spans_[root_].attrs.value("waiting_call", std::string()).empty();
    const bool crashed = spans_[root_].open() && !parked;
    const bool stopped = spans_[root_].status == "stopped";
    size_t cut = innermost_open();
    uint64_t crashed_after = previous_seq;
    int64_t crashed_after_us = previous_us;
    if (rollback_seq_ != 0 && rollback_seq_ == previous_seq) {
      cut = rollback_cut_;
      crashed_after = before_rollback_seq_;
      crashed_after_us = before_rollback_us_;
    }
    if (crashed) {
      for (const auto& [call, i] : tools_) {
        if (spans_[i].open() && !cut_.count(i)) cut_[i] = Cut{.at_us = crashed_after_us};
      }
    }
    if (!crashed && !parked) {  // a stopped session resumed, or a finished one opened again for another message
      if (stopped) spans_[root_].attrs.erase("stop_reason");
      spans_[root_].close_seq = 0;
      spans_[root_].end_us = 0;
      spans_[root_].status = "open";
    }
    // Model calls the crash cut short never answer: they end where the log stopped.
    for (auto& [key, i] : llm_) {
      spans_[i].close_seq = crashed_after;
      spans_[i].end_us = spans_[i].start_us;
      spans_[i].status = "crashed";
      touch(i);
    }
    llm_.clear();
    size_t r = open_span(kSpanResume, "resume (" + ev_session_resumed->mode + ")", e, root_);
    auto& a = spans_[r].attrs;
    a["mode"] = ev_session_resumed->mode;
    a["checkpoint_turn"] = ev_session_resumed->checkpoint_turn;
    a["checkpoint_seq"] = ev_session_resumed->checkpoint_seq;
    a["pid"] = ev_session_resumed->pid;
    a["after_crash"] = crashed;
    if (stopped) a["after_stop"] = true;
    if (parked) a["after_wait"] = true;
    if (crashed) {
      a["crashed_after_seq"] = crashed_after;
      span_event(cut, e, "crash", {{"after_seq", crashed_after}});
      spans_[r].links.push_back(
          SpanLink{trace_id_, spans_[cut].span_id, session_, spans_[cut].open_seq, "resumed_after_crash"});
    }
    close_span(r, e, "ok");
    add_to_root("resumes", 1);
  } else if (const auto* ev_session_completed = get_if<SessionCompleted>(e)) {
    spans_[root_].attrs["stop_reason"] = ev_session_completed->stop_reason;
    spans_[root_].attrs["answer_chars"] = ev_session_completed->final_answer.size();
    close_span(root_, e, "completed");
  } else if (const auto* ev_session_failed = get_if<SessionFailed>(e)) {
    spans_[root_].attrs["stop_reason"] = ev_session_failed->stop_reason;
    spans_[root_].attrs["error"] = preview(ev_session_failed->error, 200);
    close_span(root_, e, "failed");
  } else if (const auto* ev_fault_injected = get_if<FaultInjected>(e)) {
    span_event(innermost_open(), e, "fault",
               {{"point", ev_fault_injected->point}, {"action", ev_fault_injected->action}, {"detail", preview(ev_fault_injected->detail, 120)}});
    add_to_root("faults", 1);
  } else if (const auto* ev_unknown_event = get_if<UnknownEvent>(e)) {
    span_event(root_, e, "unknown_event", {{"type", ev_unknown_event->type}});
  }

  auto& root = spans_[root_];
  root.attrs["last_seq"] = e.seq;
  root.attrs["last_ts_us"] = e.ts_us;
  touch(root_);
}

std::vector<Span> SpanBuilder::take_changed() {
  std::vector<Span> out;
  out.reserve(changed_.size());
  for (size_t i : changed_) out.push_back(spans_[i]);
  changed_.clear();
  return out;
}

void order_as_built(std::vector<Span>* spans) {
  auto rank = [](std::string_view kind) {
    static constexpr std::string_view kOrder[] = {kSpanSession, kSpanTurn,     kSpanLlm,   kSpanTool,
                                                  kSpanApproval, kSpanHook, kSpanResume};
    for (size_t i = 0; i < std::size(kOrder); ++i) {
      if (kOrder[i] == kind) return i;
    }
    return std::size(kOrder);
  };
  auto by_rank = [&](const Span& a, const Span& b) { return rank(a.kind) < rank(b.kind); };
  auto by_seq = [](const Span& a, const Span& b) { return a.open_seq < b.open_seq; };
  // The trace store's spans come in seq order already: they do not move, and
  // only the few an event opens together are put in order.
  if (!std::is_sorted(spans->begin(), spans->end(), by_seq))
    std::stable_sort(spans->begin(), spans->end(), by_seq);
  for (auto run = spans->begin(); run != spans->end();) {
    auto end = std::find_if(run, spans->end(), [&](const Span& s) { return s.open_seq != run->open_seq; });
    if (end - run > 1) std::stable_sort(run, end, by_rank);
    run = end;
  }
}

std::vector<Span> build_spans(const std::string& session, const std::vector<Event>& events) {
  SpanBuilder b(session, SpanBuilder::Changes::kUntracked);
  for (const auto& e : events) b.add(e);
  return std::move(b).release();
}

}  // namespace carapace
