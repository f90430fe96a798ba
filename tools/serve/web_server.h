// The HTTP and WebSocket server of `carapace serve` (Boost.Beast, one
// thread): the page's files, the JSON API of HomeView, and /ws, where every
// client gets the session list and then what changes, as HomeView's polls
// find it.
//
// Limits, so that no client takes it down: request headers 8 KiB, request
// bodies 4 KiB (GET and HEAD only), client WebSocket messages 64 KiB (a
// bigger one closes that socket with 1009), 64 connections, an idle HTTP
// connection closed after 30 s, a WebSocket client that falls 16 MiB
// behind dropped. A bad request gets a JSON error naming what was wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "tools/serve/home_view.h"
#include "tools/serve/web_access.h"

namespace carapace::web {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 8080;    // 0: any free port
  std::string token;       // required when `bind` is not loopback
  std::string version;
  int poll_interval_ms = 200;
  size_t max_connections = 64;
};

class WebServer {
 public:
  // Binds and listens (the port is taken when this returns).
  static Status start(const ServerOptions& options, HomeView* home, std::unique_ptr<WebServer>* out);
  ~WebServer();

  uint16_t port() const;

  // Serves until `stop()` returns true (checked at every poll).
  void run(const std::function<bool()>& stop);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace::web
