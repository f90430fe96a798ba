// SpanAttrs against the JSON object it replaces: the same key order, the
// same text, a repeated key's last value; lenient reads.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>

#include "actors/collector/span_attrs.h"

using namespace carapace;

BOOST_AUTO_TEST_SUITE(span_attrs)

BOOST_AUTO_TEST_CASE(keys_come_in_the_order_and_text_of_a_json_object) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    SpanAttrs attrs;
    nlohmann::json object = nlohmann::json::object();
    std::map<std::string, int> expected;
    const int n = static_cast<int>(rng() % 25);
    for (int i = 0; i < n; ++i) {
      // Short keys over a small alphabet: prefixes of one another, repeats,
      // bytes above 0x7f (they sort after ASCII, as std::string compares them).
      std::string key;
      for (size_t len = rng() % 5; len > 0; --len) key.push_back("ab_z\xc3\xa9"[rng() % 6]);
      attrs[key] = i;
      object[key] = i;
      expected[key] = i;
    }
    BOOST_REQUIRE(attrs.size() == expected.size());
    auto it = expected.begin();
    for (const auto& [key, value] : attrs) {
      BOOST_TEST(key == it->first);
      BOOST_TEST(value == it->second);
      ++it;
    }
    const auto replace = nlohmann::json::error_handler_t::replace;  // the keys are not all UTF-8
    BOOST_TEST(attrs.to_json().dump(-1, ' ', false, replace) == object.dump(-1, ' ', false, replace));
    BOOST_TEST(attrs.to_json() == object);
    nlohmann::json converted = attrs;
    BOOST_TEST(converted == object);
    SpanAttrs back;
    BOOST_REQUIRE(SpanAttrs::from_json(object, &back));
    BOOST_TEST((back == attrs));
  }
}

BOOST_AUTO_TEST_CASE(a_repeated_key_keeps_its_last_value_and_erase_removes_one) {
  SpanAttrs attrs{{"b", 1}, {"a", "x"}, {"b", 2}};
  BOOST_TEST(attrs.size() == 2u);
  BOOST_TEST(attrs["b"] == 2);
  BOOST_TEST(attrs.dump() == R"({"a":"x","b":2})");
  attrs.erase("a");
  attrs.erase("missing");
  BOOST_TEST(attrs.dump() == R"({"b":2})");
  BOOST_TEST(attrs.get("a") == nullptr);
  // A read of a missing key through a const reference adds nothing.
  const SpanAttrs& shown = attrs;
  BOOST_TEST(shown["a"].is_null());
  BOOST_TEST(attrs.size() == 1u);
  BOOST_TEST(!attrs.contains("a"));
}

BOOST_AUTO_TEST_CASE(value_reads_leniently) {
  const SpanAttrs attrs{{"n", 7}, {"s", "text"}, {"t", true}, {"f", 2.5}};
  BOOST_TEST(attrs.value("n", uint64_t{0}) == 7u);
  BOOST_TEST(attrs.value("f", 0.0) == 2.5);
  BOOST_TEST(attrs.value("s", "") == "text");
  BOOST_TEST(attrs.value("t", false) == true);
  // Missing, or of another kind: the fallback, where nlohmann_json's value() throws.
  BOOST_TEST(attrs.value("missing", uint64_t{3}) == 3u);
  BOOST_TEST(attrs.value("s", uint64_t{3}) == 3u);
  BOOST_TEST(attrs.value("n", std::string("x")) == "x");
  BOOST_TEST(attrs.value("n", false) == false);
  BOOST_TEST(attrs.value("n", nlohmann::json(0)).dump() == "7");
}

BOOST_AUTO_TEST_CASE(only_an_object_converts) {
  SpanAttrs attrs{{"kept", 1}};
  for (const auto& j :
       {nlohmann::json(3), nlohmann::json::array({1}), nlohmann::json("x"), nlohmann::json()}) {
    BOOST_TEST(!SpanAttrs::from_json(j, &attrs));
    BOOST_TEST(!SpanAttrs::from_json(nlohmann::json(j), &attrs));
  }
  BOOST_TEST(attrs.dump() == R"({"kept":1})");
}

BOOST_AUTO_TEST_SUITE_END()
