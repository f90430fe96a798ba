// parse_bounded_json and read_bounded_file: input from outside refused with
// a message that names the limit, before it can exhaust the stack, the
// memory or the patience of the process reading it.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/bounded_file.h"
#include "base/bounded_json.h"

using namespace carapace;

namespace {

std::string nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/carapace-bounded-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(json_depth_counts_arrays_and_objects_but_not_brackets_in_strings) {
  BOOST_TEST(!json_depth_exceeds(nested(128)));
  BOOST_TEST(json_depth_exceeds(nested(129)));
  BOOST_TEST(!json_depth_exceeds("{\"a\":{\"b\":[1,2]}}", 3));
  BOOST_TEST(json_depth_exceeds("{\"a\":{\"b\":[1,2]}}", 2));
  // Brackets inside strings, escaped quotes included, are text.
  BOOST_TEST(!json_depth_exceeds("[\"[[[[\\\"[[[[\"]", 1));
  BOOST_TEST(!json_depth_exceeds("\"\\\\\"", 0));
  // An unterminated string or escape at the very end is read without overrun.
  BOOST_TEST(!json_depth_exceeds("[\"abc\\", 1));
  BOOST_TEST(!json_depth_exceeds("", 0));
}

BOOST_AUTO_TEST_CASE(a_text_nested_past_the_limit_is_refused_before_it_is_parsed) {
  nlohmann::json out;
  // 400,000 deep: parsed, then dumped, this kills the process (recursion).
  Status s = parse_bounded_json(nested(400000), "the tool call's arguments", &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() ==
             "the tool call's arguments: JSON nested deeper than 128 levels (the limit on JSON depth, "
             "docs/config.md)");
  BOOST_TEST(parse_bounded_json(nested(100, '{', '}'), "x", &out).is_invalid_argument());  // not JSON either way
  BOOST_TEST(parse_bounded_json(nested(128), "x", &out).ok());
  BOOST_TEST(out.dump().size() == 256u);
}

BOOST_AUTO_TEST_CASE(a_text_that_is_not_json_is_refused_with_the_parsers_reason) {
  nlohmann::json out;
  Status s = parse_bounded_json("{\"a\": tru}", "scenario.json", &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message().rfind("scenario.json is not valid JSON: parse error at line 1, column", 0) == 0,
             s.message());
  BOOST_TEST(parse_bounded_json("", "x", &out).is_invalid_argument());
  BOOST_TEST(parse_bounded_json("[1] [2]", "x", &out).is_invalid_argument());
  BOOST_TEST(parse_bounded_json(" {\"k\": [1, {\"v\": null}]} ", "x", &out).ok());
  BOOST_TEST(out["k"][1].contains("v"));
}

BOOST_AUTO_TEST_CASE(a_regular_file_within_the_cap_is_read_whole) {
  TempDir dir;
  const std::string path = dir.path + "/identity.md";
  std::ofstream(path) << "You are careful.\n";
  std::string out;
  BOOST_TEST(read_bounded_file(path, 1024, "prompt.identity_file", &out).ok());
  BOOST_TEST(out == "You are careful.\n");
  std::ofstream(dir.path + "/empty");
  BOOST_TEST(read_bounded_file(dir.path + "/empty", 0, "x", &out).ok());
  BOOST_TEST(out.empty());
}

BOOST_AUTO_TEST_CASE(a_file_past_the_cap_is_refused_naming_the_limit) {
  TempDir dir;
  const std::string path = dir.path + "/big.json";
  std::ofstream(path) << std::string(2049, 'x');
  std::string out = "untouched";
  Status s = read_bounded_file(path, 2048, "--scenario", &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == "--scenario " + path + " is larger than 2 KiB, the limit for --scenario");
  BOOST_TEST(out == "untouched");
  BOOST_TEST(read_bounded_file(path, 2049, "--scenario", &out).ok());
}

BOOST_AUTO_TEST_CASE(devices_fifos_and_directories_are_refused_without_waiting_or_reading) {
  TempDir dir;
  std::string out;
  Status zero = read_bounded_file("/dev/zero", 1 << 20, "prompt.identity_file", &out);
  BOOST_TEST(zero.is_invalid_argument());
  BOOST_TEST(zero.message() == "prompt.identity_file /dev/zero is a character device, not a regular file");
  const std::string fifo = dir.path + "/fifo";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  Status f = read_bounded_file(fifo, 1 << 20, "--scenario", &out);  // no writer: must not hang
  BOOST_TEST(f.is_invalid_argument());
  BOOST_TEST(f.message().find("is a FIFO, not a regular file") != std::string::npos);
  Status d = read_bounded_file(dir.path, 1 << 20, "config", &out);
  BOOST_TEST(d.is_invalid_argument());
  BOOST_TEST(d.message().find("is a directory, not a regular file") != std::string::npos);
  Status missing = read_bounded_file(dir.path + "/nope", 1 << 20, "config", &out);
  BOOST_TEST(missing.is_not_found());
  BOOST_TEST(missing.message() == "config " + dir.path + "/nope does not exist");
}

BOOST_AUTO_TEST_CASE(limits_are_written_as_people_say_them) {
  BOOST_TEST(byte_size_text(1 << 20) == "1 MiB");
  BOOST_TEST(byte_size_text(64ull << 20) == "64 MiB");
  BOOST_TEST(byte_size_text(2048) == "2 KiB");
  BOOST_TEST(byte_size_text(1000) == "1000 bytes");
  BOOST_TEST(byte_size_text(1ull << 30) == "1 GiB");
}
