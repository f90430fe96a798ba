// Pattern: a regular expression someone wrote into a configuration (a
// redaction rule, a blocked command, a hook matcher, a fault plan's tool
// name), compiled with RE2.
//
// std::regex's matcher recurses once per character it repeats over: the
// redaction pattern `(a|b)*c` on 64 KiB of output killed the process that
// printed it. RE2 matches in time linear in the text, with bounded memory,
// and never backtracks; it refuses what it cannot do that way
// (backreferences, lookaround), so such a pattern is an error at start-up
// instead of a hang later. Syntax: RE2's, which is Perl's and ECMAScript's
// for everything else (docs/config.md).
//
// Thread-safety: a compiled Pattern is immutable and may be matched from any
// number of threads at once; copies share the compiled program.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace re2 {
class RE2;
}

namespace carapace {

class Pattern {
 public:
  // An empty Pattern matches nothing; compile() makes a usable one.
  Pattern() = default;

  // Compiles `text`. Not valid: invalid_argument "\"TEXT\" is not a valid
  // regular expression: WHY (at byte N)", where N is the position of the
  // part RE2 objected to. The caller adds which key held it.
  static Status compile(std::string_view text, Pattern* out);

  // Whether the pattern matches somewhere in `text`.
  bool search(std::string_view text) const;

  // The first match starting at or after `from`: [*begin, *end) is its
  // first group when the pattern has one and the group took part, else the
  // whole match; *next is where to look for the following match (past the
  // whole match, and never `from` again). False when there is none.
  bool find(std::string_view text, size_t from, size_t* begin, size_t* end, size_t* next) const;

  const std::string& text() const { return text_; }
  bool empty() const { return re_ == nullptr; }

 private:
  std::string text_;
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace carapace
