#include "base/pattern.h"

#include <re2/re2.h>

#include <algorithm>

namespace carapace {

Status Pattern::compile(std::string_view text, Pattern* out) {
  RE2::Options options;
  options.set_log_errors(false);  // the error is returned, not written to stderr
  auto re = std::make_shared<const RE2>(re2::StringPiece(text.data(), text.size()), options);
  if (!re->ok()) {
    std::string why = re->error();
    // RE2 says "missing ): (a|b"; the part after ": " is the fragment it
    // objected to, found again in the pattern for a position.
    const std::string& arg = re->error_arg();
    if (!arg.empty() && why.size() > arg.size() + 2 && why.ends_with(": " + arg)) {
      why.resize(why.size() - arg.size() - 2);
    }
    std::string where;
    if (arg.size() == text.size()) {
      // Something left open ("(ab", "[ab", "ab\\"): RE2 names the whole
      // pattern; the text ran out at its end.
      where = " (at byte " + std::to_string(text.size()) + ", the end)";
    } else if (size_t at = arg.empty() ? std::string_view::npos : text.find(arg);
               at != std::string_view::npos) {
      where = " (at byte " + std::to_string(at) + ": \"" + arg + "\")";
    }
    return Status::invalid_argument("\"" + std::string(text) +
                                    "\" is not a valid regular expression: " + why + where);
  }
  out->text_ = std::string(text);
  out->re_ = std::move(re);
  return Status::ok_status();
}

bool Pattern::search(std::string_view text) const {
  return re_ != nullptr && RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

bool Pattern::find(std::string_view text, size_t from, size_t* begin, size_t* end, size_t* next) const {
  if (re_ == nullptr || from > text.size()) return false;
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece groups[2];
  const int n = re_->NumberOfCapturingGroups() >= 1 ? 2 : 1;
  if (!re_->Match(input, from, text.size(), RE2::UNANCHORED, groups, n)) return false;
  const re2::StringPiece& chosen = n == 2 && groups[1].data() != nullptr ? groups[1] : groups[0];
  *begin = static_cast<size_t>(chosen.data() - text.data());
  *end = *begin + chosen.size();
  const size_t whole_end = static_cast<size_t>(groups[0].data() - text.data()) + groups[0].size();
  *next = std::max(whole_end, from + 1);
  return true;
}

}  // namespace carapace
