#include "tools/serve/web_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <set>

#include "base/bounded_json.h"
#include "tools/serve/log_notify.h"
#include "tools/serve/web_assets.h"

namespace carapace::web {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using nlohmann::json;

constexpr size_t kHeaderLimit = 8 * 1024;
constexpr size_t kBodyLimit = 4 * 1024;
constexpr size_t kMessageLimit = 64 * 1024;
constexpr size_t kBacklogLimit = 16 * 1024 * 1024;
constexpr auto kIdle = std::chrono::seconds(30);
// With inotify, the log is read anyway this often: a change that made no
// file event (none is known) is seen within it.
constexpr auto kSafetyRead = std::chrono::seconds(10);
// How often the stop flag (a signal) is looked at.
constexpr auto kStopCheck = std::chrono::milliseconds(100);
// Connections refused past the limit are summed up in one line this often.
constexpr auto kRefusalSummary = std::chrono::seconds(10);

constexpr std::string_view kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

class WsSession;

struct WebServer::Impl {
  using Clock = std::chrono::steady_clock;

  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer read_timer{io};
  asio::steady_timer stop_timer{io};
  asio::steady_timer refusal_timer{io};
  ServerOptions options;
  AccessPolicy policy;
  HomeView* home = nullptr;
  std::function<bool()> stop;
  size_t connections = 0;
  std::set<std::shared_ptr<WsSession>> sockets;

  // Following the log: inotify when it can be used, else a timer.
  std::unique_ptr<LogNotify> notify;
  std::optional<asio::posix::stream_descriptor> notify_wait;
  Clock::time_point last_read{};
  Clock::time_point read_at = Clock::time_point::max();  // when the next read is due
  uint64_t log_reads = 0;

  // Connections refused past the limit: counted, summed up in one line.
  uint64_t refused_total = 0;
  uint64_t refused_unreported = 0;
  bool refusal_summary_due = false;

  // Host mode: the write API's requests run here, off the server's thread.
  std::unique_ptr<asio::thread_pool> workers;
  // What sessions publish from their threads reaches the clients through
  // this; cleared when the server goes.
  struct Gate {
    std::mutex mu;
    Impl* server = nullptr;
  };
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();

  void accept();
  void refuse(tcp::socket& socket);
  void report_refusals();
  void check_stop();
  void shut_down();
  void read_log();
  void read_log_at(Clock::time_point at);
  void wait_for_notify();
  void broadcast(const LiveMessage& message);
  nlohmann::json status() const;

  ~Impl() {
    {
      std::lock_guard lock(gate->mu);
      gate->server = nullptr;
    }
    if (workers) workers->join();  // requests under way end before the server they answer through
    if (notify_wait) notify_wait->release();  // LogNotify closes its descriptor
  }
};

namespace {

// Common headers of every answer.
template <class Body>
void decorate(http::response<Body>& res, unsigned version, bool keep_alive) {
  res.version(version);
  res.set(http::field::server, "carapace");
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set("X-Frame-Options", "DENY");
  res.keep_alive(keep_alive);
}

http::response<http::string_body> json_response(unsigned status, const json& body, unsigned version, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  decorate(res, version, keep_alive);
  res.set(http::field::content_type, "application/json; charset=utf-8");
  res.body() = dump(body) + "\n";
  res.prepare_payload();
  return res;
}

}  // namespace

// One WebSocket client: it gets the session list, then every change; it
// may watch sessions to get their spans as they change.
class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(tcp::socket&& socket, WebServer::Impl* server) : ws_(std::move(socket)), server_(server) {}

  // `protocol`: the client offered the subprotocol `carapace` (the page
  // does, beside the one carrying its token), which the answer must name.
  void start(http::request<http::string_body> req, bool protocol) {
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.set_option(websocket::stream_base::decorator([protocol](websocket::response_type& res) {
      res.set(http::field::server, "carapace");
      if (protocol) res.set(http::field::sec_websocket_protocol, std::string(kWebSocketProtocol));
    }));
    ws_.read_message_max(kMessageLimit);
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  void send(std::shared_ptr<const std::string> text) {
    if (closing_) return;
    backlog_ += text->size();
    if (backlog_ > kBacklogLimit) {
      // Too far behind: drop it rather than hold the server's memory. (The
      // queue stays until its write ends: that write still reads from it.)
      spdlog::warn("serve: a WebSocket client fell {} bytes behind; dropped it", backlog_);
      close();
      return;
    }
    queue_.push_back(std::move(text));
    if (queue_.size() == 1) write_next();
  }

  bool watches(const std::string& session) const { return watched_.count(session) != 0; }

  void close() {
    closing_ = true;
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
  }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return done();
    server_->sockets.insert(shared_from_this());
    send(std::make_shared<const std::string>(dump(server_->home->hello(server_->options.version))));
    read();
  }

  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      if (ec == websocket::error::message_too_big) {
        spdlog::warn("serve: a WebSocket client sent a message over {} bytes; closed it (1009)", kMessageLimit);
      }
      return done();
    }
    std::string text = beast::buffers_to_string(buffer_.data());
    buffer_.consume(buffer_.size());
    if (!ws_.got_text()) {
      reply_error("binary messages are not understood: send JSON text, e.g. {\"type\":\"watch\",\"session\":\"ID\"}");
    } else {
      handle(text);
    }
    read();
  }

  void handle(const std::string& text) {
    json msg = parse_stored_json(text);
    if (msg.is_discarded() || !msg.is_object()) {
      return reply_error("not a JSON object: send {\"type\":\"watch\",\"session\":\"ID\"} or {\"type\":\"unwatch\",...}");
    }
    std::string type = msg.contains("type") && msg["type"].is_string() ? msg["type"].get<std::string>() : "";
    std::string session =
        msg.contains("session") && msg["session"].is_string() ? msg["session"].get<std::string>() : "";
    if (type == "watch") {
      json answer;
      const bool reset = !(msg.contains("reset") && msg["reset"].is_boolean() && !msg["reset"].get<bool>());
      if (server_->home->watch_message(session, &answer, reset)) watched_.insert(session);
      send(std::make_shared<const std::string>(dump(answer)));
    } else if (type == "unwatch") {
      watched_.erase(session);
    } else {
      reply_error("unknown message type '" + type.substr(0, 64) + "': the server understands watch and unwatch");
    }
  }

  void reply_error(const std::string& message) {
    send(std::make_shared<const std::string>(dump({{"type", "error"}, {"message", message}})));
  }

  void write_next() {
    ws_.text(true);
    ws_.async_write(asio::buffer(*queue_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closing_) return self->done();
      self->backlog_ -= self->queue_.front()->size();
      self->queue_.pop_front();
      if (!self->queue_.empty()) self->write_next();
    });
  }

  void done() {
    if (finished_) return;
    finished_ = true;
    closing_ = true;
    --server_->connections;
    server_->sockets.erase(shared_from_this());
  }

  websocket::stream<beast::tcp_stream> ws_;
  WebServer::Impl* server_;
  beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t backlog_ = 0;
  std::set<std::string> watched_;
  bool closing_ = false;
  bool finished_ = false;
};

namespace {

// One HTTP connection: requests answered in turn until it closes, or hands
// itself to a WsSession on an upgrade to /ws.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, WebServer::Impl* server) : stream_(std::move(socket)), server_(server) {}

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    // A host takes POSTs of up to kPostBodyLimit; everything else kBodyLimit.
    // (The parser checks a Content-Length as the header ends: the larger
    // limit first, the smaller one once the method is known.)
    const bool hosting = server_->options.host != nullptr;
    parser_->body_limit(hosting ? kPostBodyLimit : kBodyLimit);
    stream_.expires_after(kIdle);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this(), hosting](beast::error_code ec, size_t) {
      if (ec) return self->on_read(ec);
      if (hosting && self->parser_->get().method() != http::verb::post) {
        auto length = self->parser_->content_length();
        if (length && *length > kBodyLimit) return self->on_read(http::error::body_limit);
        self->parser_->body_limit(kBodyLimit);
      }
      if (self->parser_->is_done()) return self->on_read(ec);
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec2, size_t) { self->on_read(ec2); });
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
      return close();
    }
    if (ec) {
      // A request that cannot be read: say what was wrong, then close.
      unsigned status = 400;
      std::string error = "bad request: " + ec.message();
      if (ec == http::error::body_limit) {
        status = 413;
        error = parser_->get().method() == http::verb::post && server_->options.host != nullptr
                    ? "request body over " + std::to_string(kPostBodyLimit) + " bytes"
                    : "request body over " + std::to_string(kBodyLimit) + " bytes: only a POST to a host has a body";
      } else if (ec == http::error::header_limit) {
        status = 431;
        error = "request headers over " + std::to_string(kHeaderLimit) + " bytes";
      }
      return write(json_response(status, error_body(status, error), 11, false));
    }
    try {
      handle(parser_->release());
    } catch (const std::exception& e) {
      spdlog::error("serve: answering a request failed: {}", e.what());
      write(json_response(500, error_body(500, std::string("internal error: ") + e.what()), 11, false));
    }
  }

  void handle(http::request<http::string_body> req) {
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    auto refuse = [&](unsigned status, const std::string& error) {
      return write(json_response(status, error_body(status, error), version, false));
    };
    std::string_view target(req.target().data(), req.target().size());
    if (target.empty() || target.front() != '/') return refuse(400, "the request target must be a path");
    // Two Hosts: which one names the server is ambiguous; none is taken.
    if (req.count(http::field::host) > 1) return refuse(400, "more than one Host header: send one");
    std::string_view path = target.substr(0, target.find('?'));
    std::string_view query = path.size() < target.size() ? target.substr(path.size() + 1) : std::string_view();
    if (query_has(query, "token")) {
      return refuse(
          400,
          "a token in the address (?token=) is not taken: an address is written into logs and history. "
          "Open the URL carapace serve printed (…/#token=…), or send Authorization: Bearer TOKEN");
    }
    std::string_view host(req[http::field::host].data(), req[http::field::host].size());
    const bool websocket = path == "/ws";
    std::string_view protocols = websocket ? std::string_view(req[http::field::sec_websocket_protocol].data(),
                                                              req[http::field::sec_websocket_protocol].size())
                                           : std::string_view();
    // The page's own files are public (built into the binary, no data of
    // the home): the Host check only. Everything else needs the token.
    const WebAsset* asset = websocket ? nullptr : find_web_asset(path);
    const bool needs_token = asset == nullptr;
    Access access = needs_token ? check_access(server_->policy,
                                               RequestCredentials{.host = host,
                                                                  .authorization = std::string_view(
                                                                      req[http::field::authorization].data(),
                                                                      req[http::field::authorization].size()),
                                                                  .websocket_protocols = protocols})
                                : check_host(server_->policy, host);
    if (access != Access::kAllowed) return refuse(access_status(access), access_error(access));
    const bool hosting = server_->options.host != nullptr;
    if (hosting && req.method() == http::verb::post && !websocket && path.starts_with("/api/")) {
      return post(std::move(req), path);
    }
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      auto res = json_response(
          405,
          error_body(405, "method " + std::string(req.method_string()) + " not allowed: " +
                              (hosting ? "GET or HEAD, or POST to the API"
                                       : "GET or HEAD (this server is read-only: --read-only, or another process "
                                         "writes the home)")),
          version, keep_alive);
      res.set(http::field::allow, hosting ? "GET, HEAD, POST" : "GET, HEAD");
      return write(std::move(res));
    }
    if (websocket) {
      if (!websocket::is_upgrade(req)) {
        return write(json_response(400, error_body(400, "/ws is a WebSocket endpoint: open it with an upgrade"),
                                   version, keep_alive));
      }
      if (req.count(http::field::origin) > 1) return refuse(400, "more than one Origin header: send one");
      std::string_view origin(req[http::field::origin].data(), req[http::field::origin].size());
      if (!origin_allowed(origin, host)) {
        return refuse(403, origin.empty() ? "a WebSocket needs an Origin header: http://" + std::string(host)
                                          : "WebSocket from another origin refused: only http://" +
                                                std::string(host) + " may open it");
      }
      stream_.expires_never();
      auto ws = std::make_shared<WsSession>(stream_.release_socket(), server_);
      handed_over_ = true;
      ws->start(std::move(req), offers_protocol(protocols, kWebSocketProtocol));
      return;
    }
    if (path.starts_with("/api/schedules") && server_->options.host != nullptr) {
      return on_worker([host = server_->options.host, p = std::string(path)] { return host->get_schedules(p); },
                       version, keep_alive, req.method() == http::verb::head);
    }
    if (path == "/api/approvals" && server_->options.host != nullptr) {
      // The writer's own view: a decision just made is not listed again.
      return on_worker(
          [host = server_->options.host, q = std::string(query)] { return host->approvals(q); }, version,
          keep_alive, req.method() == http::verb::head);
    }
    if (path.starts_with("/api/")) {
      ApiReply reply =
          path == "/api/status"
              ? ApiReply{200, {{"success", true}, {"data", server_->status()}, {"summary", "carapace serve"}}}
              : server_->home->get(path, query);
      auto res = json_response(reply.status, reply.body, version, keep_alive);
      if (req.method() == http::verb::head) res.body().clear();
      return write(std::move(res));
    }
    if (asset == nullptr) {
      return write(json_response(
          404,
          error_body(404, "nothing at " + std::string(path), "the page is at /, the API under /api/sessions"),
          version, keep_alive));
    }
    http::response<http::string_body> res{http::status::ok, version};
    decorate(res, version, keep_alive);
    res.set(http::field::content_type, std::string(asset->content_type));
    res.set("Content-Security-Policy", std::string(kPagePolicy));
    if (req.method() != http::verb::head) res.body() = std::string(asset->body);
    res.content_length(asset->body.size());
    write(std::move(res));
  }

  // A write of the API (token and Host checked already).
  void post(http::request<http::string_body> req, std::string_view path) {
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    auto refuse = [&](unsigned status, const std::string& error, const std::string& hint = "") {
      return write(json_response(status, error_body(status, error, hint), version, keep_alive));
    };
    // A page of another site may send a POST (with no token it gets 401
    // anyway): one that names its origin must be this server's own.
    if (req.count(http::field::origin) > 1) return refuse(400, "more than one Origin header: send one");
    if (req.count(http::field::origin) == 1) {
      std::string_view origin(req[http::field::origin].data(), req[http::field::origin].size());
      std::string_view host(req[http::field::host].data(), req[http::field::host].size());
      if (!origin_allowed(origin, host)) {
        return refuse(403, "a request from another origin is refused: only http://" + std::string(host) + " may write");
      }
    }
    std::string_view type(req[http::field::content_type].data(), req[http::field::content_type].size());
    if (!type.starts_with("application/json")) {
      return refuse(415, "the body must be JSON: send Content-Type: application/json");
    }
    on_worker([host = server_->options.host, p = std::string(path), body = std::move(req.body())] {
      return host->post(p, body);
    }, version, keep_alive, false);
  }

  // Runs `work` on a worker thread and answers with its reply.
  template <class Work>
  void on_worker(Work work, unsigned version, bool keep_alive, bool head) {
    asio::post(*server_->workers, [self = shared_from_this(), work = std::move(work), version, keep_alive, head] {
      ApiReply reply;
      try {
        reply = work();
      } catch (const std::exception& e) {
        spdlog::error("serve: a write request failed: {}", e.what());
        reply = api_error(500, std::string("internal error: ") + e.what());
      }
      asio::post(self->server_->io, [self, reply = std::move(reply), version, keep_alive, head] {
        auto res = json_response(reply.status, reply.body, version, keep_alive);
        if (head) res.body().clear();
        self->write(std::move(res));
      });
    });
  }

  void write(http::response<http::string_body> res) {
    response_ = std::make_shared<http::response<http::string_body>>(std::move(res));
    const bool close_after = !response_->keep_alive();
    http::async_write(stream_, *response_, [self = shared_from_this(), close_after](beast::error_code ec, size_t) {
      if (ec || close_after) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

 public:
  ~HttpSession() {
    if (!handed_over_) --server_->connections;
  }

 private:
  beast::tcp_stream stream_;
  WebServer::Impl* server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  bool handed_over_ = false;
};

}  // namespace

void WebServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      if (connections >= options.max_connections) {
        refuse(socket);
      } else {
        ++connections;
        std::make_shared<HttpSession>(std::move(socket), this)->start();
      }
    }
    if (acceptor.is_open()) accept();
  });
}

void WebServer::Impl::refuse(tcp::socket& socket) {
  // Closed and counted, not logged one by one: a flood of connections
  // (unauthenticated beyond loopback) must not become a flood of lines.
  beast::error_code ignored;
  socket.close(ignored);
  ++refused_total;
  ++refused_unreported;
  if (refusal_summary_due) return;
  refusal_summary_due = true;
  refusal_timer.expires_after(kRefusalSummary);
  refusal_timer.async_wait([this](beast::error_code ec) {
    if (!ec) report_refusals();
  });
}

void WebServer::Impl::report_refusals() {
  refusal_summary_due = false;
  if (refused_unreported == 0) return;
  spdlog::warn(
      "serve: refused {} connection{} in the last {} s: {} were open, the limit ({} refused since the start)",
      refused_unreported, refused_unreported == 1 ? "" : "s",
      std::chrono::duration_cast<std::chrono::seconds>(kRefusalSummary).count(), options.max_connections,
      refused_total);
  refused_unreported = 0;
}

void WebServer::Impl::broadcast(const LiveMessage& message) {
  auto text = std::make_shared<const std::string>(dump(message.message));
  // Copied: a send may drop a client from the set.
  auto clients = sockets;
  for (const auto& client : clients) {
    if (message.watchers_of.empty() || client->watches(message.watchers_of)) client->send(text);
  }
}

json WebServer::Impl::status() const {
  return {{"version", options.version},
          {"sessions", home->session_count()},
          {"connections", connections},
          {"max_connections", options.max_connections},
          {"refused_connections", refused_total},
          {"updates", notify ? "inotify" : "polling"},
          {"interval_ms", options.poll_interval_ms},
          {"log_reads", log_reads},
          {"token", !policy.token.empty()},
          {"mode", options.host != nullptr ? "host" : "read-only"},
          {"workspace_root", options.host != nullptr ? json(options.workspace_root) : json(nullptr)}};
}

void WebServer::Impl::check_stop() {
  if (stop && stop()) return shut_down();
  stop_timer.expires_after(kStopCheck);
  stop_timer.async_wait([this](beast::error_code ec) {
    if (!ec) check_stop();
  });
}

void WebServer::Impl::shut_down() {
  beast::error_code ec;
  acceptor.close(ec);
  for (const auto& client : std::set(sockets)) client->close();
  if (notify_wait) notify_wait->release();  // LogNotify closes its descriptor
  report_refusals();
  io.stop();
}

void WebServer::Impl::read_log() {
  read_at = Clock::time_point::max();
  last_read = Clock::now();
  ++log_reads;
  std::vector<LiveMessage> messages;
  try {
    Status polled = home->poll(&messages, [this](const std::string& session) {
      return std::any_of(sockets.begin(), sockets.end(), [&](const auto& s) { return s->watches(session); });
    });
    if (!polled.ok()) spdlog::warn("serve: reading the log: {} (trying again)", polled.message());
    for (const auto& m : messages) broadcast(m);
  } catch (const std::exception& e) {
    spdlog::error("serve: following the log failed: {}", e.what());
  }
  // Polling: the next read in an interval. With inotify: a change brings
  // it sooner; without one, the safety read.
  read_log_at(last_read + (notify ? std::chrono::duration_cast<Clock::duration>(kSafetyRead)
                                  : std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::milliseconds(options.poll_interval_ms))));
}

void WebServer::Impl::read_log_at(Clock::time_point at) {
  if (at >= read_at) return;  // a read is due by then already
  read_at = at;
  read_timer.expires_at(at);  // cancels the wait for a later one
  read_timer.async_wait([this](beast::error_code ec) {
    if (!ec) read_log();
  });
}

void WebServer::Impl::wait_for_notify() {
  notify_wait->async_wait(asio::posix::stream_descriptor::wait_read, [this](beast::error_code ec) {
    if (ec) return;  // shut down
    if (notify->drain()) {
      // At once, but no sooner than an interval after the last read: a
      // busy writer's appends are read in batches.
      read_log_at(std::max(Clock::now(), last_read + std::chrono::milliseconds(options.poll_interval_ms)));
    }
    wait_for_notify();
  });
}

WebServer::~WebServer() = default;

Status WebServer::start(const ServerOptions& options, HomeView* home, std::unique_ptr<WebServer>* out) {
  std::unique_ptr<WebServer> server(new WebServer());
  server->impl_ = std::make_unique<Impl>();
  Impl& impl = *server->impl_;
  impl.options = options;
  impl.home = home;
  impl.policy.token = options.token;
  impl.policy.loopback = is_loopback(options.bind);
  if (!impl.policy.loopback && options.token.empty()) {
    return Status::invalid_argument("bound to " + options.bind + ", which is not loopback, the server needs a token");
  }
  beast::error_code ec;
  std::string bind = options.bind == "localhost" ? "127.0.0.1" : options.bind;
  if (bind.size() > 2 && bind.front() == '[' && bind.back() == ']') bind = bind.substr(1, bind.size() - 2);
  auto address = asio::ip::make_address(bind, ec);
  if (ec) return Status::invalid_argument("--bind " + options.bind + " is not an IP address: " + ec.message());
  tcp::endpoint endpoint(address, options.port);
  impl.acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(endpoint, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::io_error("cannot listen on " + options.bind + ":" + std::to_string(options.port) + ": " +
                            ec.message());
  }
  impl.policy.port = impl.acceptor.local_endpoint().port();
  impl.gate->server = &impl;
  if (options.host != nullptr) impl.workers = std::make_unique<asio::thread_pool>(std::max<size_t>(1, options.workers));
  if (options.notify && !options.home.empty()) {
    Status watching = LogNotify::open(options.home, &impl.notify);
    if (watching.ok()) {
      impl.notify_wait.emplace(impl.io, impl.notify->fd());
    } else {
      impl.notify.reset();
      spdlog::warn("serve: cannot watch the log for changes ({}); reading it every {} ms instead",
                   watching.message(), options.poll_interval_ms);
    }
  }
  *out = std::move(server);
  return Status();
}

uint16_t WebServer::port() const { return impl_->policy.port; }

std::function<void(LiveMessage)> WebServer::publisher() {
  return [gate = impl_->gate](LiveMessage message) {
    std::lock_guard lock(gate->mu);
    if (gate->server == nullptr) return;
    Impl* server = gate->server;
    asio::post(server->io, [server, m = std::move(message)] { server->broadcast(m); });
  };
}

std::string WebServer::updates() const { return impl_->notify ? "inotify" : "polling"; }

void WebServer::run(const std::function<bool()>& stop) {
  impl_->stop = stop;
  impl_->accept();
  if (impl_->notify) impl_->wait_for_notify();
  impl_->read_log();  // at once: what changed between the home's first read and the watch
  impl_->check_stop();
  impl_->io.run();
}

}  // namespace carapace::web
