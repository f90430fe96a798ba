// The HTTP and WebSocket server of `carapace serve` (Boost.Beast, one
// thread): the page's files, the JSON API of HomeView (and /api/status, the
// server's own), and /ws, where every client gets the session list and then
// what changes, as HomeView's reads of the log find it.
//
// It reads the log when LogNotify says it changed (at most once per
// `poll_interval_ms`, and every 10 s in any case), or, when inotify cannot
// be used or `notify` is off, every `poll_interval_ms`.
//
// Limits, so that no client takes it down: request headers 8 KiB, request
// bodies 4 KiB (64 KiB for a POST to a host), client WebSocket messages 64 KiB (a
// bigger one closes that socket with 1009), 256 connections (--max-connections; one more is
// closed at once and counted; a summary line every 10 s while it happens),
// an idle HTTP connection closed after 30 s, a WebSocket client that falls
// 16 MiB behind dropped. A bad request gets a JSON error naming what was
// wrong. Who may ask is web_access.h's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "tools/serve/home_view.h"
#include "tools/serve/session_host.h"
#include "tools/serve/web_access.h"

namespace carapace::web {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 8080;    // 0: any free port
  std::string token;       // required when `bind` is not loopback
  std::string version;
  std::string home;    // watched for changes of its log
  bool notify = true;  // false: read the log every poll_interval_ms, inotify or not
  int poll_interval_ms = 200;
  size_t max_connections = 256;
  // Host mode (docs/serve.md, "Hosting sessions"): the POSTs of the write
  // API and GET /api/approvals go to it, on `workers` threads of their own.
  // Null: a read-only server (every POST answers 405).
  SessionHost* host = nullptr;
  size_t workers = 2;
  std::string workspace_root;  // shown in /api/status
};

class WebServer {
 public:
  // Binds and listens (the port is taken when this returns).
  static Status start(const ServerOptions& options, HomeView* home, std::unique_ptr<WebServer>* out);
  ~WebServer();

  uint16_t port() const;

  // How it follows the log: "inotify" or "polling".
  std::string updates() const;

  // Hands `message` to the WebSocket clients, from any thread (a session's
  // actor): what the returned function is given after the server is gone
  // is dropped.
  std::function<void(LiveMessage)> publisher();

  // Serves until `stop()` returns true (checked every 100 ms).
  void run(const std::function<bool()>& stop);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace::web
