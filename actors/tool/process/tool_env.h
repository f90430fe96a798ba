// Tool environment: which environment variables of the runtime a tool process
// (a shell command) receives. Tools run what a model wrote, and whatever they
// print goes into the model's context and the log, so secrets stay out.
//
// The rule, for each variable NAME of the runtime's environment, first match
// wins:
//   1. NAME matches an `exclude` pattern            -> removed
//   2. NAME matches an `include` pattern            -> passed
//   3. `inherit` is "none", or "core" and NAME is
//      not a core variable (PATH, HOME, LANG, ...)  -> removed
//   4. NAME is a provider key (`secret_names`), or
//      contains KEY, SECRET, TOKEN or PASSWORD in
//      any case                                     -> removed
//   5. otherwise                                    -> passed
// So an `include` is how a user deliberately hands a token to the tools, and
// an `exclude` removes anything more. Patterns are variable names in which
// `*` matches any run of characters ("AWS_*").
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace carapace {

struct ToolEnvOptions {
  std::string inherit = "all";        // "all", "core" or "none"
  std::vector<std::string> include;   // patterns passed whatever rules 3 and 4 say
  std::vector<std::string> exclude;   // patterns always removed
  // The provider key variables of this runtime (the configured api_key_env
  // names); removed by rule 4 even when their names look harmless.
  std::vector<std::string> secret_names = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"};
};

// OK, or invalid_argument naming the bad value: an unknown `inherit`, an
// empty pattern or one with characters other than letters, digits, '_' and
// '*', or a pattern listed in both include and exclude.
Status validate_tool_env(const ToolEnvOptions& options);

// Whether rule 4 removes `name` (a provider key, or a name containing KEY,
// SECRET, TOKEN or PASSWORD in any case).
bool looks_secret(std::string_view name, const std::vector<std::string>& secret_names);

// Whether `name` matches `pattern` ('*' matches any run, possibly empty).
bool env_name_matches(std::string_view pattern, std::string_view name);

// The "NAME=value" entries of `environment` (a null-terminated array such as
// `environ`) that the rule passes, in their order. Entries without '=' are
// dropped. `options` must be valid.
std::vector<std::string> tool_environment(const ToolEnvOptions& options, const char* const* environment);

}  // namespace carapace
