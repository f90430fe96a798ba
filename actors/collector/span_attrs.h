// SpanAttrs: the attributes of a span or of a span's event (span.h), by key,
// in key order, in one vector.
//
// A session of 10,000 turns has 61,000 spans of about ten attributes each.
// As a JSON object (a std::map) each attribute was a tree node of its own:
// building them was a fifth of `carapace trace show`'s time, and of the
// collector's span building. Here a span's attributes are one allocation,
// and a lookup is a binary search over a handful of keys.
//
// Keys are kept sorted as std::map sorts std::string (byte order), so that
// to_json(), dump() and span_json_text() write them in the order
// nlohmann_json's dump() of the same object does. Values are nlohmann_json
// values: flat scalars (string, integer, float, bool) as the builder sets
// them, whatever a stored span held as the reader found it.
//
// Plain values; no thread-safety concerns beyond those of std types.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace carapace {

class SpanAttrs {
 public:
  using Item = std::pair<std::string, nlohmann::json>;
  using const_iterator = std::vector<Item>::const_iterator;

  SpanAttrs() = default;
  // A repeated key keeps its last value, as nlohmann_json's parser does.
  SpanAttrs(std::initializer_list<Item> items);

  // The value of `key`, added as null when missing.
  nlohmann::json& operator[](std::string_view key);
  // The value of `key`, or null when missing.
  const nlohmann::json& operator[](std::string_view key) const;
  // The value of `key`, or nullptr when missing.
  const nlohmann::json* get(std::string_view key) const;
  nlohmann::json* get(std::string_view key);
  bool contains(std::string_view key) const { return get(key) != nullptr; }
  void erase(std::string_view key);

  // The value of `key` as a T, or `fallback` when it is missing or of
  // another kind (a string for a number, a number for a bool): lenient,
  // where nlohmann_json's value() throws.
  template <class T>
  T value(std::string_view key, const T& fallback) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if constexpr (std::is_same_v<T, nlohmann::json>) {
      return *v;
    } else if constexpr (std::is_same_v<T, std::string>) {
      return v->is_string() ? v->template get_ref<const std::string&>() : fallback;
    } else if constexpr (std::is_same_v<T, bool>) {
      return v->is_boolean() ? v->template get<bool>() : fallback;
    } else {
      static_assert(std::is_arithmetic_v<T>, "SpanAttrs::value: a string, a number, a bool or a json");
      return v->is_number() ? v->template get<T>() : fallback;
    }
  }
  std::string value(std::string_view key, const char* fallback) const {
    return value(key, std::string(fallback));
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void reserve(size_t n) { items_.reserve(n); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

  // The JSON object of the attributes, and its text as dump() writes it.
  nlohmann::json to_json() const;
  std::string dump() const { return to_json().dump(); }
  // The attributes `items` name, in any order; a repeated key keeps its last
  // value. n log n, whatever the order (a stored span's members arrive in a
  // stranger's order if a stranger wrote it).
  static SpanAttrs from_items(std::vector<Item>&& items);
  // The attributes of a JSON object; false (and nothing set) for another value.
  static bool from_json(const nlohmann::json& j, SpanAttrs* out);
  static bool from_json(nlohmann::json&& j, SpanAttrs* out);

  friend bool operator==(const SpanAttrs&, const SpanAttrs&) = default;

 private:
  std::vector<Item> items_;  // sorted by key, keys unique
};

// So that a SpanAttrs converts where a JSON value is expected
// (`nlohmann::json j = span.attrs;`, `{{"attrs", span.attrs}}`).
void to_json(nlohmann::json& j, const SpanAttrs& attrs);

}  // namespace carapace
