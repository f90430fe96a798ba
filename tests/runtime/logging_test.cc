// Carapace's own log files: JSON lines, a new file past the size limit,
// old days removed, levels per sink, and secrets masked.
#include "runtime/logging.h"

#include <boost/test/unit_test.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/temp_dir.h"

using namespace carapace;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(logging)

BOOST_AUTO_TEST_CASE(json_lines_rotate_by_size_prune_old_days_and_mask_secrets) {
  testing::TempDir dir;
  const std::string logs = dir.sub("logs");
  fs::create_directories(logs);
  std::ofstream(logs + "/carapace-2020-01-01.jsonl") << "{}\n";      // long past the retention
  std::ofstream(logs + "/carapace-2020-01-01.3.jsonl") << "{}\n";
  std::ofstream(logs + "/notes.txt") << "not a log\n";               // not ours: kept
  const std::string key = "sk-proj-Canary7Qw2Er4Ty6Ui8Op0As";
  BOOST_REQUIRE(configure_logging(LogOptions{.dir = logs, .stderr_level = "off", .file_level = "info",
                                             .max_file_bytes = 400, .retention_days = 7})
                    .ok());
  for (int i = 0; i < 12; ++i) spdlog::info("line {} with the key {}", i, key);
  spdlog::debug("below the file's level");
  spdlog::default_logger()->flush();
  // Back to stderr only, so that the files are closed.
  BOOST_REQUIRE(configure_logging(LogOptions{}).ok());

  std::set<std::string> names;
  for (const auto& f : fs::directory_iterator(logs)) names.insert(f.path().filename().string());
  BOOST_TEST(!names.count("carapace-2020-01-01.jsonl"));
  BOOST_TEST(!names.count("carapace-2020-01-01.3.jsonl"));
  BOOST_TEST(names.count("notes.txt"));
  std::vector<std::string> ours;
  for (const auto& n : names) {
    if (n.rfind("carapace-", 0) == 0) ours.push_back(n);
  }
  BOOST_TEST(ours.size() >= 3u);  // 12 lines of ~190 bytes, 400 bytes a file
  int lines = 0;
  for (const auto& n : ours) {
    BOOST_TEST(((fs::status(logs + "/" + n).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none));
    std::ifstream in(logs + "/" + n);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      BOOST_REQUIRE_MESSAGE(!j.is_discarded(), line);
      BOOST_TEST(j["level"] == "info");
      BOOST_TEST(j["ts"].get<std::string>().size() == 27u);  // 2026-11-23T11:41:50.743367Z
      BOOST_TEST(j["msg"].get<std::string>().find(key) == std::string::npos, line);
      BOOST_TEST(j["msg"].get<std::string>().find("sk-") != std::string::npos, line);
      BOOST_TEST(line.find("below the file's level") == std::string::npos);
      ++lines;
    }
  }
  BOOST_TEST(lines == 12);
}

BOOST_AUTO_TEST_CASE(a_bad_level_or_directory_is_named) {
  Status s = configure_logging(LogOptions{.stderr_level = "loud"});
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message().find("\"loud\"") != std::string::npos, s.message());
  testing::TempDir dir;
  std::ofstream(dir.sub("file")) << "x";
  s = configure_logging(LogOptions{.dir = dir.sub("file") + "/logs"});
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.message().find(dir.sub("file")) != std::string::npos, s.message());
  BOOST_REQUIRE(configure_logging(LogOptions{}).ok());
}

BOOST_AUTO_TEST_SUITE_END()
