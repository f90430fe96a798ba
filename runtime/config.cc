#include "runtime/config.h"

#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "base/pattern.h"
#include "base/redactor.h"
#include "actors/session/approval_policy.h"

#include "runtime/home.h"
#include "actors/tool/mcp/mcp_result.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace carapace {
namespace {

using nlohmann::json;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Walks one JSON object, checking types and ranges, naming the key path.
class Reader {
 public:
  Reader(const json& j, std::string path, const std::string& source, std::vector<std::string>* warnings)
      : j_(j), path_(std::move(path)), source_(source), warnings_(warnings) {}

  Status object() const {
    if (!j_.is_object()) return error(path_.empty() ? "the file" : path_, "must be an object");
    return Status();
  }

  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  bool has(const std::string& k) const { return j_.contains(k); }
  const std::string& source() const { return source_; }
  Reader child(const std::string& k) const { return Reader(j_[k], key(k), source_, warnings_); }
  const json& raw(const std::string& k) const { return j_[k]; }

  Status error(const std::string& where, const std::string& what) const {
    return Status::invalid_argument(source_ + ": " + where + ": " + what);
  }

  Status get(const std::string& k, uint64_t* out, uint64_t min = 0, uint64_t max = kMax) const {
    if (!has(k)) return Status();
    const json& v = j_[k];
    bool ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    uint64_t n = ok ? v.get<uint64_t>() : 0;
    if (!ok || n < min || n > max) {
      std::string range = max == kMax ? "from " + std::to_string(min)
                                      : "from " + std::to_string(min) + " to " + std::to_string(max);
      return error(key(k), "must be a whole number " + range + ", got " + v.dump());
    }
    *out = n;
    return Status();
  }

  Status get(const std::string& k, uint32_t* out, uint32_t min, uint32_t max) const {
    uint64_t v = *out;
    CARAPACE_RETURN_IF_ERROR(get(k, &v, min, max));
    *out = static_cast<uint32_t>(v);
    return Status();
  }

  Status get(const std::string& k, double* out) const {
    if (!has(k)) return Status();
    const json& v = j_[k];
    if (!v.is_number() || v.get<double>() < 0) return error(key(k), "must be a number >= 0, got " + v.dump());
    *out = v.get<double>();
    return Status();
  }

  Status get(const std::string& k, std::string* out) const {
    if (!has(k)) return Status();
    if (!j_[k].is_string()) return error(key(k), "must be a string, got " + j_[k].dump());
    *out = j_[k].get<std::string>();
    return Status();
  }

  Status get(const std::string& k, std::vector<std::string>* out) const {
    if (!has(k)) return Status();
    const json& v = j_[k];
    if (!v.is_array()) return error(key(k), "must be an array of strings, got " + v.dump());
    std::vector<std::string> items;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return error(key(k) + "[" + std::to_string(i) + "]", "must be a string");
      items.push_back(v[i].get<std::string>());
    }
    *out = std::move(items);
    return Status();
  }

  void warn(const std::string& k, const std::string& what) const {
    warnings_->push_back(source_ + ": " + key(k) + " " + what);
  }

  void warn_unknown(const std::set<std::string>& known) const {
    for (const auto& [k, v] : j_.items()) {
      if (!known.count(k)) warnings_->push_back(source_ + ": unknown key " + key(k) + " (ignored)");
    }
  }

 private:
  const json& j_;
  std::string path_;
  const std::string& source_;
  std::vector<std::string>* warnings_;
};

Status read_provider(const Reader& r, ProviderConfig* p) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"name", "model", "scenario", "timeout_ms", "base_url", "api_key_env", "max_tokens",
                  "temperature", "stream", "connect_timeout_ms", "first_byte_timeout_ms", "idle_timeout_ms",
                  "max_stream_ms", "max_line_bytes", "max_response_bytes", "max_tool_calls",
                  "max_stored_body_bytes", "headers", "cache"});
  CARAPACE_RETURN_IF_ERROR(r.get("name", &p->name));
  if (p->name != "scripted" && p->name != "openai" && p->name != "anthropic") {
    return r.error(r.key("name"), "\"" + p->name + "\" is not a provider of this build; use \"scripted\", "
                                  "\"openai\" or \"anthropic\"");
  }
  CARAPACE_RETURN_IF_ERROR(r.get("model", &p->model));
  CARAPACE_RETURN_IF_ERROR(r.get("scenario", &p->scenario));
  CARAPACE_RETURN_IF_ERROR(r.get("base_url", &p->base_url));
  if (!p->base_url.empty() && p->base_url.rfind("http://", 0) != 0 && p->base_url.rfind("https://", 0) != 0) {
    return r.error(r.key("base_url"), "must start with http:// or https://, got \"" + p->base_url + "\"");
  }
  CARAPACE_RETURN_IF_ERROR(r.get("api_key_env", &p->api_key_env));
  if (p->api_key_env.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
      std::string::npos) {
    return r.error(r.key("api_key_env"),
                   "must be the NAME of an environment variable (letters, digits, _), not a key");
  }
  CARAPACE_RETURN_IF_ERROR(r.get("max_tokens", &p->max_tokens, 0, 10'000'000));
  if (r.has("temperature") && !r.raw("temperature").is_null()) {  // null: the provider's default
    const json& v = r.raw("temperature");
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 2) {
      return r.error(r.key("temperature"), "must be a number from 0 to 2, got " + v.dump());
    }
    p->has_temperature = true;
    p->temperature = v.get<double>();
  }
  if (r.has("stream")) {
    if (!r.raw("stream").is_boolean()) return r.error(r.key("stream"), "must be true or false, got " + r.raw("stream").dump());
    p->stream = r.raw("stream").get<bool>();
  }
  CARAPACE_RETURN_IF_ERROR(r.get("connect_timeout_ms", &p->connect_timeout_ms, 1));
  CARAPACE_RETURN_IF_ERROR(r.get("first_byte_timeout_ms", &p->first_byte_timeout_ms, 1));
  CARAPACE_RETURN_IF_ERROR(r.get("idle_timeout_ms", &p->idle_timeout_ms, 1));
  CARAPACE_RETURN_IF_ERROR(r.get("max_stream_ms", &p->max_stream_ms, 1));
  CARAPACE_RETURN_IF_ERROR(r.get("max_line_bytes", &p->max_line_bytes, 1024));
  CARAPACE_RETURN_IF_ERROR(r.get("max_response_bytes", &p->max_response_bytes, 1024));
  CARAPACE_RETURN_IF_ERROR(r.get("max_tool_calls", &p->max_tool_calls, 1, 1'000'000));
  CARAPACE_RETURN_IF_ERROR(r.get("max_stored_body_bytes", &p->max_stored_body_bytes, 1024));
  if (r.has("cache")) {
    Reader c = r.child("cache");
    CARAPACE_RETURN_IF_ERROR(c.object());
    c.warn_unknown({"tools", "system", "last_messages", "ttl", "prompt_cache_key"});
    for (const char* k : {"tools", "system"}) {
      if (!c.has(k)) continue;
      if (!c.raw(k).is_boolean()) return c.error(c.key(k), "must be true or false, got " + c.raw(k).dump());
      (std::string(k) == "tools" ? p->cache.tools : p->cache.system) = c.raw(k).get<bool>();
    }
    CARAPACE_RETURN_IF_ERROR(c.get("last_messages", &p->cache.last_messages, 0, PromptCache::kMaxBreakpoints));
    CARAPACE_RETURN_IF_ERROR(c.get("ttl", &p->cache.ttl));
    CARAPACE_RETURN_IF_ERROR(c.get("prompt_cache_key", &p->cache.prompt_cache_key));
    CARAPACE_RETURN_IF_ERROR(check_prompt_cache(p->cache, p->name, r.source() + ": " + r.key("cache")));
  }
  if (r.has("headers")) {
    const json& v = r.raw("headers");
    p->headers.clear();
    if (v.is_array()) {
      // The form stored with a session: names only, since a value may be a
      // credential. Such headers are not sent.
      for (const auto& name : v) {
        r.warn("headers", "header " + name.dump() +
                              " was stored without its value (it may be a credential) and is not sent; pass "
                              "--config with the header to send it");
      }
      return r.get("timeout_ms", &p->timeout_ms, 1);
    }
    if (!v.is_object()) return r.error(r.key("headers"), "must be an object of header names to string values");
    for (const auto& [k, val] : v.items()) {
      if (!val.is_string()) return r.error(r.key("headers") + "." + k, "must be a string");
      if (k.empty() || k.find_first_of(": \r\n") != std::string::npos)
        return r.error(r.key("headers") + "." + k, "is not a valid header name");
      std::string value = val.get<std::string>();
      if (value.find_first_of("\r\n") != std::string::npos)
        return r.error(r.key("headers") + "." + k, "must not contain a line break");
      p->headers.emplace_back(k, value);
    }
  }
  return r.get("timeout_ms", &p->timeout_ms, 1);
}

Status read_retry(const Reader& r, RetryConfig* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"max_retries", "base_delay_ms", "max_delay_ms", "retryable_statuses"});
  CARAPACE_RETURN_IF_ERROR(r.get("max_retries", &c->max_retries, 0, 100));
  CARAPACE_RETURN_IF_ERROR(r.get("base_delay_ms", &c->base_delay_ms, 0, 3'600'000));
  CARAPACE_RETURN_IF_ERROR(r.get("max_delay_ms", &c->max_delay_ms, 0, 3'600'000));
  if (c->base_delay_ms > c->max_delay_ms) {
    return r.error(r.key("base_delay_ms"), "is " + std::to_string(c->base_delay_ms) +
                                               ", more than max_delay_ms (" +
                                               std::to_string(c->max_delay_ms) + ")");
  }
  if (r.has("retryable_statuses")) {
    const json& v = r.raw("retryable_statuses");
    if (!v.is_array()) return r.error(r.key("retryable_statuses"), "must be an array of HTTP statuses");
    c->retryable_statuses.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer() || v[i].get<int64_t>() < 100 || v[i].get<int64_t>() > 599) {
        return r.error(r.key("retryable_statuses") + "[" + std::to_string(i) + "]",
                       "must be an HTTP status (100-599)");
      }
      c->retryable_statuses.push_back(v[i].get<uint32_t>());
    }
  }
  return Status();
}

Status read_session(const Reader& r, Config* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"max_turns", "context_max_chars", "instructions", "workspace", "snapshot_every_turns"});
  CARAPACE_RETURN_IF_ERROR(r.get("max_turns", &c->max_turns, 1, 1'000'000));
  CARAPACE_RETURN_IF_ERROR(r.get("context_max_chars", &c->context_max_chars, 0));
  CARAPACE_RETURN_IF_ERROR(r.get("instructions", &c->instructions));
  CARAPACE_RETURN_IF_ERROR(r.get("workspace", &c->workspace));
  return r.get("snapshot_every_turns", &c->snapshot_every_turns, 0);
}

Status read_retention(const Reader& r, Config* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"max_age_days", "max_body_bytes"});
  CARAPACE_RETURN_IF_ERROR(r.get("max_age_days", &c->retention_max_age_days, 0, 100'000));
  return r.get("max_body_bytes", &c->retention_max_body_bytes, 0);
}

Status read_approvals(const Reader& r, Config* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"tools", "non_idempotent", "expires_after", "on_expiry"});
  CARAPACE_RETURN_IF_ERROR(r.get("tools", &c->approvals_tools));
  if (!c->approvals_tools.empty()) {
    Pattern check;
    Status compiled = Pattern::compile(c->approvals_tools, &check);
    if (!compiled.ok()) return r.error(r.key("tools"), compiled.message());
  }
  if (r.has("non_idempotent")) {
    const json& v = r.raw("non_idempotent");
    if (!v.is_boolean()) return r.error(r.key("non_idempotent"), "must be true or false, got " + v.dump());
    c->approvals_non_idempotent = v.get<bool>();
  }
  if (r.has("expires_after")) {
    const json& v = r.raw("expires_after");
    uint64_t ms = 0;
    if (v.is_number_unsigned()) {
      ms = v.get<uint64_t>();  // 0: never
    } else if (!v.is_string() || !parse_expiry(v.get<std::string>(), &ms)) {
      return r.error(r.key("expires_after"),
                     "must be a duration such as \"90s\", \"30m\", \"24h\", \"7d\" (or milliseconds; 0: never), got " +
                         v.dump());
    }
    c->approvals_expires_after_ms = ms;
  }
  CARAPACE_RETURN_IF_ERROR(r.get("on_expiry", &c->approvals_on_expiry));
  if (c->approvals_on_expiry != "deny" && c->approvals_on_expiry != "approve") {
    return r.error(r.key("on_expiry"), "must be \"deny\" or \"approve\", got \"" + c->approvals_on_expiry + "\"");
  }
  return Status();
}

Status read_redaction(const Reader& r, Config* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"patterns", "paths"});
  CARAPACE_RETURN_IF_ERROR(r.get("patterns", &c->redaction_patterns));
  if (r.has("paths")) {
    const json& paths = r.raw("paths");
    if (!paths.is_object()) return r.error(r.key("paths"), "must be an object: {\"/absolute/path\": \"shown as\"}");
    for (const auto& [from, to] : paths.items()) {
      if (from.empty() || from[0] != '/' || !to.is_string()) {
        return r.error(r.key("paths") + "." + from, "must map an absolute path to a string");
      }
      c->redaction_paths.emplace_back(from, to.get<std::string>());
    }
  }
  // A pattern that is not a regular expression is named now, not at the first output.
  for (size_t i = 0; i < c->redaction_patterns.size(); ++i) {
    Pattern check;
    Status compiled = Pattern::compile(c->redaction_patterns[i], &check);
    if (!compiled.ok()) return r.error(r.key("patterns") + "[" + std::to_string(i) + "]", compiled.message());
  }
  return Status();
}

Status read_prompt(const Reader& r, PromptConfig* p) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"identity", "identity_file", "custom_instructions_file", "workflows"});
  CARAPACE_RETURN_IF_ERROR(r.get("identity", &p->identity));
  CARAPACE_RETURN_IF_ERROR(r.get("identity_file", &p->identity_file));
  CARAPACE_RETURN_IF_ERROR(r.get("custom_instructions_file", &p->custom_instructions_file));
  if (r.has("workflows")) {
    const json& v = r.raw("workflows");
    if (!v.is_array()) return r.error(r.key("workflows"), "must be an array of {\"name\", \"description\"}");
    p->workflows.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      WorkflowEntry entry;
      if (!v[i].is_object() || !v[i].contains("name") || !v[i]["name"].is_string()) {
        return r.error(r.key("workflows") + "[" + std::to_string(i) + "]", "needs a \"name\" string");
      }
      entry.name = v[i]["name"];
      if (v[i].contains("description")) {
        if (!v[i]["description"].is_string()) {
          return r.error(r.key("workflows") + "[" + std::to_string(i) + "].description", "must be a string");
        }
        entry.description = v[i]["description"];
      }
      p->workflows.push_back(std::move(entry));
    }
  }
  return Status();
}

Status read_tools(const Reader& r, Config* c) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"enabled", "call_timeout_ms", "shell", "files", "env", "sandbox", "network", "sandbox_readable",
                  "sandbox_writable"});
  CARAPACE_RETURN_IF_ERROR(r.get("enabled", &c->tools_enabled));
  static const std::set<std::string> kBuiltins = {"shell", "read_file", "write_file", "list_dir", "ask_user"};
  for (size_t i = 0; i < c->tools_enabled.size(); ++i) {
    if (!kBuiltins.count(c->tools_enabled[i])) {
      return r.error(
          r.key("enabled") + "[" + std::to_string(i) + "]",
          "\"" + c->tools_enabled[i] + "\" is not a built-in tool (shell, read_file, write_file, list_dir, ask_user)");
    }
  }
  CARAPACE_RETURN_IF_ERROR(r.get("call_timeout_ms", &c->tool_timeout_ms, 1));
  if (r.has("shell")) {
    Reader s = r.child("shell");
    CARAPACE_RETURN_IF_ERROR(s.object());
    s.warn_unknown({"timeout_ms", "max_timeout_ms", "max_output_bytes", "blocked_patterns"});
    CARAPACE_RETURN_IF_ERROR(s.get("timeout_ms", &c->shell.timeout_ms, 1));
    CARAPACE_RETURN_IF_ERROR(s.get("max_timeout_ms", &c->shell.max_timeout_ms, 1));
    CARAPACE_RETURN_IF_ERROR(s.get("max_output_bytes", &c->shell.max_output_bytes, 256));
    CARAPACE_RETURN_IF_ERROR(s.get("blocked_patterns", &c->shell.blocked_patterns));
    // Each check names its own key.
    if (c->shell.timeout_ms > c->shell.max_timeout_ms) {
      return s.error(s.key("timeout_ms"), "is " + std::to_string(c->shell.timeout_ms) + ", more than " +
                                              s.key("max_timeout_ms") + " (" +
                                              std::to_string(c->shell.max_timeout_ms) + ")");
    }
    ShellToolOptions patterns_only;
    patterns_only.blocked_patterns = c->shell.blocked_patterns;
    Status valid = validate_shell_options(patterns_only);
    if (!valid.ok()) return s.error(s.key("blocked_patterns"), valid.message());
  }
  CARAPACE_RETURN_IF_ERROR(r.get("sandbox", &c->sandbox.mode));
  if (c->sandbox.mode != "auto" && c->sandbox.mode != "off" && c->sandbox.mode != "workspace-write" &&
      c->sandbox.mode != "read-only") {
    return r.error(r.key("sandbox"), "must be \"auto\", \"off\", \"workspace-write\" or \"read-only\", got \"" +
                                         c->sandbox.mode + "\"");
  }
  CARAPACE_RETURN_IF_ERROR(r.get("network", &c->sandbox.network));
  if (c->sandbox.network != "on" && c->sandbox.network != "off") {
    return r.error(r.key("network"), "must be \"on\" or \"off\", got \"" + c->sandbox.network + "\"");
  }
  for (const char* key : {"sandbox_readable", "sandbox_writable"}) {
    std::vector<std::string>* paths =
        std::string(key) == "sandbox_readable" ? &c->sandbox.readable : &c->sandbox.writable;
    CARAPACE_RETURN_IF_ERROR(r.get(key, paths));
    for (size_t i = 0; i < paths->size(); ++i) {
      if ((*paths)[i].empty() || (*paths)[i][0] != '/') {
        return r.error(r.key(key) + "[" + std::to_string(i) + "]",
                       "must be an absolute path, got \"" + (*paths)[i] + "\"");
      }
    }
  }
  if (r.has("env")) {
    Reader e = r.child("env");
    CARAPACE_RETURN_IF_ERROR(e.object());
    e.warn_unknown({"inherit", "include", "exclude"});
    CARAPACE_RETURN_IF_ERROR(e.get("inherit", &c->tool_env.inherit));
    CARAPACE_RETURN_IF_ERROR(e.get("include", &c->tool_env.include));
    CARAPACE_RETURN_IF_ERROR(e.get("exclude", &c->tool_env.exclude));
    // The message names the field: "tools.env: include[2] is empty; ...".
    if (Status valid = validate_tool_env(c->tool_env); !valid.ok()) return r.error(r.key("env"), valid.message());
  }
  if (r.has("files")) {
    Reader f = r.child("files");
    CARAPACE_RETURN_IF_ERROR(f.object());
    f.warn_unknown({"max_read_bytes", "max_write_bytes", "max_list_entries"});
    CARAPACE_RETURN_IF_ERROR(f.get("max_read_bytes", &c->files.max_read_bytes, 1));
    CARAPACE_RETURN_IF_ERROR(f.get("max_write_bytes", &c->files.max_write_bytes, 1));
    CARAPACE_RETURN_IF_ERROR(f.get("max_list_entries", &c->files.max_list_entries, 1));
  }
  return Status();
}

Status read_hooks(const Reader& r, const json& v, std::vector<HookConfig>* hooks) {
  if (!v.is_array()) return r.error(r.key("hooks"), "must be an array of hooks");
  hooks->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = r.key("hooks") + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return r.error(where, "must be an object");
    for (const auto& [k, value] : v[i].items()) {
      static const std::set<std::string> kKnown = {"name", "event", "matcher", "command", "timeout_ms", "fail_closed"};
      if (!kKnown.count(k)) return r.error(where, "unknown key \"" + k + "\"");
    }
    HookConfig hook;
    auto str = [&](const char* k, std::string* out) -> Status {
      if (!v[i].contains(k)) return Status();
      if (!v[i][k].is_string()) return r.error(where + "." + k, "must be a string");
      *out = v[i][k];
      return Status();
    };
    CARAPACE_RETURN_IF_ERROR(str("name", &hook.name));
    if (hook.name.empty()) return r.error(where + ".name", "is required");
    std::string event;
    CARAPACE_RETURN_IF_ERROR(str("event", &event));
    auto parsed = hook_event_from_name(event);
    if (!parsed) {
      return r.error(where + ".event", "\"" + event +
                                           "\" is not a hook event (AgentStart, TurnStart, TurnEnd, "
                                           "PreToolUse, PostToolUse, PostToolUseFailure, AgentStop)");
    }
    hook.event = *parsed;
    CARAPACE_RETURN_IF_ERROR(str("matcher", &hook.matcher));
    Pattern check;
    Status compiled = Pattern::compile(hook.matcher, &check);
    if (!compiled.ok()) return r.error(where + ".matcher", compiled.message());
    const json& cmd = v[i].contains("command") ? v[i]["command"] : json();
    if (cmd.is_string()) {
      hook.command = {"/bin/sh", "-c", cmd.get<std::string>()};
    } else if (cmd.is_array() && !cmd.empty() &&
               std::all_of(cmd.begin(), cmd.end(), [](const json& a) { return a.is_string(); })) {
      for (const auto& a : cmd) hook.command.push_back(a);
    } else {
      return r.error(where + ".command", "must be a command line string or an array of strings");
    }
    if (v[i].contains("timeout_ms")) {
      const json& t = v[i]["timeout_ms"];
      if (!t.is_number_unsigned() || t.get<uint64_t>() == 0)
        return r.error(where + ".timeout_ms", "must be a whole number >= 1");
      hook.timeout_ms = t;
    }
    if (v[i].contains("fail_closed")) {
      if (!v[i]["fail_closed"].is_boolean()) return r.error(where + ".fail_closed", "must be true or false");
      hook.fail_closed = v[i]["fail_closed"].get<bool>();
    }
    hooks->push_back(std::move(hook));
  }
  return Status();
}

bool env_name_ok(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

Status read_mcp_servers(const Reader& r, const json& v, std::vector<McpServerConfig>* servers) {
  if (!v.is_object()) {
    return r.error(r.key("mcp_servers"), "must be an object of server name -> {\"command\", \"args\", \"env\", "
                                         "\"cwd\", \"timeout_ms\"}");
  }
  servers->clear();
  for (const auto& [name, entry] : v.items()) {
    std::string where = r.key("mcp_servers") + "." + name;
    if (Status s = mcp::validate_server_name(name); !s.ok()) return r.error(where, s.message());
    if (!entry.is_object()) return r.error(where, "must be an object with at least \"command\"");
    McpServerConfig c;
    c.name = name;
    for (const auto& [k, value] : entry.items()) {
      static const std::set<std::string> kKnown = {"command",
                                                   "args",
                                                   "env",
                                                   "cwd",
                                                   "timeout_ms",
                                                   "type",
                                                   "max_message_bytes",
                                                   "max_stderr_bytes",
                                                   "stderr_lines_per_second"};
      if (!kKnown.count(k)) {
        return r.error(where, "unknown key \"" + k +
                                  "\" (known: command, args, env, cwd, timeout_ms, max_message_bytes, "
                                  "max_stderr_bytes, stderr_lines_per_second)");
      }
    }
    if (entry.contains("type") && entry["type"] != "stdio") {
      return r.error(where + ".type", "only the stdio transport is supported, got " + entry["type"].dump());
    }
    if (!entry.contains("command") || !entry["command"].is_string() || entry["command"].get<std::string>().empty()) {
      return r.error(where + ".command", "is required: the program that runs the server, as a string");
    }
    c.command = entry["command"];
    if (entry.contains("args")) {
      const json& a = entry["args"];
      if (!a.is_array()) return r.error(where + ".args", "must be an array of strings");
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_string()) return r.error(where + ".args[" + std::to_string(i) + "]", "must be a string");
        c.args.push_back(a[i]);
      }
    }
    if (entry.contains("env")) {
      const json& env = entry["env"];
      if (!env.is_object()) return r.error(where + ".env", "must be an object of variable names to string values");
      for (const auto& [k, val] : env.items()) {
        if (!env_name_ok(k)) return r.error(where + ".env." + k, "is not a valid environment variable name");
        if (val.is_null()) {
          c.env.emplace_back(k, std::nullopt);
        } else if (val.is_string()) {
          c.env.emplace_back(k, val.get<std::string>());
        } else {
          return r.error(where + ".env." + k, "must be a string (or null: carapace's own value)");
        }
      }
    }
    if (entry.contains("cwd")) {
      if (!entry["cwd"].is_string()) return r.error(where + ".cwd", "must be a string");
      c.cwd = entry["cwd"];
    }
    if (entry.contains("timeout_ms")) {
      const json& t = entry["timeout_ms"];
      if (!t.is_number_unsigned() || t.get<uint64_t>() == 0 || t.get<uint64_t>() > 3'600'000)
        return r.error(where + ".timeout_ms", "must be a whole number from 1 to 3600000, got " + t.dump());
      c.timeout_ms = t;
    }
    struct Bound {
      const char* key;
      uint64_t* value;
      uint64_t min;
    } bounds[] = {{"max_message_bytes", &c.max_message_bytes, 1024},
                  {"max_stderr_bytes", &c.max_stderr_bytes, 0},
                  {"stderr_lines_per_second", &c.stderr_lines_per_second, 0}};
    for (const Bound& b : bounds) {
      if (!entry.contains(b.key)) continue;
      const json& t = entry[b.key];
      if (!t.is_number_unsigned() || t.get<uint64_t>() < b.min) {
        return r.error(where + "." + b.key,
                       "must be a whole number from " + std::to_string(b.min) + ", got " + t.dump());
      }
      *b.value = t;
    }
    servers->push_back(std::move(c));
  }
  return Status();
}

Status read_nodes(const Reader& r, const json& v, std::vector<NodeRoute>* nodes,
                  std::vector<NodeRoute>* provider_nodes, std::vector<NodeRoute>* collector_nodes) {
  const std::string at = r.key("nodes");
  if (!v.is_array()) {
    return r.error(at, "must be an array of {\"name\", \"role\": \"tools\", \"address\": \"host:port\", "
                       "\"tools\": [...]} or {\"name\", \"role\": \"provider\" or \"collector\", \"address\": "
                       "\"host:port\"}");
  }
  if (v.size() > 64) return r.error(at, "names " + std::to_string(v.size()) + " nodes; at most 64");
  nodes->clear();
  provider_nodes->clear();
  collector_nodes->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = at + "[" + std::to_string(i) + "]";
    const json& n = v[i];
    if (!n.is_object()) return r.error(where, "must be an object");
    for (const auto& [k, value] : n.items()) {
      if (k != "name" && k != "role" && k != "address" && k != "tools") {
        return r.error(where, "unknown key \"" + k + "\" (known: name, role, address, tools)");
      }
    }
    const std::string role = n.contains("role") && n["role"].is_string() ? n["role"].get<std::string>() : "";
    if (role != "tools" && role != "provider" && role != "collector") {
      return r.error(where + ".role", "must be \"tools\", \"provider\" or \"collector\"");
    }
    NodeRoute route;
    if (!n.contains("address") || !n["address"].is_string()) return r.error(where + ".address", "is required: \"host:port\"");
    route.address = n["address"].get<std::string>();
    std::string host;
    uint16_t port = 0;
    if (Status s = parse_node_address(route.address, &host, &port); !s.ok()) return r.error(where + ".address", s.message());
    route.name = n.contains("name") && n["name"].is_string() ? n["name"].get<std::string>() : route.address;
    if (route.name.empty() || route.name.size() > 64 ||
        route.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") !=
            std::string::npos) {
      return r.error(where + ".name", "must be 1 to 64 of letters, digits, . _ : -");
    }
    for (const auto* list : {nodes, provider_nodes, collector_nodes}) {
      for (const auto& other : *list) {
        if (other.name == route.name) return r.error(where + ".name", "\"" + route.name + "\" names two nodes");
      }
    }
    if (role == "provider" || role == "collector") {
      if (n.contains("tools")) {
        return r.error(where + ".tools", role == "provider"
                                             ? "is for tools nodes; a provider node answers every model call"
                                             : "is for tools nodes; a collector node gets every session's events");
      }
      (role == "provider" ? provider_nodes : collector_nodes)->push_back(std::move(route));
      continue;
    }
    if (!n.contains("tools") || !n["tools"].is_array() || n["tools"].empty()) {
      return r.error(where + ".tools", "is required: the tools whose calls run there, e.g. [\"shell\", \"read_file\"]");
    }
    for (size_t t = 0; t < n["tools"].size(); ++t) {
      const json& name = n["tools"][t];
      if (!name.is_string() || name.get<std::string>().empty()) {
        return r.error(where + ".tools[" + std::to_string(t) + "]", "must be a tool name (or a prefix ending in *)");
      }
      route.tools.push_back(name.get<std::string>());
    }
    nodes->push_back(std::move(route));
  }
  return Status();
}

Status read_node_options(const Reader& r, NodeNetOptions* o) {
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"tls", "insecure_loopback", "heartbeat_ms", "connection_timeout_ms", "fallback"});
  CARAPACE_RETURN_IF_ERROR(r.get("tls", &o->tls_dir));
  if (r.has("insecure_loopback")) {
    if (!r.raw("insecure_loopback").is_boolean()) return r.error(r.key("insecure_loopback"), "must be true or false");
    o->insecure_loopback = r.raw("insecure_loopback").get<bool>();
  }
  CARAPACE_RETURN_IF_ERROR(r.get("heartbeat_ms", &o->heartbeat_ms, 50, 60'000));
  CARAPACE_RETURN_IF_ERROR(r.get("connection_timeout_ms", &o->connection_timeout_ms, 100, 600'000));
  if (o->connection_timeout_ms < 2 * o->heartbeat_ms) {
    return r.error(r.key("connection_timeout_ms"), "must be at least two heartbeats (" +
                                                       std::to_string(2 * o->heartbeat_ms) + " ms)");
  }
  std::string fallback = "refuse";
  CARAPACE_RETURN_IF_ERROR(r.get("fallback", &fallback));
  if (fallback != "refuse" && fallback != "local") {
    return r.error(r.key("fallback"), "must be \"refuse\" (a routed call fails while no node is up) or \"local\" "
                                      "(it runs in this process)");
  }
  o->fallback = fallback == "local" ? NodeFallback::kLocal : NodeFallback::kRefuse;
  return Status();
}

Status read_prices(const Reader& r, const json& v, PriceTable* prices) {
  if (!v.is_object()) return r.error(r.key("prices"), "must be an object of model -> prices");
  for (const auto& [model, p] : v.items()) {
    std::string where = r.key("prices") + "." + model;
    if (!p.is_object()) return r.error(where, "must be an object");
    ModelPrice price;
    static const std::set<std::string> kKnown = {"input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
                                                 "cache_write_per_mtok"};
    for (const auto& [k, value] : p.items()) {
      if (!kKnown.count(k)) return r.error(where, "unknown key \"" + k + "\"");
      if (!value.is_number() || value.get<double>() < 0)
        return r.error(where + "." + k, "must be a number >= 0");
    }
    price.input_per_mtok = p.value("input_per_mtok", 0.0);
    price.output_per_mtok = p.value("output_per_mtok", 0.0);
    price.cache_read_per_mtok = p.value("cache_read_per_mtok", 0.0);
    price.cache_write_per_mtok = p.value("cache_write_per_mtok", 0.0);
    (*prices)[model] = price;
  }
  return Status();
}

}  // namespace

std::vector<std::string> provider_key_env_names(const ProviderConfig&) {
  // Every provider this build knows reads one of these; a configured
  // api_key_env joins them when HTTP providers land.
  return {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"};
}

PriceTable Config::default_prices() {
  return PriceTable{{"scripted-1", ModelPrice{.input_per_mtok = 3.0,
                                              .output_per_mtok = 15.0,
                                              .cache_read_per_mtok = 0.3,
                                              .cache_write_per_mtok = 3.75}}};
}

Status parse_config(std::string_view text, const std::string& source, Config* out,
                    std::vector<std::string>* warnings) {
  json doc;
  CARAPACE_RETURN_IF_ERROR(parse_bounded_json(text, source, &doc));
  Config c;
  Reader r(doc, "", source, warnings);
  CARAPACE_RETURN_IF_ERROR(r.object());
  r.warn_unknown({"agent_id", "provider", "retry", "session", "prompt", "tools", "hooks", "approvals", "prices",
                  "retention", "redaction", "mcp_servers", "nodes", "node_options",
                  "schedules"});  // read by carapace serve (docs/schedules.md)
  CARAPACE_RETURN_IF_ERROR(r.get("agent_id", &c.agent_id));
  if (r.has("provider")) CARAPACE_RETURN_IF_ERROR(read_provider(r.child("provider"), &c.provider));
  if (r.has("retry")) CARAPACE_RETURN_IF_ERROR(read_retry(r.child("retry"), &c.retry));
  if (r.has("session")) CARAPACE_RETURN_IF_ERROR(read_session(r.child("session"), &c));
  if (r.has("prompt")) CARAPACE_RETURN_IF_ERROR(read_prompt(r.child("prompt"), &c.prompt));
  if (r.has("tools")) CARAPACE_RETURN_IF_ERROR(read_tools(r.child("tools"), &c));
  if (r.has("hooks")) CARAPACE_RETURN_IF_ERROR(read_hooks(r, doc["hooks"], &c.hooks));
  if (r.has("approvals")) CARAPACE_RETURN_IF_ERROR(read_approvals(r.child("approvals"), &c));
  if (r.has("prices")) CARAPACE_RETURN_IF_ERROR(read_prices(r, doc["prices"], &c.prices));
  if (r.has("retention")) CARAPACE_RETURN_IF_ERROR(read_retention(r.child("retention"), &c));
  if (r.has("redaction")) CARAPACE_RETURN_IF_ERROR(read_redaction(r.child("redaction"), &c));
  if (r.has("mcp_servers")) CARAPACE_RETURN_IF_ERROR(read_mcp_servers(r, doc["mcp_servers"], &c.mcp_servers));
  if (r.has("nodes")) CARAPACE_RETURN_IF_ERROR(read_nodes(r, doc["nodes"], &c.nodes, &c.provider_nodes, &c.collector_nodes));
  if (r.has("node_options")) CARAPACE_RETURN_IF_ERROR(read_node_options(r.child("node_options"), &c.node_net));
  if (c.any_nodes() && !c.node_net.insecure_loopback && c.node_net.tls_dir.empty()) {
    return r.error(r.key("node_options") + ".tls",
                   "is required with nodes: the directory of this host's certificate (carapace node certs makes "
                   "one), or \"insecure_loopback\": true for plain TCP on 127.0.0.1");
  }
  if (c.node_net.insecure_loopback) {
    for (const auto* list : {&c.nodes, &c.provider_nodes, &c.collector_nodes}) {
      for (const auto& n : *list) {
        if (n.address.rfind("127.0.0.1:", 0) != 0) {
          return r.error(r.key("node_options") + ".insecure_loopback",
                         "allows plain TCP to 127.0.0.1 only; node " + n.name + " is at " + n.address);
        }
      }
    }
  }
  if (!c.provider_nodes.empty() && c.provider.name != "openai" && c.provider.name != "anthropic") {
    return r.error(r.key("nodes"), "names provider nodes, but the provider is \"" + c.provider.name +
                                       "\": provider nodes answer for \"openai\" or \"anthropic\" providers");
  }
  *out = std::move(c);
  return Status();
}

Status load_config(const std::string& path, Config* out, std::vector<std::string>* warnings) {
  CARAPACE_RETURN_IF_ERROR(check_trusted_file(path, "config file"));
  std::string text;
  CARAPACE_RETURN_IF_ERROR(read_bounded_file(path, limits::kConfigFileBytes, "the config file", &text));
  CARAPACE_RETURN_IF_ERROR(parse_config(text, path, out, warnings));
  // The prompt files this machine's own config names are looked at now, so a
  // mistake shows at start-up; a stored configuration's never are.
  const PromptConfig& p = out->prompt;
  if (!p.identity_file.empty()) {
    Status read = read_bounded_file(p.identity_file, limits::kPromptFileBytes, "the identity file", &text);
    if (!read.ok() && warnings) {
      warnings->push_back(path + ": prompt.identity_file: " + read.message() + "; the identity is " +
                          (p.identity.empty() ? "the built-in one" : "prompt.identity") +
                          " until it can be read");
    }
  }
  if (!p.custom_instructions_file.empty()) {
    Status read = read_bounded_file(p.custom_instructions_file, limits::kPromptFileBytes,
                                    "the custom instructions file", &text);
    if (!read.ok() && !read.is_not_found() && warnings) {
      warnings->push_back(path + ": prompt.custom_instructions_file: " + read.message() + "; it is skipped");
    }
  }
  // A hook's program named by path must be as trustworthy as the config.
  for (const auto& hook : out->hooks) {
    if (hook.command.empty()) continue;
    std::string program = hook.command[0];
    if (hook.command.size() == 3 && hook.command[0] == "/bin/sh" && hook.command[1] == "-c") {
      const std::string& line = hook.command[2];
      size_t start = line.find_first_not_of(" \t");
      size_t end = line.find_first_of(" \t;|&<>()", start == std::string::npos ? 0 : start);
      program = start == std::string::npos ? "" : line.substr(start, end == std::string::npos ? end : end - start);
    }
    Status trusted = check_hook_program(program);
    if (!trusted.ok()) return trusted.with_context(path + ": hook '" + hook.name + "'");
  }
  return Status();
}

Status validate_config(const Config& config, const std::string& source) {
  std::vector<std::string> warnings;
  Config read_back;
  json j = config_to_json(config);
  // What the JSON form keeps of these is not their file form: the headers'
  // names only (a value may be a credential), an unset temperature as null.
  j["provider"].erase("headers");
  if (j["provider"]["temperature"].is_null()) j["provider"].erase("temperature");
  return parse_config(j.dump(), source, &read_back, &warnings);
}

Status validate_max_turns(uint64_t max_turns, const std::string& source) {
  if (max_turns == 0) return Status();
  std::vector<std::string> warnings;
  Config read_back;
  return parse_config(json{{"session", {{"max_turns", max_turns}}}}.dump(), source, &read_back, &warnings);
}

json config_to_json(const Config& c) {
  json hooks = json::array();
  for (const auto& h : c.hooks) {
    hooks.push_back({{"name", h.name},
                     {"event", std::string(hook_event_name(h.event))},
                     {"matcher", h.matcher},
                     {"command", h.command},
                     {"timeout_ms", h.timeout_ms}});
    if (h.fail_closed) hooks.back()["fail_closed"] = true;  // absent when false: older digests stand
  }
  json workflows = json::array();
  for (const auto& w : c.prompt.workflows)
    workflows.push_back({{"name", w.name}, {"description", w.description}});
  json prices = json::object();
  for (const auto& [model, p] : c.prices) {
    prices[model] = {{"input_per_mtok", p.input_per_mtok},
                     {"output_per_mtok", p.output_per_mtok},
                     {"cache_read_per_mtok", p.cache_read_per_mtok},
                     {"cache_write_per_mtok", p.cache_write_per_mtok}};
  }
  json out{
      {"agent_id", c.agent_id},
      {"provider",
       {{"name", c.provider.name},
        {"model", c.provider.model},
        {"scenario", c.provider.scenario},
        {"timeout_ms", c.provider.timeout_ms},
        {"base_url", c.provider.base_url},
        {"api_key_env", c.provider.api_key_env},
        {"max_tokens", c.provider.max_tokens},
        {"temperature", c.provider.has_temperature ? json(c.provider.temperature) : json(nullptr)},
        {"stream", c.provider.stream},
        {"connect_timeout_ms", c.provider.connect_timeout_ms},
        {"first_byte_timeout_ms", c.provider.first_byte_timeout_ms},
        {"idle_timeout_ms", c.provider.idle_timeout_ms},
        {"max_stream_ms", c.provider.max_stream_ms},
        {"max_line_bytes", c.provider.max_line_bytes},
        {"max_response_bytes", c.provider.max_response_bytes},
        {"max_tool_calls", c.provider.max_tool_calls},
        {"max_stored_body_bytes", c.provider.max_stored_body_bytes},
        // Names only: a header value may be a credential.
        {"headers", [&c] {
           json names = json::array();
           for (const auto& h : c.provider.headers) names.push_back(h.first);
           return names;
         }()}}},
      {"retry",
       {{"max_retries", c.retry.max_retries},
        {"base_delay_ms", c.retry.base_delay_ms},
        {"max_delay_ms", c.retry.max_delay_ms},
        {"retryable_statuses", c.retry.retryable_statuses}}},
      {"session",
       {{"max_turns", c.max_turns},
        {"context_max_chars", c.context_max_chars},
        {"instructions", c.instructions},
        {"workspace", c.workspace},
        {"snapshot_every_turns", c.snapshot_every_turns}}},
      {"prompt",
       {{"identity", c.prompt.identity},
        {"identity_file", c.prompt.identity_file},
        {"custom_instructions_file", c.prompt.custom_instructions_file},
        {"workflows", workflows}}},
      {"tools",
       {{"enabled", c.tools_enabled},
        {"call_timeout_ms", c.tool_timeout_ms},
        {"shell",
         {{"timeout_ms", c.shell.timeout_ms},
          {"max_timeout_ms", c.shell.max_timeout_ms},
          {"max_output_bytes", c.shell.max_output_bytes},
          {"blocked_patterns", c.shell.blocked_patterns}}},
        {"env", {{"inherit", c.tool_env.inherit}, {"include", c.tool_env.include}, {"exclude", c.tool_env.exclude}}},
        {"sandbox", c.sandbox.mode},
        {"network", c.sandbox.network},
        {"sandbox_readable", c.sandbox.readable},
        {"sandbox_writable", c.sandbox.writable},
        {"files",
         {{"max_read_bytes", c.files.max_read_bytes},
          {"max_write_bytes", c.files.max_write_bytes},
          {"max_list_entries", c.files.max_list_entries}}}}},
      {"hooks", hooks},
      {"prices", prices},
  };
  // Only when set: the stored configuration, and so the digest, of a
  // session without a policy stays what it was.
  if (!c.approvals_tools.empty() || c.approvals_non_idempotent || c.approvals_expires_after_ms != 0 ||
      c.approvals_on_expiry != "deny") {
    out["approvals"] = {{"tools", c.approvals_tools},
                        {"non_idempotent", c.approvals_non_idempotent},
                        {"expires_after", c.approvals_expires_after_ms},
                        {"on_expiry", c.approvals_on_expiry}};
  }
  // Only when there are servers: the stored configuration, and so the
  // digest, of a session without them stays what it was.
  if (!c.mcp_servers.empty()) {
    json servers = json::object();
    for (const auto& m : c.mcp_servers) {
      json env = json::object();
      // A value whose name looks secret is not stored: a resumed session
      // takes it from carapace's environment.
      for (const auto& [name, value] : m.env) {
        env[name] = value && !looks_secret(name, provider_key_env_names(c.provider)) ? json(*value) : json(nullptr);
      }
      servers[m.name] = {{"command", m.command},
                         {"args", m.args},
                         {"env", env},
                         {"cwd", m.cwd},
                         {"timeout_ms", m.timeout_ms},
                         {"max_message_bytes", m.max_message_bytes},
                         {"max_stderr_bytes", m.max_stderr_bytes},
                         {"stderr_lines_per_second", m.stderr_lines_per_second}};
    }
    out["mcp_servers"] = servers;
  }
  // Only when set: older sessions' digests stand.
  if (c.provider.cache.any()) {
    const PromptCache& pc = c.provider.cache;
    json cache = json::object();
    if (pc.tools) cache["tools"] = true;
    if (pc.system) cache["system"] = true;
    if (pc.last_messages) cache["last_messages"] = pc.last_messages;
    if (!pc.ttl.empty()) cache["ttl"] = pc.ttl;
    if (!pc.prompt_cache_key.empty()) cache["prompt_cache_key"] = pc.prompt_cache_key;
    out["provider"]["cache"] = cache;
  }
  return out;
}

std::string default_base_url(const std::string& provider) {
  if (provider == "openai") return "https://api.openai.com/v1";
  if (provider == "anthropic") return "https://api.anthropic.com";
  return "";
}

std::string default_api_key_env(const std::string& provider) {
  if (provider == "openai") return "OPENAI_API_KEY";
  if (provider == "anthropic") return "ANTHROPIC_API_KEY";
  return "";
}

std::string config_digest(const Config& config) { return digest128(config_to_json(config).dump()).hex(); }

}  // namespace carapace
