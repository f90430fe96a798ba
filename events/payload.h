// Payload codec: an EventBody to and from the tagged binary payload.
//
// Dispatches on the event type to the codec generated from each struct's field
// list (events/codec.h). Pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "events/events.h"

namespace carapace {

// Appends the payload of `body` to `out` (an UnknownEvent's raw payload as is).
void encode_payload(const EventBody& body, std::string& out);

// Decodes a payload of a known type. Returns false if the bytes are malformed.
// A type this build does not know yields an UnknownEvent holding the bytes.
// The fields whose tags are set in `skip_tags` (bit t: tag t) are stepped
// over and keep their defaults (codec::decode).
bool decode_payload(uint16_t type, std::string_view payload, EventBody* out, uint64_t skip_tags = 0);

}  // namespace carapace
