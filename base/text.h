// Small text helpers the tools share: errno messages and cutting UTF-8 text
// without splitting a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace carapace {

// strerror for `err`, thread-safe: "No such file or directory".
std::string errno_text(int err);

// How many bytes at the end of `s` are an incomplete UTF-8 sequence (0 if
// none): cutting them keeps a cut text valid for a JSON encoder.
size_t incomplete_utf8_suffix(std::string_view s);

// How many UTF-8 continuation bytes `s` starts with (at most 3): the rest of
// a character whose lead byte was cut off.
size_t leading_utf8_continuations(std::string_view s);

}  // namespace carapace
