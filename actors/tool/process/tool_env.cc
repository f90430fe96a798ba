#include "actors/tool/process/tool_env.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace carapace {
namespace {

// What a program needs to run sensibly, and nothing that identifies a
// service: with inherit "core", only these (and includes) pass.
constexpr std::array<std::string_view, 12> kCoreNames = {"PATH",  "HOME",   "USER", "LOGNAME", "SHELL", "LANG",
                                                         "LC_*",  "TERM",   "TZ",   "TMPDIR",  "PWD",   "LANGUAGE"};

constexpr std::array<std::string_view, 4> kSecretWords = {"KEY", "SECRET", "TOKEN", "PASSWORD"};

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return env_name_matches(p, name); });
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Status check_patterns(const std::vector<std::string>& patterns, const char* list) {
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    std::string where = std::string(list) + "[" + std::to_string(i) + "]";
    if (p.empty()) return Status::invalid_argument(where + " is empty; give a variable name such as \"GH_TOKEN\"");
    auto bad = std::find_if(p.begin(), p.end(), [](char c) {
      return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '*');
    });
    if (bad != p.end()) {
      return Status::invalid_argument(where + " \"" + p +
                                      "\" is not a variable name: use letters, digits, '_' and '*' (any run)");
    }
  }
  return Status::ok_status();
}

}  // namespace

bool env_name_matches(std::string_view pattern, std::string_view name) {
  // Iterative glob with backtracking to the last '*'.
  size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool looks_secret(std::string_view name, const std::vector<std::string>& secret_names) {
  if (std::find(secret_names.begin(), secret_names.end(), name) != secret_names.end()) return true;
  std::string up = upper(name);
  return std::any_of(kSecretWords.begin(), kSecretWords.end(),
                     [&](std::string_view word) { return up.find(word) != std::string::npos; });
}

Status validate_tool_env(const ToolEnvOptions& options) {
  if (options.inherit != "all" && options.inherit != "core" && options.inherit != "none") {
    return Status::invalid_argument("inherit \"" + options.inherit + "\" must be \"all\", \"core\" or \"none\"");
  }
  CARAPACE_RETURN_IF_ERROR(check_patterns(options.include, "include"));
  CARAPACE_RETURN_IF_ERROR(check_patterns(options.exclude, "exclude"));
  for (const std::string& p : options.include) {
    if (std::find(options.exclude.begin(), options.exclude.end(), p) != options.exclude.end()) {
      return Status::invalid_argument("\"" + p + "\" is in both include and exclude; keep it in one");
    }
  }
  return Status::ok_status();
}

std::vector<std::string> tool_environment(const ToolEnvOptions& options, const char* const* environment) {
  std::vector<std::string> out;
  if (environment == nullptr) return out;
  for (const char* const* entry = environment; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string_view name = text.substr(0, eq);
    bool pass;
    if (matches_any(options.exclude, name)) {
      pass = false;
    } else if (matches_any(options.include, name)) {
      pass = true;
    } else if (options.inherit == "none") {
      pass = false;
    } else if (options.inherit == "core" &&
               std::none_of(kCoreNames.begin(), kCoreNames.end(),
                            [&](std::string_view core) { return env_name_matches(core, name); })) {
      pass = false;
    } else {
      pass = !looks_secret(name, options.secret_names);
    }
    if (pass) out.emplace_back(text);
  }
  return out;
}

}  // namespace carapace
