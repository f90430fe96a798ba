// carapace node: a tools, provider or collector node (docs/scale-out.md), and its certificates.
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/actor_scheduler.h"
#include "actors/collector/collector.h"
#include "actors/collector/remote/collector_node.h"
#include "actors/node/node_tls.h"
#include "actors/provider/http_client.h"
#include "actors/provider/provider_actor.h"
#include "actors/provider/remote/provider_node.h"
#include "actors/tool/mcp/mcp_hub.h"
#include "actors/tool/remote/call_ledger.h"
#include "actors/tool/remote/node_protocol.h"
#include "actors/tool/remote/tool_node.h"
#include "actors/tool/tool_actor.h"
#include "actors/tool/workspace.h"
#include "base/lib_log.h"
#include "runtime/config.h"
#include "runtime/provider_factory.h"
#include "runtime/session_setup.h"
#include "storage/event_log.h"
#include "tools/cli.h"
#include "tools/cli_run.h"
#include "tools/stop_signals.h"

namespace carapace::cli {
namespace {

struct NodeArgs {
  std::string role = "tools";
  std::string listen;
  std::string tls;
  bool insecure_loopback = false;
  std::string name;
  std::string config;
  std::string workspace;
  uint64_t heartbeat_ms = 1000;
  uint64_t connection_timeout_ms = 5000;
  std::string exec_log;  // hidden: the torture runner's record of executions
  std::string mutation;  // hidden: forgetful_ledger (the torture runner's mutation check) or silent
};

// A tools node's own places and tools: its ledger, the root of its
// sessions' workspaces, its built-in tools, and its MCP servers' tools
// (each server started once here for its list, which the hosts learn from
// the node's hello; a session's calls run on the server of its workspace).
struct ToolsSetup {
  std::shared_ptr<ToolRegistry> tools = std::make_shared<ToolRegistry>();
  std::shared_ptr<ProcessSet> processes = std::make_shared<ProcessSet>();
  std::shared_ptr<CallLedger> ledger;
  std::shared_ptr<McpHub> mcp;
  std::string root;  // canonical
};

Status setup_tools(const Config& config, const NodeArgs& args, const std::string& home, ToolsSetup* out) {
  const std::string root = args.workspace.empty() ? home + "/node-workspaces" : args.workspace;
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(root, &out->root));
  std::unique_ptr<CallLedger> ledger;
  CARAPACE_RETURN_IF_ERROR(CallLedger::open(home + "/node-ledger", &ledger));
  out->ledger = std::move(ledger);
  std::function<ToolDefinition(ToolDefinition)> decorate;
  if (!args.exec_log.empty()) {
    decorate = [path = args.exec_log](ToolDefinition t) { return record_executions(std::move(t), path); };
  }
  CARAPACE_RETURN_IF_ERROR(add_builtin_tools(config, decorate, out->tools.get(), out->processes));
  // Under the shell's sandbox, as at home: what the kernel cannot enforce stops the node here.
  CARAPACE_RETURN_IF_ERROR(make_mcp_hub(config, out->tools, &out->mcp));
  if (!out->mcp) return Status();
  std::string listing;
  std::filesystem::create_directories(home + "/node-mcp-list", ec);
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(home + "/node-mcp-list", &listing));
  for (const Status& failed : out->mcp->ensure(listing)) {
    lib_log().warn("an MCP server did not start: {} (the node runs without its tools)", failed.to_string());
  }
  return Status();
}

int run_node(Context& ctx, const NodeArgs& args) {
  if (args.role != "tools" && args.role != "provider" && args.role != "collector") {
    return ctx.usage(Status::invalid_argument("--role " + args.role + ": a node is tools, provider or collector"));
  }
  const bool provider_role = args.role == "provider";
  const bool collector_role = args.role == "collector";
  if (!args.mutation.empty() && args.mutation != "forgetful_ledger" && args.mutation != "silent") {
    return ctx.usage(Status::invalid_argument("--test-mutation: no node mutation named " + args.mutation));
  }
  if (args.listen.empty()) return ctx.usage(Status::invalid_argument("--listen host:port is required"));
  std::string host;
  uint16_t port = 0;
  const bool any_port = args.listen.size() > 2 && args.listen.compare(args.listen.size() - 2, 2, ":0") == 0;
  if (any_port) {  // an ephemeral port: said on stdout once bound
    host = args.listen.substr(0, args.listen.size() - 2);
  } else if (Status s = parse_node_address(args.listen, &host, &port); !s.ok()) {
    return ctx.usage(Status::invalid_argument("--listen " + s.message()));
  }
  if (args.insecure_loopback && host != "127.0.0.1") {
    return ctx.usage(Status::invalid_argument("--insecure-loopback listens on 127.0.0.1 only, not " + host));
  }
  if (args.insecure_loopback) {
    std::fprintf(stderr,
                 "carapace node: WARNING: --insecure-loopback: plain TCP, no certificates: any process on this "
                 "machine can run tools here. Use --tls DIR (carapace node certs) for anything else.\n");
  }
  Config config;
  if (int rc = load_cli_config(ctx, args.config, &config); rc != kExitOk) return rc;
  if (Status s = ctx.prepare_home(/*create=*/true); !s.ok()) return ctx.fail(s);

  // A provider node: the provider its config names, with the key from its
  // own environment (the only place the key lives).
  std::shared_ptr<Provider> provider;
  std::string key_env;
  if (provider_role) {
    if (!is_http_provider(config.provider.name)) {
      return ctx.fail(Status::invalid_argument("a provider node serves an openai or anthropic provider; its config "
                                               "names \"" + config.provider.name + "\""),
                      "set provider.name (and the key's variable) in the node's config");
    }
    HttpProviderOptions http;
    if (Status s = resolve_http_options(config.provider, &http); !s.ok()) return ctx.fail(s);
    key_env = http.api_key_env;
    provider = make_http_provider(config.provider.name, std::move(http), std::make_shared<HttpClient>(), nullptr);
  }

  const std::string home = ctx.home();
  ToolsSetup local;
  if (!provider_role && !collector_role) {
    if (Status s = setup_tools(config, args, home, &local); !s.ok()) return ctx.fail(s);
  }

  caf::actor_system_config cfg;
  configure_scheduler(cfg);
  std::string cn;
  NodeNetOptions net{.tls_dir = args.tls,
                     .insecure_loopback = args.insecure_loopback,
                     .heartbeat_ms = args.heartbeat_ms,
                     .connection_timeout_ms = args.connection_timeout_ms};
  if (Status s = configure_node_system(cfg, net, &cn); !s.ok()) return ctx.fail(s);
  const std::string name = !args.name.empty() ? args.name : !cn.empty() ? cn : args.listen;

  // A collector node: the copies of the hosts' logs, in its home's log.
  std::unique_ptr<EventLog> copies;
  if (collector_role) {
    Status s = EventLog::open(EventLog::Options{.path = home + "/log"}, &copies);
    if (!s.ok()) {
      return ctx.fail(s, s.is_busy() ? "another carapace process writes this home: give the node a home of its own "
                                       "(--home)"
                                     : "");
    }
  }

  caf::actor_system system{cfg};
  std::shared_ptr<Collector> collector;  // goes before the system
  auto publish = [&](const auto& handle) -> caf::expected<uint16_t> {
    return args.insecure_loopback ? caf::io::publish(handle, port, host.c_str(), true)
                                  : caf::openssl::publish(handle, port, host.c_str(), true);
  };
  caf::actor supervisor, node;
  caf::expected<uint16_t> bound{caf::sec::cannot_publish_invalid_actor};
  std::string detail;  // what the node says of itself once it listens
  nlohmann::json data;  // and in --json, besides name, role, listen and tls
  if (collector_role) {
    // Spans are observability: without the trace store (another collector
    // holds it), `carapace trace` here builds them from the copies.
    if (Status c = Collector::start(system, CollectorOptions{.home = home}, &collector); !c.ok()) {
      std::fprintf(stderr, "carapace node: no spans kept as events land (%s); `carapace trace` builds them from the "
                           "log\n",
                   c.to_string().c_str());
    }
    auto published =
        spawn_collector_node(system, CollectorNodeOptions{.name = name, .log = copies.get(), .collector = collector});
    node = caf::actor_cast<caf::actor>(published);
    bound = publish(published);
    detail = ": the sessions' logs in " + home + "/log, their spans in " + home + "/traces";
    data = {{"log", home + "/log"}, {"traces", home + "/traces"}};
  } else if (provider_role) {
    auto supervised = spawn_provider_supervisor(system, provider);
    auto published = spawn_provider_node(
        system, supervised, ProviderNodeOptions{.name = name, .provider = provider, .silent = args.mutation == "silent"});
    supervisor = caf::actor_cast<caf::actor>(supervised);
    node = caf::actor_cast<caf::actor>(published);
    bound = publish(published);
    // The key's variable is named; its value never is.
    detail = ", " + provider->name() + " provider, key from $" + key_env;
    data = {{"provider", provider->name()}, {"api_key_env", key_env}};
  } else {
    auto supervised = spawn_tool_supervisor(system, local.tools);
    auto published = spawn_tool_node(
        system, supervised,
        ToolNodeOptions{.name = name,
                        .workspace_root = local.root,
                        .tools = local.tools,
                        .ledger = local.ledger,
                        .mutation = args.mutation == "forgetful_ledger" ? ToolNodeOptions::Mutation::kForgetfulLedger
                                    : args.mutation == "silent"         ? ToolNodeOptions::Mutation::kSilent
                                                                        : ToolNodeOptions::Mutation::kNone});
    supervisor = caf::actor_cast<caf::actor>(supervised);
    node = caf::actor_cast<caf::actor>(published);
    bound = publish(published);
    detail = ", " + std::to_string(local.tools->names().size()) + " tools, ledger " + local.ledger->id() + " with " +
             std::to_string(local.ledger->calls()) + " calls";
    data = {{"tools", local.tools->names()},
            {"ledger", local.ledger->id()},
            {"ledger_calls", local.ledger->calls()},
            {"workspace_root", local.root}};
  }
  if (!bound) {
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    if (supervisor) caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    return ctx.fail(Status::io_error("cannot listen on " + args.listen + ": " + system.render(bound.error())),
                    "is another node on that port?");
  }
  const std::string where = host + ":" + std::to_string(*bound);
  const std::string summary = args.role + " node " + name + " listening on " + where + " (" +
                              (args.insecure_loopback ? "plain TCP, loopback only" : "mutual TLS") + ")" + detail;
  if (ctx.json) {
    data["name"] = name;
    data["role"] = args.role;
    data["listen"] = where;
    data["tls"] = !args.insecure_loopback;
    print_redacted(ctx, {{"success", true}, {"data", data}, {"summary", summary}});
  } else {
    std::printf("%s\n", summary.c_str());
  }
  std::fflush(stdout);
  arm_stop_signals();
  while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, collector_role ? "carapace node: stopping (the hosts send the rest once it is back)\n"
                       : provider_role ? "carapace node: stopping (its attempts in flight end; the hosts retry)\n"
                                       : "carapace node: stopping (its calls' processes are killed; the ledger keeps "
                                         "what ran)\n");
  local.processes->terminate_all();
  if (local.mcp) local.mcp->shutdown();
  {
    caf::scoped_actor self{system};
    self->send_exit(node, caf::exit_reason::user_shutdown);
    self->wait_for(node);  // a shipment being written lands first
  }
  if (supervisor) caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  if (collector) (void)collector->flush(std::chrono::seconds(10));
  return kExitOk;
}

struct CertArgs {
  std::string dir;
  std::string ca;
  std::string name;
  int days = 365;
};

int run_certs(Context& ctx, const CertArgs& args) {
  std::error_code ec;
  const bool have_ca = std::filesystem::exists(args.ca + "/ca.key", ec);
  if (!have_ca) {
    if (Status s = make_node_ca(args.ca, "carapace-ca", 3650); !s.ok()) return ctx.fail(s);
  }
  if (Status s = make_node_certificate(args.ca, args.dir, args.name, args.days); !s.ok()) return ctx.fail(s);
  NodeTlsFiles files;
  std::string cn;
  if (Status s = check_node_tls(args.dir, &files, &cn); !s.ok()) return ctx.fail(s);
  const std::string summary = std::string(have_ca ? "" : "made the CA in " + args.ca + "; ") + "certificate for " +
                              cn + " in " + args.dir + " (node.crt, node.key, ca.crt), valid " +
                              std::to_string(args.days) + " days";
  if (ctx.json) {
    ctx.print_success({{"dir", args.dir}, {"ca", args.ca}, {"name", cn}, {"made_ca", !have_ca},
                       {"certificate", files.certificate}, {"key", files.key}, {"ca_certificate", files.ca}},
                      summary);
  } else {
    std::cout << summary << "\nKeep " << args.ca << "/ca.key off the nodes: whoever has it can make certificates "
              << "every node trusts.\n";
  }
  return kExitOk;
}

}  // namespace

void register_node_command(CLI::App& app, Context& ctx) {
  auto* node = app.add_subcommand(
      "node", "Run a tools, provider or collector node that session hosts send tool calls, model calls or their "
              "sessions' events to (docs/scale-out.md)");
  auto args = std::make_shared<NodeArgs>();
  node->add_option("--role", args->role,
                   "What the node does: tools (runs tool calls), provider (answers model calls with the API key "
                   "it holds) or collector (keeps the hosts' session logs and their spans in its home)");
  node->add_option("--listen", args->listen, "Where to listen, host:port (port 0: any free one, said on stdout)");
  node->add_option("--tls", args->tls, "Directory with node.crt, node.key and ca.crt (carapace node certs)");
  node->add_flag("--insecure-loopback", args->insecure_loopback,
                 "Plain TCP without certificates, on 127.0.0.1 only (tests, a first try)");
  node->add_option("--name", args->name, "The node's name in outcomes and logs (default: its certificate's)");
  node->add_option("--config", args->config,
                   "Config file: the tools and MCP servers it runs and their sandbox, or its provider (default: "
                   "$CARAPACE_HOME/config.json)");
  node->add_option("--workspace", args->workspace,
                   "Root of the sessions' workspaces here (default: $CARAPACE_HOME/node-workspaces)");
  node->add_option("--heartbeat-ms", args->heartbeat_ms, "Heartbeat to the hosts")->check(CLI::Range(50, 60000));
  node->add_option("--connection-timeout-ms", args->connection_timeout_ms,
                   "A host silent this long is gone (its calls go on; their outcomes stay in the ledger)")
      ->check(CLI::Range(100, 600000));
  node->add_option("--exec-log", args->exec_log, "Record every tool execution in this file")->group("");
  node->add_option("--test-mutation", args->mutation, "A deliberate defect, for tests")->group("");
  add_json_flag(node, ctx);
  node->callback([&ctx, args, node] {
    if (node->get_subcommands().empty()) ctx.run = [&ctx, args] { return run_node(ctx, *args); };
  });

  auto cert_args = std::make_shared<CertArgs>();
  auto* certs = node->add_subcommand(
      "certs", "Make a node's certificate (and the private CA, the first time) for mutual TLS between nodes");
  certs->add_option("dir", cert_args->dir, "Where the node's node.crt, node.key and ca.crt go")->required();
  certs->add_option("--ca", cert_args->ca, "The CA's directory (made with ca.crt and ca.key if missing)")
      ->required();
  certs->add_option("--name", cert_args->name, "The node's name (its certificate's CN)")->required();
  certs->add_option("--days", cert_args->days, "How long the certificate is valid")->check(CLI::Range(1, 3650));
  add_json_flag(certs, ctx);
  certs->callback([&ctx, cert_args] { ctx.run = [&ctx, cert_args] { return run_certs(ctx, *cert_args); }; });
}

}  // namespace carapace::cli
