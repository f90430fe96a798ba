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
