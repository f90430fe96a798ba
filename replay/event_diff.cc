#include "replay/event_diff.h"

#include <nlohmann/json.hpp>

#include <set>
#include <tuple>
#include <type_traits>
#include <variant>

#include "events/event_json.h"

namespace carapace {
namespace {

std::string cut(std::string s, size_t max_chars) {
  if (s.size() <= max_chars) return s;
  size_t keep = max_chars;
  while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;  // not inside a character
  s.resize(keep);
  return s + "…";
}

// Whether the bodies agree in every field the comparison looks at, decided
// on the structs, without building JSON: what a replay asks of nearly every
// event. False does not mean they differ (a JSON text may be written two
// ways): diff_events then compares their JSON.
bool same_compared_fields(std::string_view type, const Event& expected, const Event& actual) {
  return std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        const T* b = std::get_if<T>(&actual.body);
        if (b == nullptr) return false;
        if constexpr (codec::Described<T>) {
          return std::apply(
              [&](const auto&... f) {
                return ((a.*(f.member) == b->*(f.member) || replay_ignores(type, f.name)) && ...);
              },
              codec::kFieldsOf<T>);
        } else {
          return a == *b;
        }
      },
      expected.body);
}

}  // namespace

bool replay_ignores(std::string_view type, std::string_view field) {
  if (type == "llm.requested") return field == "body_ref";
  if (type == "llm.responded" || type == "llm.failed") return field == "latency_ms" || field == "body_ref";
  if (type == "tool.completed") return field == "duration_ms";
  if (type == "session.resumed") return field == "pid" || field == "host";
  if (type == "approval.requested") return field == "requested_at_us" || field == "expires_at_us";
  return false;
}

std::vector<FieldDiff> diff_events(const Event& expected, const Event& actual) {
  std::vector<FieldDiff> diffs;
  if (expected.type_number() != actual.type_number()) {
    diffs.push_back(FieldDiff{.field = "type",
                              .expected = std::string(expected.type_name()),
                              .actual = std::string(actual.type_name())});
    return diffs;
  }
  const std::string_view type = expected.type_name();
  if (same_compared_fields(type, expected, actual)) return diffs;
  nlohmann::json a = body_to_json(expected.body), b = body_to_json(actual.body);
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  for (const auto& k : keys) {
    if (replay_ignores(type, k)) continue;
    const bool in_a = a.contains(k), in_b = b.contains(k);
    if (in_a && in_b && a[k] == b[k]) continue;
    diffs.push_back(FieldDiff{.field = k,
                              .expected = in_a ? a[k].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "",
                              .actual = in_b ? b[k].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : ""});
  }
  return diffs;
}

std::string describe_event(const Event& e, size_t max_chars) {
  std::string data = body_to_json(e.body).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "seq " + std::to_string(e.seq) + " " + std::string(e.type_name()) + " " + cut(std::move(data), max_chars);
}

}  // namespace carapace
