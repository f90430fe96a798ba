// Pattern (RE2): what a user's regular expression matches, the errors that
// name a bad one, and patterns that made std::regex recurse until the
// process died matching in time linear in the text.
#include "base/pattern.h"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "base/redactor.h"

using namespace carapace;

namespace {

Pattern compiled(const std::string& text) {
  Pattern p;
  Status s = Pattern::compile(text, &p);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.message());
  return p;
}

// Every span find() reports, as "begin-end".
std::vector<std::string> spans(const Pattern& p, std::string_view text) {
  std::vector<std::string> out;
  size_t b = 0, e = 0;
  for (size_t from = 0; from <= text.size() && p.find(text, from, &b, &e, &from);) {
    out.push_back(std::to_string(b) + "-" + std::to_string(e));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pattern)

BOOST_AUTO_TEST_CASE(search_finds_a_match_anywhere) {
  Pattern shell = compiled("^shell$");
  BOOST_TEST(shell.search("shell"));
  BOOST_TEST(!shell.search("my_shell"));
  Pattern files = compiled("_file$");
  BOOST_TEST(files.search("read_file"));
  BOOST_TEST(!files.search("list_dir"));
  BOOST_TEST(compiled("").search("anything"));  // empty: matches every name, as an empty matcher does
  BOOST_TEST(compiled(R"(rm\s+-rf\s+/)").search("sudo rm  -rf /"));
  BOOST_TEST(!Pattern().search("x"));  // never compiled: matches nothing
}

BOOST_AUTO_TEST_CASE(find_reports_the_first_group_or_the_whole_match) {
  BOOST_TEST(spans(compiled("acct-([0-9]+)"), "acct-12 and acct-345") ==
             (std::vector<std::string>{"5-7", "17-20"}));
  BOOST_TEST(spans(compiled("x+"), "axxbx") == (std::vector<std::string>{"1-3", "4-5"}));
  // A group that did not take part: the whole match.
  BOOST_TEST(spans(compiled("a(b)?"), "a ab") == (std::vector<std::string>{"0-1", "3-4"}));
  // Empty matches are reported and stepped over, never looped on.
  BOOST_TEST(spans(compiled("z*"), "ab").size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_bad_pattern_is_named_with_the_reason_and_the_position) {
  Pattern p;
  Status s = Pattern::compile("ab(cd", &p);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == "\"ab(cd\" is not a valid regular expression: missing ) (at byte 5, the end)",
             s.message());
  s = Pattern::compile("a[z-a]", &p);
  BOOST_TEST(
      s.message() ==
          "\"a[z-a]\" is not a valid regular expression: invalid character class range (at byte 2: \"z-a\")",
      s.message());
  // What needs backtracking is refused up front.
  BOOST_TEST(Pattern::compile("(a)\\1", &p).message().find("invalid escape sequence") != std::string::npos);
  BOOST_TEST(Pattern::compile("a(?=b)", &p).message().find("invalid perl operator") != std::string::npos);
  BOOST_TEST(p.empty());
}

// `(a|b)*c` from a config's redaction patterns killed `log show --json`
// (SIGSEGV: std::regex recursed once per character of a 64 KiB output).
// Here with letters that are not hex digits, so that no built-in rule takes
// the text for a secret first.
BOOST_AUTO_TEST_CASE(patterns_that_made_std_regex_recurse_run_in_linear_time) {
  std::unique_ptr<Redactor> r;
  BOOST_REQUIRE(Redactor::make(Redactor::Options{.patterns = {"(p|q)*r", "(x+x+)+y"}}, &r).ok());
  std::string text;
  for (int i = 0; i < 8 << 20; i += 2) text += "pq";  // 8 MiB
  text += "r";
  auto start = std::chrono::steady_clock::now();
  std::string out = (*r)(text);
  auto took = std::chrono::steady_clock::now() - start;
  // The group's last repetition (the final "q") masked; the rest kept.
  BOOST_TEST(out.size() == text.size() - 1 + Redactor::kMarker.size());
  BOOST_TEST(out.ends_with(std::string(Redactor::kMarker) + "r"));
  BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(took).count() < 20);
  // Catastrophic backtracking for a backtracking engine: 30 x's and no y.
  std::string xs(30000, 'x');
  start = std::chrono::steady_clock::now();
  BOOST_TEST((*r)(xs) == xs);
  BOOST_TEST(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count() < 5);
}

BOOST_AUTO_TEST_SUITE_END()
