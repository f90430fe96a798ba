// Fuzz target: the fold (events/fold.h) over a sequence of events from
// outside, as importing or replaying a bundle folds what decodes, and the
// snapshot of the state it reaches (encode_state / decode_state, what
// recovery starts from).
//
// An input is records, each a varint length then the record's value (the
// record target's input), decoded as seq 1, 2, 3... with their checksums
// made right: the events, not the checksum, are fuzzed here. They are folded
// twice: with checkpoint hashes taken on trust, then verified (libFuzzer
// cannot forge a hash, so the trusting fold is the one that goes far).
//
// Checked: verifying a checkpoint never changes the state reached; a
// snapshot of the state reached decodes, hashes the same, and encodes to
// the same bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/crc32c.h"
#include "events/fold.h"
#include "events/record.h"
#include "events/record_format.h"
#include "events/wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;

// The events of `input` that decode, up to the first that does not.
std::vector<Event> decode_events(std::string_view input) {
  std::vector<Event> events;
  while (!input.empty()) {
    uint64_t size = 0;
    if (!wire::get_varint(input, &size) || size > input.size()) break;
    std::string value(input.substr(0, size));
    input.remove_prefix(size);
    const uint64_t seq = events.size() + 1;
    std::string key = "fuzz";
    key.push_back('\0');
    wire::put_fixed64_be(key, seq);
    if (value.size() >= record::kHeaderSize) {
      uint32_t crc = crc32c::extend(0, key.data(), key.size());
      crc = crc32c::extend(crc, value.data() + 4, value.size() - 4);
      wire::store_fixed32_le(value.data() + record::kCrcOffset, crc32c::mask(crc));
    }
    Event e;
    if (!decode_record(key, value, seq, &e).ok()) break;
    events.push_back(std::move(e));
  }
  return events;
}

// Folds `events` as far as they go; how many were taken.
size_t fold(const std::vector<Event>& events, Folder* folder) {
  size_t taken = 0;
  for (const Event& e : events) {
    if (!folder->add(e).ok()) break;
    ++taken;
  }
  return taken;
}

void check_snapshot(const SessionState& state) {
  std::string bytes = encode_state(state);
  SessionState back;
  fuzz::check(decode_state(bytes, &back).ok(), "a snapshot of a folded state does not decode");
  fuzz::check(state_hash(back) == state_hash(state), "a snapshot hashes differently from its state");
  fuzz::check(encode_state(back) == bytes, "a decoded snapshot encodes differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Event> events = decode_events(std::string_view(reinterpret_cast<const char*>(data), size));
  Folder trusting(Folder::Options{.verify_hashes = false});
  size_t trusted = fold(events, &trusting);
  check_snapshot(trusting.committed());
  SessionState reached;
  if (trusting.state_with_uncommitted(&reached).ok()) check_snapshot(reached);

  Folder verifying(Folder::Options{.verify_hashes = true});
  if (fold(events, &verifying) == trusted) {
    fuzz::check(state_hash(verifying.committed()) == state_hash(trusting.committed()),
                "verifying checkpoints changed the state folded");
  }
  return 0;
}
