#include "events/event_summary.h"

#include <cstdio>

namespace carapace {
namespace {

std::string num(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

std::string ms(uint64_t millis) {
  char buf[32];
  if (millis < 1000) {
    std::snprintf(buf, sizeof buf, "%llu ms", static_cast<unsigned long long>(millis));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(millis) / 1000.0);
  }
  return buf;
}

std::string short_hash(const Digest128& d) { return d.hex().substr(0, 12); }

struct Summarizer {
  std::string operator()(const SessionStarted& x) const {
    std::string s = "agent=" + x.agent_id + " provider=" + x.provider + " model=" + x.model +
                    " seed=" + std::to_string(x.rng_seed);
    if (!x.parent_session.empty()) {
      s += " forked from " + x.parent_session + " at turn " + std::to_string(x.parent_turn);
    }
    return s;
  }
  std::string operator()(const UserMessage& x) const {
    std::string text = quote_preview(x.text, 80);
    if (x.follow_up) return text + " (follow-up: sent when the session has nothing left to do)";
    if (x.from_follow_ups) return text + " (from the follow-ups)";
    if (x.queued) return text + " (queued: joins at the next turn)";
    return text;
  }
  std::string operator()(const TurnStarted& x) const { return "turn " + std::to_string(x.turn); }
  std::string operator()(const PromptAssembled& x) const {
    return "turn " + std::to_string(x.turn) + ": " + std::to_string(x.segments.size()) + " segments, " +
           num(x.total_chars) + " chars, digest " + short_hash(x.digest);
  }
  std::string operator()(const LlmRequested& x) const {
    return "turn " + std::to_string(x.turn) + " attempt " + std::to_string(x.attempt) + " " + x.model + ", " +
           std::to_string(x.message_count) + " messages";
  }
  std::string operator()(const LlmFailed& x) const {
    std::string what = x.http_status ? "HTTP " + std::to_string(x.http_status) : x.error;
    std::string s = "turn " + std::to_string(x.turn) + " attempt " + std::to_string(x.attempt) + ": " + what;
    s += x.category == ErrorCategory::kPermanent ? " (permanent)" : " (transient)";
    if (x.will_retry) {
      s += ", retry in " + ms(x.retry_delay_ms);
      if (x.retry_after_ms) s += " (Retry-After " + ms(x.retry_after_ms) + ")";
    } else {
      s += ", giving up";
    }
    return s;
  }
  std::string operator()(const LlmResponded& x) const {
    std::string s = "turn " + std::to_string(x.turn) + ": ";
    if (!x.tool_calls.empty()) {
      s += std::to_string(x.tool_calls.size()) + " tool call" + (x.tool_calls.size() > 1 ? "s (" : " (");
      for (size_t i = 0; i < x.tool_calls.size(); ++i) {
        if (i) s += ", ";
        s += x.tool_calls[i].name;
      }
      s += ")";
      if (!x.text.empty()) s += " " + quote_preview(x.text, 40);
    } else {
      s += quote_preview(x.text, 60);
    }
    s += ", " + num(x.usage.input) + " in / " + num(x.usage.output) + " out tokens";
    if (x.cost_usd > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, ", $%.4f", x.cost_usd);
      s += buf;
    }
    s += ", " + ms(x.latency_ms);
    return s;
  }
  std::string operator()(const HookDecided& x) const {
    std::string s = x.hook_event + " " + x.hook_name + " -> " + x.decision;
    if (!x.tool_call_id.empty()) s += " (" + x.tool_call_id + ")";
    if (!x.reason.empty()) s += ": " + quote_preview(x.reason, 60);
    return s;
  }
  std::string operator()(const ToolRequested& x) const {
    std::string s = x.tool + " " + x.call_id + " " + quote_preview(x.args.text, 60);
    if (!x.node.empty()) s += " on node " + x.node;
    if (x.attempt > 1) s += " (attempt " + std::to_string(x.attempt) + ")";
    return s;
  }
  std::string operator()(const ToolCompleted& x) const {
    std::string s = x.tool + " " + x.call_id + " ";
    if (x.interrupted && !x.stop_reason.empty())
      s += "interrupted by a stop (" + x.stop_reason + "), outcome unknown";
    else if (x.interrupted && !x.node.empty())
      s += "interrupted (node " + x.node + "), outcome unknown";
    else if (x.interrupted)
      s += "interrupted by a crash, outcome unknown";
    else if (x.timed_out)
      s += "timed out";
    else
      s += x.is_error ? "error" : "ok";
    s += ", " + ms(x.duration_ms) + ", " + num(x.kept_bytes ? x.kept_bytes : x.output.size()) + " B";
    if (x.truncated) s += " (truncated from " + num(x.original_bytes) + " B)";
    if (!x.node.empty() && !x.interrupted) s += ", on node " + x.node;
    return s;
  }
  std::string operator()(const ContextTrimmed& x) const {
    return "removed " + std::to_string(x.messages_removed) + " messages from index " +
           std::to_string(x.first_index) + ", " + num(x.chars_before) + " -> " + num(x.chars_after) +
           " chars";
  }
  std::string operator()(const TurnCommitted& x) const {
    return "turn " + std::to_string(x.turn) + " checkpoint, state " + short_hash(x.state_hash);
  }
  std::string operator()(const TurnRolledBack& x) const {
    return "discarded seq " + std::to_string(x.from_seq) + "-" + std::to_string(x.to_seq) + " of turn " +
           std::to_string(x.turn) + (x.reason.empty() ? "" : ": " + x.reason);
  }
  std::string operator()(const SessionResumed& x) const {
    return "from turn " + std::to_string(x.checkpoint_turn) + " (seq " + std::to_string(x.checkpoint_seq) +
           "), mode " + x.mode + ", pid " + std::to_string(x.pid);
  }
  std::string operator()(const SessionCompleted& x) const {
    return x.stop_reason + ": " + quote_preview(x.final_answer, 70);
  }
  std::string operator()(const SessionFailed& x) const {
    return x.stop_reason.empty() ? quote_preview(x.error, 80)
                                 : x.stop_reason + ": " + quote_preview(x.error, 70);
  }
  std::string operator()(const FaultInjected& x) const {
    return x.point + " " + x.action + (x.detail.empty() ? "" : ": " + x.detail);
  }
  std::string operator()(const SessionConfigured& x) const {
    std::string what = x.origin + ": config " + std::to_string(x.config.text.size()) + " bytes";
    if (!x.scenario.empty()) what += ", scenario " + std::to_string(x.scenario.size()) + " bytes";
    return what;
  }
  std::string operator()(const SessionStopped& x) const {
    return "stopped (" + x.reason + "), pid " + std::to_string(x.pid) + "; resumable";
  }
  std::string operator()(const ApprovalRequested& x) const {
    std::string what = x.kind == "question" ? "asks the user " + quote_preview(x.question, 80)
                                             : "asks approval of " + x.tool + " " + x.call_id;
    what += " (" + x.asked_by + ")";
    if (x.expires_after_ms) what += ", expires in " + std::to_string(x.expires_after_ms / 1000) + " s (" + x.on_expiry + ")";
    return what;
  }
  std::string operator()(const ApprovalDecided& x) const {
    std::string what = x.call_id + " " + x.decision + " by " + x.by;
    if (!x.who.empty()) what += " (" + x.who + ")";
    if (x.expired) what += ", expired";
    if (!x.reason.empty()) what += ": " + quote_preview(x.reason, 60);
    return what;
  }
  std::string operator()(const ScheduleDefined& x) const {
    std::string what = "\"" + x.cron + "\"";
    if (!x.tz.empty()) what += " in " + x.tz;
    what += ", overlap " + x.overlap + ", task " + quote_preview(x.task, 60) + " (" + x.source + ")";
    if (x.paused) what += ", paused";
    return what;
  }
  std::string operator()(const ScheduleRemoved& x) const { return "removed (" + x.source + ")"; }
  std::string operator()(const SchedulePaused& x) const {
    return "paused (" + x.source + ")" + (x.reason.empty() ? "" : ": " + quote_preview(x.reason, 60));
  }
  std::string operator()(const ScheduleResumed& x) const { return "resumed (" + x.source + ")"; }
  std::string operator()(const ScheduleFired& x) const {
    return x.trigger + " run " + x.session + ", " + std::to_string((x.actual_us - x.nominal_us) / 1000) +
           " ms after its time";
  }
  std::string operator()(const ScheduleSkipped& x) const {
    std::string what = std::to_string(x.count) + (x.count == 1 ? " due time" : " due times") + " skipped: " + x.reason;
    if (!x.detail.empty()) what += " (" + x.detail + ")";
    return what;
  }
  std::string operator()(const ScheduleRunEnded& x) const {
    std::string what = x.session + " " + x.outcome + " after " + std::to_string(x.duration_ms) + " ms";
    if (!x.error.empty()) what += ": " + quote_preview(x.error, 80);
    return what;
  }
  std::string operator()(const UnknownEvent& x) const {
    return "type " + std::to_string(x.type) + " from a newer writer, " + std::to_string(x.payload.size()) +
           " bytes, skipped";
  }
};

}  // namespace

std::string quote_preview(std::string_view text, size_t max_chars) {
  std::string out = "\"";
  size_t shown = 0;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if ((byte & 0xc0) == 0x80) {  // continuation of a UTF-8 sequence already counted
      if (shown <= max_chars) out += c;
      continue;
    }
    if (shown++ == max_chars) {
      out += "\u2026";
      break;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (byte < 0x20)
      out += ' ';
    else
      out += c;
  }
  out += "\"";
  return out;
}

std::string event_summary(const Event& event) { return std::visit(Summarizer{}, event.body); }

}  // namespace carapace
