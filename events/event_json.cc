#include "events/event_json.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "base/bounded_json.h"

namespace carapace {
namespace {

using nlohmann::json;

std::string_view enum_name(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::kNone:
      return "none";
    case ErrorCategory::kTransient:
      return "transient";
    case ErrorCategory::kPermanent:
      return "permanent";
  }
  return "unknown";
}
std::string_view enum_name(Role r) { return role_name(r); }
std::string_view enum_name(SessionStatus s) { return status_name(s); }

template <codec::Described T>
json object_json(const T& value);

template <class M>
json value_json(const M& v) {
  if constexpr (codec::IsVector<M>::value) {
    json arr = json::array();
    for (const auto& item : v) arr.push_back(value_json(item));
    return arr;
  } else if constexpr (std::is_enum_v<M>) {
    return std::string(enum_name(v));
  } else if constexpr (std::is_arithmetic_v<M>) {
    return v;
  } else if constexpr (std::is_same_v<M, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<M, JsonText>) {
    if (v.text.empty()) return nullptr;
    json parsed = parse_stored_json(v.text);
    return parsed.is_discarded() ? json(v.text) : parsed;
  } else if constexpr (std::is_same_v<M, Digest128>) {
    return v.hex();
  } else {
    return object_json(v);
  }
}

template <codec::Described T>
json object_json(const T& value) {
  json obj = json::object();
  std::apply([&](const auto&... f) { ((obj[std::string(f.name)] = value_json(value.*(f.member))), ...); },
             T::fields());
  return obj;
}

std::string hex_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  char buf[3];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

json body_to_json(const EventBody& body) {
  return std::visit(
      [](const auto& e) -> json {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, UnknownEvent>) {
          return json{{"type_number", e.type},
                      {"format_version", e.format_version},
                      {"flags", e.flags},
                      {"payload_hex", hex_bytes(e.payload)}};
        } else {
          return object_json(e);
        }
      },
      body);
}

json event_to_json(const Event& event) {
  return json{{"seq", event.seq},
              {"ts_us", event.ts_us},
              {"type", std::string(event.type_name())},
              {"data", body_to_json(event.body)}};
}

json state_to_json(const SessionState& state) { return object_json(state); }

}  // namespace carapace
