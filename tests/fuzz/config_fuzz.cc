// Fuzz target: the configuration file (parse_config, runtime/config.h), and
// the configuration as a session records it (config_to_json, in
// session.configured) and reads it back on resume, fork and replay.
//
// Checked: a configuration that parses has a digest, its recorded form
// parses, and reads back as what was recorded (but the values of extra
// request headers, which are never recorded since they may be credentials).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;
using nlohmann::json;

// The recorded form without provider.headers (names only; none once read back).
json recorded_without_headers(const Config& config) {
  json j = config_to_json(config);
  j["provider"].erase("headers");
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Config config;
  std::vector<std::string> warnings;
  if (!parse_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", &config,
                    &warnings)
           .ok()) {
    return 0;
  }
  (void)config_digest(config);
  std::string recorded = config_to_json(config).dump();
  Config back;
  fuzz::check(parse_config(recorded, "the recorded configuration", &back, &warnings).ok(),
              "a configuration's recorded form does not parse");
  fuzz::check(recorded_without_headers(back) == recorded_without_headers(config),
              "a configuration's recorded form reads back as another configuration");
  return 0;
}
