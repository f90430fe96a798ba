// Config: the runtime's configuration, from one JSON file (docs/config.md).
//
// Every key is optional and has a documented default; keys are snake_case.
// Loading warns about unknown keys (a typo must not pass silently) and
// rejects a bad value with its key path and the reason, before anything
// runs: "config.json: retry.max_retries: must be a whole number from 0 to
// 100, got -1". A plain value: copy it freely.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "actors/tool/file_tools.h"
#include "actors/hook/hooks.h"
#include "actors/session/pricing.h"
#include "actors/session/prompt.h"
#include "actors/provider/prompt_cache.h"
#include "actors/provider/retry_policy.h"
#include "actors/tool/mcp/mcp_config.h"
#include "actors/tool/remote/node_directory.h"
#include "actors/tool/shell_tool.h"
#include "base/status.h"

namespace carapace {

struct ProviderConfig {
  std::string name = "scripted";  // scripted | openai | anthropic
  std::string model = "scripted-1";
  std::string scenario;  // the scripted provider's scenario file
  uint64_t timeout_ms = 10 * 60 * 1000;  // a whole attempt, as the session waits for it
  // HTTP providers (docs/providers.md).
  std::string base_url;     // "": the provider's public API; $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL win
  // Not a config key: base_url came from the command line (--base-url), so
  // it wins over the environment too.
  bool base_url_is_explicit = false;
  std::string api_key_env;  // "": OPENAI_API_KEY / ANTHROPIC_API_KEY; the key itself is never configured
  uint64_t max_tokens = 0;  // 0: openai sends none, anthropic sends 4096
  bool has_temperature = false;
  double temperature = 0;
  bool stream = true;
  uint64_t connect_timeout_ms = 10'000;
  uint64_t first_byte_timeout_ms = 120'000;
  uint64_t idle_timeout_ms = 60'000;
  // Bounds on what a server sends (docs/config.md, "Limits").
  uint64_t max_stream_ms = 300'000;                          // one attempt, start to last byte
  uint64_t max_line_bytes = 16ull << 20;                     // one SSE line, or one event's data
  uint64_t max_response_bytes = 64ull << 20;                 // one response, streamed or not
  uint64_t max_tool_calls = 256;                             // in one reply
  uint64_t max_stored_body_bytes = 16ull << 20;              // what the body store keeps of one body
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  PromptCache cache;                                         // breakpoints or a cache key (prompt_cache.h)
};

// The base URL and key variable a provider uses when the config names none.
std::string default_base_url(const std::string& provider);
std::string default_api_key_env(const std::string& provider);

// A command hook declared in the config file (C++ hooks are registered in code).
struct HookConfig {
  std::string name;
  HookEvent event = HookEvent::kPreToolUse;
  std::string matcher;
  std::vector<std::string> command;
  uint64_t timeout_ms = 10000;
  bool fail_closed = false;  // a PreToolUse hook that fails denies the call
};

struct Config {
  std::string agent_id = "carapace";
  ProviderConfig provider;
  RetryConfig retry;

  // session
  uint64_t max_turns = 20;
  uint64_t context_max_chars = 400'000;
  std::string instructions;  // the session instructions layer
  std::string workspace;     // default workspace ("": the current directory)
  uint64_t snapshot_every_turns = 100;

  PromptConfig prompt;

  // tools
  std::vector<std::string> tools_enabled = {"shell", "read_file", "write_file", "list_dir"};
  uint64_t tool_timeout_ms = 15 * 60 * 1000;
  ShellToolOptions shell;
  FileToolOptions files;
  ToolEnvOptions tool_env;  // tools.env: the environment of every tool process
  SandboxOptions sandbox;   // tools.sandbox, tools.network, tools.sandbox_readable/_writable

  // mcp_servers: MCP servers whose tools the sessions get (docs/mcp.md).
  std::vector<McpServerConfig> mcp_servers;

  // nodes: the tools nodes some tools' calls run on (role "tools"), the
  // provider nodes that answer model calls with the keys they hold (role
  // "provider"), the collector nodes that keep a copy of every session's
  // events and build its spans (role "collector"), and node_options: how
  // the host reaches them
  // (docs/scale-out.md). Where a session runs, not what it does: not in the
  // stored configuration (tool.requested names the node of each call).
  std::vector<NodeRoute> nodes;
  std::vector<NodeRoute> provider_nodes;
  std::vector<NodeRoute> collector_nodes;
  NodeNetOptions node_net;

  bool any_nodes() const { return !nodes.empty() || !provider_nodes.empty() || !collector_nodes.empty(); }

  std::vector<HookConfig> hooks;
  // approvals: which tool calls wait for a person (docs/approvals.md); the
  // tools regex as written (compiled into the session settings).
  std::string approvals_tools;
  bool approvals_non_idempotent = false;
  uint64_t approvals_expires_after_ms = 0;  // 0: never
  std::string approvals_on_expiry = "deny";
  PriceTable prices = default_prices();

  // retention: what `carapace gc` keeps (storage/retention.h). The home's
  // policy, not a session's: not in config_to_json, so not recorded with sessions.
  uint64_t retention_max_age_days = 30;  // 0: no age limit
  uint64_t retention_max_body_bytes = 0;  // 0: no size limit

  // redaction: what the CLI masks besides the known secret patterns
  // (base/redactor.h). Also the home's, not a session's: not in config_to_json.
  std::vector<std::string> redaction_patterns;                        // regular expressions
  std::vector<std::pair<std::string, std::string>> redaction_paths;  // path prefix -> what is shown

  // The price of the scripted model, so that runs without a network show costs.
  static PriceTable default_prices();
};

// The environment variables that hold this configuration's provider keys:
// removed from every tool's environment whatever their names.
std::vector<std::string> provider_key_env_names(const ProviderConfig& provider);

// Parses `text` (named `source` in messages) over the defaults.
Status parse_config(std::string_view text, const std::string& source, Config* out,
                    std::vector<std::string>* warnings);
Status load_config(const std::string& path, Config* out, std::vector<std::string>* warnings);

// Checks a configuration built in code by the very rules (and messages) a
// config file is read by: its JSON form (config_to_json) is read back by
// parse_config, named `source` ("Runtime::Options::config: max_turns: must
// be a whole number from 1 to 100000, got 0").
Status validate_config(const Config& config, const std::string& source);

// Checks a per-session turn budget (0: the configured one) by the rule of
// session.max_turns in a config file.
Status validate_max_turns(uint64_t max_turns, const std::string& source);

// The effective configuration as JSON (every key, defaults included).
nlohmann::json config_to_json(const Config& config);

// A digest of config_to_json(), recorded in session.started.
std::string config_digest(const Config& config);

}  // namespace carapace
