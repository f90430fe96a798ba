// Span: one timed unit of work in a session's trace, built from its events
// (actors/collector/span_builder.h), stored by the collector
// (storage/trace_store.h) and shown by `carapace trace` (docs/trace.md).
//
// A trace is one session. Its spans nest: the session (root) → turn → LLM
// call (one span per attempt) / tool call → hook decision; a resume is a span
// of its own under the session. Ids are derived from the session id and the
// seq of the event that opened the span, so the same events give the same ids
// in any process, on any replay, in any collector. Attributes are flat
// scalars (string, integer, float, bool) so that they group and index.
//
// Plain values; no thread-safety concerns beyond those of std types.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/collector/span_attrs.h"
#include "base/digest.h"
#include "base/status.h"

namespace carapace {

// The span kinds.
inline constexpr std::string_view kSpanSession = "session";
inline constexpr std::string_view kSpanTurn = "turn";
inline constexpr std::string_view kSpanLlm = "llm";
inline constexpr std::string_view kSpanTool = "tool";
inline constexpr std::string_view kSpanHook = "hook";
inline constexpr std::string_view kSpanResume = "resume";
// The time a tool call waited for a person (approval.requested to
// approval.decided, docs/approvals.md): a child of its tool span.
inline constexpr std::string_view kSpanApproval = "approval";

// Something that happened inside a span without being work of its own: a
// context trim, an injected fault, a crash, a rollback, a user message.
struct SpanEvent {
  uint64_t seq = 0;
  int64_t ts_us = 0;
  std::string name;
  SpanAttrs attrs;  // flat scalars
  friend bool operator==(const SpanEvent&, const SpanEvent&) = default;
};

// A causal edge to a span of this or another trace.
struct SpanLink {
  std::string trace_id;
  std::string span_id;
  std::string session;  // the session of the linked span
  uint64_t seq = 0;     // the seq of the event that opened it
  std::string reason;   // fork, resumed_after_crash
  friend bool operator==(const SpanLink&, const SpanLink&) = default;
};

struct Span {
  std::string trace_id;   // 32 hex digits, from the session id
  std::string span_id;    // 16 hex digits, from (session, open_seq, kind)
  std::string parent_id;  // "" for the root
  std::string session;
  std::string kind;  // one of the kinds above
  std::string name;  // "turn 3", "llm attempt 2", "tool shell", "hook PreToolUse guard"
  uint64_t open_seq = 0;
  uint64_t close_seq = 0;  // 0 while open
  int64_t start_us = 0;
  int64_t end_us = 0;  // 0 while open
  // ok, error, denied, retried, interrupted, timed_out, crashed,
  // rolled_back, completed, failed; "open" while no event has closed it.
  std::string status = "open";
  SpanAttrs attrs;  // flat scalars
  std::vector<SpanEvent> events;
  std::vector<SpanLink> links;

  bool open() const { return close_seq == 0; }
  friend bool operator==(const Span&, const Span&) = default;
};

// The trace id of a session (hex XXH3-128 of "trace\0" + session).
std::string trace_id_of(std::string_view session);

// The id of the span of `kind` opened by the event at `seq` of `session`
// (the high 64 bits of XXH3-128 over the three, as 16 hex digits).
std::string span_id_of(std::string_view session, uint64_t seq, std::string_view kind);

// The first 16 of d.hex()'s digits (its high half): the short digests a
// span shows (args_digest, prompt_digest, ...), written without the 32.
std::string short_hex(const Digest128& d);

nlohmann::json span_to_json(const Span& span);
// The stored form of a span: byte for byte span_to_json(span).dump() with
// invalid UTF-8 replaced (U+FFFD), written without building the JSON value
// (the collector renders every span it stores).
std::string span_json_text(const Span& span);
// Parses span_to_json(); an error names the field that is wrong.
Status span_from_json(const nlohmann::json& j, Span* out);
// The same, taking the attributes and events from `j` rather than copying them.
Status span_from_json(nlohmann::json&& j, Span* out);

// Lenient reads of one attribute: a value that is missing or of another type
// reads as 0, 0.0, "" or false.
namespace span_attr {
inline uint64_t u(const SpanAttrs& attrs, std::string_view key) {
  const nlohmann::json* v = attrs.get(key);
  return v != nullptr && v->is_number() ? v->get<uint64_t>() : 0;
}
inline double f(const SpanAttrs& attrs, std::string_view key) {
  const nlohmann::json* v = attrs.get(key);
  return v != nullptr && v->is_number() ? v->get<double>() : 0.0;
}
inline std::string s(const SpanAttrs& attrs, std::string_view key) {
  const nlohmann::json* v = attrs.get(key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}
inline bool b(const SpanAttrs& attrs, std::string_view key) {
  const nlohmann::json* v = attrs.get(key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}
}  // namespace span_attr

}  // namespace carapace
