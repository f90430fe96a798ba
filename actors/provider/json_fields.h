// Lenient field reads of a provider's non-streamed JSON (nlohmann_json), as
// the stream decoders' event_json reads do: a field that is missing or of
// another type reads as "" or 0, never throws.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace carapace::json_fields {

inline std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

inline uint64_t num(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return 0;
  return it->get<uint64_t>();
}

}  // namespace carapace::json_fields
