// Small text helpers the tools share: errno messages, cutting UTF-8 text
// without splitting a character, and text made safe to print on a terminal.
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

// `text` with every terminal control it holds made visible: C0 controls but
// newline and tab (ESC, CR, BEL, backspace...), DEL and the C1 controls
// U+0080 to U+009F (CSI, OSC...) become \xNN or \u00NN. What a model, a
// tool or a server wrote can then neither move the cursor, rewrite what is
// on the screen, set the title or the clipboard, nor hide itself. The
// result is what was given when nothing needed escaping (no copy made by
// the bool form).
bool escape_terminal_controls(std::string_view text, std::string* out);
std::string terminal_safe(std::string_view text);

// For JSON text already rendered: the C1 controls and DEL written as
// \u00NN (JSON escapes C0 itself); valid JSON in, the same JSON out.
std::string json_terminal_safe(std::string json_text);

}  // namespace carapace
