#include "actors/tool/remote/node_protocol.h"

#include <unistd.h>

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/node/node_tls.h"
#include "actors/node/openssl_error_queue.h"
#include "base/digest.h"

#include <random>

namespace carapace {

void add_node_message_types(caf::actor_system_config& cfg) {
  // The same names on both sides: CAF compares interfaces by them.
  cfg.add_message_type<ToolInvocation>("carapace::ToolInvocation");
  cfg.add_message_type<ToolOutcome>("carapace::ToolOutcome");
  cfg.add_message_type<NodeHello>("carapace::NodeHello");
  cfg.add_message_type<ProviderRequest>("carapace::ProviderRequest");
  cfg.add_message_type<ProviderReply>("carapace::ProviderReply");
  cfg.add_message_type<StreamDelta>("carapace::StreamDelta");
  cfg.add_message_type<DeltaSinkActor>("carapace::DeltaSinkActor");
  cfg.add_message_type<EventShipment>("carapace::EventShipment");
  cfg.add_message_type<ShipmentAck>("carapace::ShipmentAck");
}

Status check_node_net_options(const NodeNetOptions& options) {
  if (options.heartbeat_ms < 50 || options.heartbeat_ms > 60'000) {
    return Status::invalid_argument("heartbeat_ms must be from 50 to 60000 (it is " +
                                    std::to_string(options.heartbeat_ms) + ")");
  }
  if (options.connection_timeout_ms < 2 * options.heartbeat_ms || options.connection_timeout_ms > 600'000) {
    return Status::invalid_argument("connection_timeout_ms must be at least two heartbeats (" +
                                    std::to_string(2 * options.heartbeat_ms) + ") and at most 600000 (it is " +
                                    std::to_string(options.connection_timeout_ms) + ")");
  }
  if (!options.insecure_loopback && options.tls_dir.empty()) {
    return Status::invalid_argument(
        "nodes talk over mutual TLS: give a certificate directory (carapace node certs DIR makes one), or "
        "--insecure-loopback for plain TCP on 127.0.0.1 only");
  }
  return Status();
}

Status configure_node_system(caf::actor_system_config& cfg, const NodeNetOptions& options, std::string* common_name) {
  CARAPACE_RETURN_IF_ERROR(check_node_net_options(options));
  add_node_message_types(cfg);
  cfg.load<caf::io::middleman>();
  if (!options.insecure_loopback) {
    keep_openssl_error_queue_clear();
    NodeTlsFiles files;
    CARAPACE_RETURN_IF_ERROR(check_node_tls(options.tls_dir, &files, common_name));
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = files.certificate;
    cfg.openssl_key = files.key;
    cfg.openssl_cafile = files.ca;
  }
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(options.heartbeat_ms)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(options.connection_timeout_ms)});
  cfg.set("middleman.app-identifiers", std::vector<std::string>{kNodeProtocol});
  // A node accepts connections to its published actor only: nothing is
  // spawned for a peer, nothing connects on its own to nodes it hears of.
  cfg.set("middleman.enable-automatic-connections", false);
  return Status();
}

caf::io::middleman_actor node_middleman(caf::actor_system& system, bool insecure) {
  if (!insecure && system.has_openssl_manager()) return system.openssl_manager().actor_handle();
  return system.middleman().actor_handle();
}

std::set<std::string> tool_node_interface(caf::actor_system& system) {
  return system.message_types<ToolNodeActor>();
}

std::set<std::string> provider_node_interface(caf::actor_system& system) {
  return system.message_types<ProviderNodeActor>();
}

std::set<std::string> collector_node_interface(caf::actor_system& system) {
  return system.message_types<CollectorNodeActor>();
}

std::string random_node_id() {
  std::random_device rd;
  return digest128(std::to_string(rd()) + ":" + std::to_string(rd()) + ":" + std::to_string(::getpid()))
      .hex()
      .substr(0, 16);
}

std::string anchor_digest(const Event& first) {
  std::string bytes = std::to_string(first.seq) + ":" + std::to_string(first.ts_us) + ":" +
                      std::to_string(first.type_number()) + ":";
  encode_payload(first.body, bytes);
  return digest128(bytes).hex();
}

std::string probe_render_digest(const std::function<std::string(const ProviderRequest&)>& render) {
  ProviderRequest probe{.session_id = "probe",
                        .turn = 1,
                        .attempt = 1,
                        .model = "probe-model",
                        .system_prompt = "You are a probe.",
                        .messages = {Message{.role = Role::kUser, .text = "Say hello."}},
                        .tools = {ToolSpec{.name = "probe_tool",
                                           .description = "A probe.",
                                           .schema = JsonText{R"({"type":"object","properties":{}})"}}}};
  std::string body = render(probe);
  return body.empty() ? "" : digest128(body).hex();
}

}  // namespace carapace
