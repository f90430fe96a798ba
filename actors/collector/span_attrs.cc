#include "actors/collector/span_attrs.h"

#include <algorithm>

namespace carapace {
namespace {

// Most spans have between four and twenty attributes: room for eight at
// the first saves the vector's first three moves.
constexpr size_t kFirstCapacity = 8;

// Byte order, as std::string's operator< gives it, written out: keys are
// short and differ early, where memcmp would be a call for every comparison.
inline bool key_less(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
  }
  return a.size() < b.size();
}

inline bool key_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

template <class Items>
auto find_key(Items& items, std::string_view key) {
  return std::lower_bound(
      items.begin(), items.end(), key,
      [](const SpanAttrs::Item& item, std::string_view k) { return key_less(item.first, k); });
}

}  // namespace

SpanAttrs::SpanAttrs(std::initializer_list<Item> items) {
  items_.reserve(items.size());
  for (const auto& [key, value] : items) (*this)[key] = value;
}

nlohmann::json& SpanAttrs::operator[](std::string_view key) {
  // Keys mostly come in order (a stored span's, most of the builder's).
  if (items_.empty() || key_less(items_.back().first, key)) {
    if (items_.capacity() == 0) items_.reserve(kFirstCapacity);
    return items_.emplace_back(std::string(key), nullptr).second;
  }
  auto it = find_key(items_, key);
  if (it != items_.end() && key_equal(it->first, key)) return it->second;
  return items_.emplace(it, std::string(key), nullptr)->second;
}

const nlohmann::json& SpanAttrs::operator[](std::string_view key) const {
  static const nlohmann::json kNull;
  const nlohmann::json* v = get(key);
  return v != nullptr ? *v : kNull;
}

const nlohmann::json* SpanAttrs::get(std::string_view key) const {
  auto it = find_key(items_, key);
  return it != items_.end() && key_equal(it->first, key) ? &it->second : nullptr;
}

nlohmann::json* SpanAttrs::get(std::string_view key) {
  auto it = find_key(items_, key);
  return it != items_.end() && key_equal(it->first, key) ? &it->second : nullptr;
}

void SpanAttrs::erase(std::string_view key) {
  auto it = find_key(items_, key);
  if (it != items_.end() && key_equal(it->first, key)) items_.erase(it);
}

nlohmann::json SpanAttrs::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  auto& map = out.get_ref<nlohmann::json::object_t&>();
  for (const auto& [key, value] : items_) map.emplace_hint(map.end(), key, value);
  return out;
}

SpanAttrs SpanAttrs::from_items(std::vector<Item>&& items) {
  auto less = [](const Item& a, const Item& b) { return key_less(a.first, b.first); };
  auto equal = [](const Item& a, const Item& b) { return key_equal(a.first, b.first); };
  SpanAttrs out;
  out.items_ = std::move(items);
  auto& v = out.items_;
  const bool in_order = std::adjacent_find(v.begin(), v.end(), [&](const Item& a, const Item& b) {
                          return !key_less(a.first, b.first);
                        }) == v.end();
  if (in_order) return out;
  // Sorted, equal keys kept in their order; then the last of each run of equal keys kept.
  std::stable_sort(v.begin(), v.end(), less);
  auto kept = v.begin();
  for (auto it = v.begin(); it != v.end();) {
    auto run_end = std::find_if_not(it, v.end(), [&](const Item& item) { return equal(item, *it); });
    if (kept != run_end - 1) *kept = std::move(*(run_end - 1));
    ++kept;
    it = run_end;
  }
  v.erase(kept, v.end());
  return out;
}

namespace {

// Both from_json()s: J is const json (copies the values) or json (moves them).
template <class J>
bool attrs_of_object(J& j, SpanAttrs* out) {
  if (!j.is_object()) return false;
  SpanAttrs attrs;
  attrs.reserve(j.size());
  // An object's keys come sorted and unique: each one is appended.
  for (auto it = j.begin(); it != j.end(); ++it) attrs[it.key()] = std::move(it.value());
  *out = std::move(attrs);
  return true;
}

}  // namespace

bool SpanAttrs::from_json(const nlohmann::json& j, SpanAttrs* out) { return attrs_of_object(j, out); }
bool SpanAttrs::from_json(nlohmann::json&& j, SpanAttrs* out) { return attrs_of_object(j, out); }

void to_json(nlohmann::json& j, const SpanAttrs& attrs) { j = attrs.to_json(); }

}  // namespace carapace
