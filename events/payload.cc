#include "events/payload.h"

#include <array>
#include <utility>

namespace carapace {
namespace {

using DecodeFn = bool (*)(std::string_view, EventBody*, uint64_t);

template <class T>
bool decode_as(std::string_view payload, EventBody* out, uint64_t skip_tags) {
  // Straight into the variant: no whole-struct move afterwards.
  return codec::decode(payload, &out->emplace<T>(), skip_tags);
}

// Table indexed by type number, built from the variant's alternatives so that
// adding an event struct to EventBody is all it takes.
template <size_t... I>
constexpr std::array<DecodeFn, kMaxKnownEventType + 1> make_decoders(std::index_sequence<I...>) {
  std::array<DecodeFn, kMaxKnownEventType + 1> table{};
  (
      [&] {
        using T = std::variant_alternative_t<I, EventBody>;
        if constexpr (!std::is_same_v<T, UnknownEvent>) {
          table[static_cast<size_t>(T::kType)] = &decode_as<T>;
        }
      }(),
      ...);
  return table;
}

constexpr auto kDecoders = make_decoders(std::make_index_sequence<std::variant_size_v<EventBody>>{});

}  // namespace

void encode_payload(const EventBody& body, std::string& out) {
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, UnknownEvent>) {
          out.append(e.payload);
        } else {
          codec::encode(out, e);
        }
      },
      body);
}

bool decode_payload(uint16_t type, std::string_view payload, EventBody* out, uint64_t skip_tags) {
  if (type < kDecoders.size() && kDecoders[type] != nullptr) {
    return kDecoders[type](payload, out, skip_tags);
  }
  UnknownEvent unknown;
  unknown.type = type;
  unknown.payload.assign(payload);
  out->emplace<UnknownEvent>(std::move(unknown));
  return true;
}

}  // namespace carapace
