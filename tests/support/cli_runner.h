// CliRunner: the real `carapace` binary run on a home, with the providers'
// variables unset, for tests of what a user types. Each run's stdout and
// stderr are kept apart; a run killed by a signal has code 128 + the signal,
// as a shell reports it.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace carapace::testing {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
  bool crashed() const { return code < 0 || code >= 128; }
};

class CliRunner {
 public:
  // `binary` runs with `--home home`; `scratch` is a directory for its output files.
  CliRunner(std::string binary, std::string home, std::string scratch)
      : binary_(std::move(binary)), home_(std::move(home)), scratch_(std::move(scratch)) {}

  // `carapace --home HOME ARGS` (ARGS as a shell would split them), with
  // `env` ("NAME=value") added to an environment without provider keys.
  // `input` is its stdin.
  CliResult run(const std::string& args, const std::vector<std::string>& env = {},
                const std::string& input = "") const {
    std::string out = scratch_ + "/cli.out", err = scratch_ + "/cli.err", in = scratch_ + "/cli.in";
    std::ofstream(in, std::ios::binary) << input;
    std::string cmd = "env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY -u ANTHROPIC_BASE_URL";
    for (const auto& v : env) cmd += " '" + v + "'";
    cmd += " " + binary_ + " --home '" + home_ + "' " + args + " >'" + out + "' 2>'" + err + "' <'" + in + "'";
    int status = std::system(cmd.c_str());
    CliResult r;
    if (WIFEXITED(status)) {
      r.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.code = 128 + WTERMSIG(status);
    }
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  const std::string& home() const { return home_; }

  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string binary_;
  std::string home_;
  std::string scratch_;
};

}  // namespace carapace::testing
