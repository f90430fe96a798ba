#include "actors/collector/trace_analyze.h"

#include <map>
#include <set>
#include <sstream>

namespace carapace {
namespace {

bool flag(const Span& s, const char* key) {
  const nlohmann::json* it = s.attrs.get(key);
  return it != nullptr && it->is_boolean() && it->get<bool>();
}
std::string text(const Span& s, const char* key) {
  const nlohmann::json* it = s.attrs.get(key);
  return it != nullptr && it->is_string() ? it->get<std::string>() : "";
}
uint64_t number(const Span& s, const char* key) {
  const nlohmann::json* it = s.attrs.get(key);
  return it != nullptr && it->is_number() ? it->get<uint64_t>() : 0;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

std::vector<Finding> analyze_trace(const std::vector<Span>& spans, const AnalyzeOptions& options) {
  std::vector<Finding> out;
  if (spans.empty()) return out;
  const Span& root = spans[0];
  std::map<std::string, std::vector<const Span*>> children;
  for (const auto& s : spans) children[s.parent_id].push_back(&s);

  // Retry loops: a turn whose model call failed and was retried twice or more.
  for (const auto& turn : spans) {
    if (turn.kind != kSpanTurn || flag(turn, "copied_from_parent")) continue;
    std::vector<uint64_t> seqs;
    for (const Span* c : children[turn.span_id]) {
      if (c->kind == kSpanLlm && c->status == "error" && flag(*c, "will_retry")) seqs.push_back(c->close_seq);
    }
    if (seqs.size() >= 2) {
      out.push_back({"retry_loop",
                     turn.name + ": the model call failed and was retried " + std::to_string(seqs.size()) + " times",
                     seqs});
    }
  }

  std::map<std::pair<std::string, std::string>, std::vector<uint64_t>> identical;
  std::map<std::pair<std::string, std::string>, std::string> identical_args;  // their arguments, as shown
  std::map<std::string, std::pair<int, int>> per_tool;  // calls, failures (interrupted calls not counted)
  std::map<std::string, std::vector<uint64_t>> failures;
  std::set<std::string> used, call_ids_seen;
  for (const auto& s : spans) {
    if (s.kind != kSpanTool) continue;
    const std::string tool = text(s, "tool");
    // The conversation the fork goes on from used it: offered and used.
    if (flag(s, "copied_from_parent")) {
      if (!tool.empty()) used.insert(tool);
      continue;
    }
    call_ids_seen.insert(text(s, "call_id"));
    if (!tool.empty()) used.insert(tool);
    if (s.open() && flag(s, "awaiting_decision")) {
      out.push_back({"waiting_for_decision",
                     "tool call " + text(s, "call_id") + " (" + tool + ") waits for a person's decision", {s.open_seq}});
      continue;
    }
    if (s.open()) {
      out.push_back({"tool_call_without_result",
                     "tool call " + text(s, "call_id") + " (" + tool + ") has no result", {s.open_seq}});
      continue;
    }
    if (flag(s, "truncated")) {
      out.push_back({"truncated_output",
                     "the output of " + tool + " (" + text(s, "call_id") + ") was cut from " +
                         std::to_string(number(s, "original_bytes")) + " to " + std::to_string(number(s, "kept_bytes")) +
                         " bytes",
                     {s.close_seq}});
    }
    if (flag(s, "interrupted") || s.status == "denied") continue;
    if (s.attrs.contains("args_digest")) {
      identical[{tool, text(s, "args_digest")}].push_back(number(s, "requested_seq"));
      identical_args[{tool, text(s, "args_digest")}] = text(s, "args");
    }
    auto& [calls, failed] = per_tool[tool];
    ++calls;
    if (s.status != "ok") {
      ++failed;
      failures[tool].push_back(s.close_seq);
    }
  }
  for (const auto& [key, seqs] : identical) {
    if (seqs.size() < 2) continue;
    out.push_back({"repeated_tool_call",
                   key.first + " was called " + std::to_string(seqs.size()) + " times with the same arguments: " +
                       identical_args[key],
                   seqs});
  }
  // Calls the model asked for that never got as far as a tool span.
  for (const auto& s : spans) {
    if (s.kind != kSpanLlm || flag(s, "copied_from_parent") || s.status != "ok") continue;
    for (const auto& id : split(text(s, "call_ids"))) {
      if (!call_ids_seen.count(id)) {
        out.push_back({"tool_call_without_result",
                       "the model asked for call " + id + " and it was never run or answered", {s.close_seq}});
      }
    }
  }
  for (const auto& [tool, counts] : per_tool) {
    if (counts.first >= 2 && counts.second == counts.first) {
      out.push_back({"failing_tool", tool + " failed every time it ran (" + std::to_string(counts.first) + " calls)",
                     failures[tool]});
    }
  }
  for (const auto& s : spans) {
    if (flag(s, "copied_from_parent")) continue;
    for (const auto& e : s.events) {
      if (e.name == "context_trimmed") {
        out.push_back({"context_trimmed",
                       "the context was trimmed: " + e.attrs.value("messages_removed", nlohmann::json(0)).dump() +
                           " messages removed",
                       {e.seq}});
      }
    }
    if (s.kind == kSpanResume && flag(s, "after_crash")) {
      out.push_back({"crashed", "the process died after seq " + std::to_string(number(s, "crashed_after_seq")) +
                                    "; resumed in " + text(s, "mode") + " mode",
                     {number(s, "crashed_after_seq"), s.open_seq}});
    }
  }
  std::vector<std::string> unused;
  for (const auto& t : split(text(root, "tools_offered"))) {
    if (!used.count(t)) unused.push_back(t);
  }
  if (!unused.empty()) {
    std::string names;
    for (const auto& t : unused) names += (names.empty() ? "" : ", ") + t;
    out.push_back({"unused_tools", "offered to the model and never used: " + names,
                   {number(root, "tools_offered_seq")}});
  }
  if (options.crashed_after_seq != 0 && root.open()) {
    out.push_back({"crashed", "the process died after seq " + std::to_string(options.crashed_after_seq) +
                                  " and no run has resumed the session" +
                                  (options.session.empty() ? std::string()
                                                           : ": `carapace resume " + options.session + "` goes on"),
                   {options.crashed_after_seq}});
  }
  if (text(root, "stop_reason") == "max_turns") {
    out.push_back({"max_turns", "the session ended by reaching its turn budget (" +
                                    std::to_string(number(root, "turns")) + " turns)",
                   {root.close_seq}});
  }
  return out;
}

}  // namespace carapace
