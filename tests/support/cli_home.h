// CliHome: a temporary directory holding a home, for the tests that run the
// real `carapace` binary as a user types it (cli_test, trace_cli_test,
// trace_export_test, ...). Each run has the providers' variables unset unless
// given, its own stdin, and stdout and stderr kept apart. The test target
// defines CARAPACE_BIN.
#pragma once

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <fstream>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace carapace::testing {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline std::string slurp(const std::string& path) { return CliRunner::slurp(path); }

struct CliHome {
  TempDir dir;

  std::string home() const { return dir.sub("home"); }

  // Writes `text` to the file `name` in the directory; its path.
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(dir.sub(name), std::ios::binary) << text;
    return dir.sub(name);
  }

  CliResult run(const std::string& args, const std::string& input = "") const { return run_in(home(), args, input); }

  CliResult run_in(const std::string& at, const std::string& args, const std::string& input = "",
                   const std::vector<std::string>& env = {}) const {
    return CliRunner(CARAPACE_BIN, at, dir.path()).run(args, env, input);
  }

  CliResult run_env(const std::vector<std::string>& env, const std::string& args, const std::string& input = "") const {
    return run_in(home(), args, input, env);
  }

  // `args --json`, expected to exit `expected_code` with one JSON document on stdout.
  nlohmann::json run_json(const std::string& args, int expected_code = 0) const {
    CliResult r = run(args + " --json");
    BOOST_TEST(r.code == expected_code, args << ": " << r.err);
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!j.is_discarded(), args << ": not JSON: " << r.out);
    BOOST_TEST(j.contains("success"), args);
    return j;
  }
};

}  // namespace carapace::testing
