// Keys of the log's column families.
//
//   event, checkpoint and snapshot keys := session_id 0x00 seq:fixed64-big-endian
//   session index key                   := session_id
//
// The 0x00 after the id keeps one session's keys contiguous and apart from any
// other id that starts with the same characters ("s1" and "s10"); big-endian
// seqs make byte order numeric order. Session ids are 1 to 128 characters of
// [A-Za-z0-9._:-], not starting with '-' or '.', so they never contain 0x00
// and never read as an option or a path component.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace carapace::keys {

constexpr size_t kMaxSessionIdLength = 128;
constexpr char kSeparator = '\0';

// OK, or invalid_argument naming the offending character or length.
Status validate_session_id(std::string_view id);

// A fresh id from the local clock and a random suffix: <prefix>-20261121-193000-4f2a09c1 (32 random bits).
std::string generate_session_id(std::string_view prefix);

// session_id 0x00
std::string session_prefix(std::string_view session);

// The first key past every key of `session` (session_id 0x01).
std::string session_upper_bound(std::string_view session);

std::string seq_key(std::string_view session, uint64_t seq);

// Splits a seq key; false if it is not one.
bool parse_seq_key(std::string_view key, std::string_view* session, uint64_t* seq);

}  // namespace carapace::keys
