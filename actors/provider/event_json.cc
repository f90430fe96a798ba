#include "actors/provider/event_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "base/bounded_json.h"
#include "base/limits.h"

namespace carapace::event_json {

Parser::Parser() = default;

Value Parser::parse(std::string_view data) {
  if (!allocated_) {
    // Capacity grows with the largest event; depth stays bounded. simdjson
    // counts a container that holds a scalar as one level more than its
    // brackets: kJsonDepth + 1 admits what parse_stored_json admits, and at
    // most one level more (an empty container innermost).
    if (parser_.allocate(std::max<size_t>(data.size(), 4096), static_cast<size_t>(limits::kJsonDepth) + 1) !=
        simdjson::SUCCESS) {
      return std::nullopt;
    }
    allocated_ = true;
  }
  Element root;
  if (parser_.parse(data.data(), data.size(), true).get(root) != simdjson::SUCCESS) return std::nullopt;
  return root;
}

bool is_object(const Value& v) { return v && v->is_object(); }
bool array(const Value& v, simdjson::dom::array* out) {
  return v && v->get_array().get(*out) == simdjson::SUCCESS;
}

Value field(const Value& object, std::string_view key) {
  Element out;
  if (!is_object(object) || object->at_key(key).get(out) != simdjson::SUCCESS) return std::nullopt;
  return out;
}

bool has(const Value& object, std::string_view key) { return field(object, key).has_value(); }

std::string_view str(const Value& object, std::string_view key) {
  Value value = field(object, key);
  std::string_view text;
  if (!value || value->get_string().get(text) != simdjson::SUCCESS) return {};
  return text;
}

namespace {

bool is_integer(Element value) {
  return value.type() == simdjson::dom::element_type::INT64 || value.type() == simdjson::dom::element_type::UINT64;
}

}  // namespace

uint64_t num(const Value& object, std::string_view key) {
  Value value = field(object, key);
  uint64_t n = 0;
  if (!value || !is_integer(*value) || value->get_uint64().get(n) != simdjson::SUCCESS) return 0;
  return n;
}

std::optional<int32_t> integer(const Value& object, std::string_view key) {
  Value value = field(object, key);
  if (!value || !is_integer(*value)) return std::nullopt;
  int64_t signed_value = 0;
  if (value->get_int64().get(signed_value) == simdjson::SUCCESS) return static_cast<int32_t>(signed_value);
  uint64_t unsigned_value = 0;
  if (value->get_uint64().get(unsigned_value) == simdjson::SUCCESS) return static_cast<int32_t>(unsigned_value);
  return std::nullopt;
}

std::string dump_as_nlohmann(Element value) {
  return parse_stored_json(simdjson::minify(value)).dump();
}

}  // namespace carapace::event_json
