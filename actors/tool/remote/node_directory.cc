#include "actors/tool/remote/node_directory.h"

#include <chrono>
#include <charconv>

#include "base/clock.h"

namespace carapace {

NodeDirectory::NodeDirectory(std::vector<NodeRoute> nodes, NodeFallback fallback) : fallback_(fallback) {
  for (auto& route : nodes) nodes_.push_back(NodeState{.route = std::move(route), .changed_at_us = now_us()});
}

NodeDirectory::NodeDirectory(Recorded recorded) : fallback_(NodeFallback::kRefuse), recorded_(std::move(recorded)) {}

bool NodeDirectory::offers(const NodeRoute& route, const std::string& tool) {
  for (const auto& pattern : route.tools) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (tool.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0) return true;
    } else if (pattern == tool) {
      return true;
    }
  }
  return false;
}

bool NodeDirectory::routed(const std::string& tool) const {
  std::lock_guard lock(mu_);
  for (const auto& n : nodes_) {
    if (offers(n.route, tool)) return true;
  }
  return false;
}

Status NodeDirectory::pick(const std::string& tool, const std::string& call_id, const std::string& except,
                           std::string* node) const {
  if (recorded_) return recorded_(call_id, node);
  std::lock_guard lock(mu_);
  const NodeState* best = nullptr;
  std::string down;
  bool any = false;
  for (const auto& n : nodes_) {
    if (!offers(n.route, tool)) continue;
    any = true;
    if (n.up && n.route.name != except) {
      if (best == nullptr || n.in_flight < best->in_flight) best = &n;
      continue;
    }
    down += (down.empty() ? "" : "; ") + n.route.name + " (" + n.route.address + "): " +
            (n.route.name == except && n.up ? "the node just given up on" : n.why_down);
  }
  node->clear();
  if (best != nullptr) {
    *node = best->route.name;
    return Status();
  }
  if (!any || fallback_ == NodeFallback::kLocal) return Status();
  return Status::unsupported("no tools node that runs " + tool + " is up: " + down);
}

NodeState* NodeDirectory::find(const std::string& name) {
  for (auto& n : nodes_) {
    if (n.route.name == name) return &n;
  }
  return nullptr;
}

void NodeDirectory::set_up(const std::string& name, const std::string& node_id) {
  std::lock_guard lock(mu_);
  if (NodeState* n = find(name)) {
    n->up = true;
    n->why_down.clear();
    n->node_id = node_id;
    n->changed_at_us = now_us();
  }
}

void NodeDirectory::set_down(const std::string& name, const std::string& why) {
  std::lock_guard lock(mu_);
  if (NodeState* n = find(name)) {
    if (n->up) n->changed_at_us = now_us();
    n->up = false;
    n->why_down = why;
    n->in_flight = 0;
  }
}

void NodeDirectory::sent(const std::string& name) {
  std::lock_guard lock(mu_);
  if (NodeState* n = find(name)) ++n->in_flight;
}

void NodeDirectory::answered(const std::string& name, bool lost) {
  std::lock_guard lock(mu_);
  if (NodeState* n = find(name)) {
    if (n->in_flight > 0) --n->in_flight;
    if (lost) ++n->lost_calls;
  }
}

std::vector<NodeState> NodeDirectory::states() const {
  std::lock_guard lock(mu_);
  return nodes_;
}

std::vector<NodeRoute> NodeDirectory::routes() const {
  std::lock_guard lock(mu_);
  std::vector<NodeRoute> out;
  for (const auto& n : nodes_) out.push_back(n.route);
  return out;
}

Status parse_node_address(const std::string& address, std::string* host, uint16_t* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::invalid_argument("'" + address + "' is not host:port (for example 127.0.0.1:7401)");
  }
  const std::string h = address.substr(0, colon);
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-';
    if (!ok || h.size() > 253) {
      return Status::invalid_argument("'" + address + "': the host must be an IPv4 address or a host name");
    }
  }
  unsigned value = 0;
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || value == 0 || value > 65535) {
    return Status::invalid_argument("'" + address + "': the port must be a number from 1 to 65535");
  }
  *host = h;
  *port = static_cast<uint16_t>(value);
  return Status();
}

}  // namespace carapace
