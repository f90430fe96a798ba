#define BOOST_TEST_MODULE base_test
#include <boost/test/unit_test.hpp>

#include <cerrno>

#include "base/text.h"

using namespace carapace;

BOOST_AUTO_TEST_CASE(an_incomplete_utf8_sequence_at_the_end_is_measured) {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  BOOST_TEST(incomplete_utf8_suffix("") == 0u);
  BOOST_TEST(incomplete_utf8_suffix("abc") == 0u);
  BOOST_TEST(incomplete_utf8_suffix("a" + euro) == 0u);
  BOOST_TEST(incomplete_utf8_suffix("a" + euro.substr(0, 1)) == 1u);
  BOOST_TEST(incomplete_utf8_suffix("a" + euro.substr(0, 2)) == 2u);
  BOOST_TEST(incomplete_utf8_suffix("a\xC3") == 1u);              // half of é
  BOOST_TEST(incomplete_utf8_suffix("a\xF0\x9F\x98") == 3u);      // three quarters of an emoji
  BOOST_TEST(incomplete_utf8_suffix("a\xF0\x9F\x98\x80") == 0u);  // the whole emoji
  BOOST_TEST(incomplete_utf8_suffix("\x80\x80\x80") == 0u);       // no lead byte in reach: not ours to cut
}

BOOST_AUTO_TEST_CASE(leading_continuations_are_counted_up_to_three) {
  BOOST_TEST(leading_utf8_continuations("abc") == 0u);
  BOOST_TEST(leading_utf8_continuations("\x82\xAC"
                                        "a") == 2u);
  BOOST_TEST(leading_utf8_continuations("\x80\x80\x80\x80") == 3u);
  BOOST_TEST(leading_utf8_continuations("") == 0u);
}

BOOST_AUTO_TEST_CASE(errno_text_names_the_error) {
  BOOST_TEST(errno_text(ENOENT) == "No such file or directory");
}

BOOST_AUTO_TEST_CASE(terminal_controls_are_made_visible) {
  // An OSC title change, a CSI clear-screen, a carriage return that would
  // overwrite the line, a BEL; the 8-bit CSI (U+009B) too.
  BOOST_TEST(terminal_safe("name\x1b]0;pwned\x07 x") == "name\\x1b]0;pwned\\x07 x");
  BOOST_TEST(terminal_safe("\x1b[2J\rok\x7f") == "\\x1b[2J\\x0dok\\x7f");
  BOOST_TEST(terminal_safe("a\xC2\x9B"
                           "31mred") == "a\\u009b31mred");
  // Lines, tabs and other text stay as they are; é (C3 A9) and a no-break
  // space (C2 A0) are not controls.
  BOOST_TEST(terminal_safe("line 1\n\tline 2 \xC3\xA9\xC2\xA0!") == "line 1\n\tline 2 \xC3\xA9\xC2\xA0!");
  std::string out = "untouched";
  BOOST_TEST(!escape_terminal_controls("plain", &out));
  BOOST_TEST(out == "untouched");
  BOOST_TEST(terminal_safe("\xC2") == "\xC2");  // a cut lead byte at the end is not read past
  // JSON output: C0 is escaped by JSON itself; C1 and DEL are escaped here.
  BOOST_TEST(json_terminal_safe("{\"a\":\"x\xC2\x9By\x7f\"}") == "{\"a\":\"x\\u009by\\u007f\"}");
  BOOST_TEST(json_terminal_safe("{\"a\":1}") == "{\"a\":1}");
}
