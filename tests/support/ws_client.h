// A WebSocket client for tests and benches (Boost.Beast): connects to
// 127.0.0.1:PORT/ws, as `carapace serve`'s own page would (Origin
// http://127.0.0.1:PORT; its token, if given, as Authorization: Bearer),
// and a thread of its own collects every message, parsed as JSON, with the
// time it arrived. The handshake throws boost::system::system_error when the
// server refuses it.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace carapace::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

class WsClient {
  using json = nlohmann::json;
  using tcp = boost::asio::ip::tcp;

 public:
  // A message and when it arrived (system clock, µs: comparable with events' ts_us).
  struct Received {
    int64_t at_us = 0;
    json message;
  };

  // `origin`: unset, the server's own (http://127.0.0.1:PORT); "" sends none.
  explicit WsClient(uint16_t port, const std::string& token = "",
                    std::optional<std::string> origin = std::nullopt) {
    tcp::resolver resolver(io_);
    asio::connect(ws_.next_layer(), resolver.resolve("127.0.0.1", std::to_string(port)));
    std::string own = origin ? *origin : "http://127.0.0.1:" + std::to_string(port);
    ws_.set_option(websocket::stream_base::decorator([own, token](websocket::request_type& req) {
      if (!own.empty()) req.set(http::field::origin, own);
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    }));
    ws_.handshake("127.0.0.1:" + std::to_string(port), "/ws");
    read();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~WsClient() {
    asio::post(io_, [this] {
      beast::error_code ec;
      ws_.next_layer().close(ec);
    });
    thread_.join();
  }

  void send(std::string text, bool binary = false) {
    asio::post(io_, [this, text = std::make_shared<std::string>(std::move(text)), binary] {
      ws_.binary(binary);
      ws_.async_write(asio::buffer(*text), [text](beast::error_code, size_t) {});
    });
  }

  // The first message (at or after `from`) that `match` accepts.
  bool wait(const std::function<bool(const json&)>& match, json* out = nullptr, size_t from = 0, int seconds = 30) {
    return poll_until(
        [&] {
          std::lock_guard lock(mutex_);
          for (size_t i = from; i < messages_.size(); ++i) {
            if (match(messages_[i].message)) {
              if (out) *out = messages_[i].message;
              return true;
            }
          }
          return false;
        },
        seconds);
  }
  size_t count() {
    std::lock_guard lock(mutex_);
    return messages_.size();
  }
  bool closed() {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  unsigned close_code() {
    std::lock_guard lock(mutex_);
    return close_code_;
  }
  std::vector<Received> received() {
    std::lock_guard lock(mutex_);
    return messages_;
  }

  // Whether `done` holds within `seconds`, looked at every 50 ms.
  static bool poll_until(const std::function<bool()>& done, int seconds) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();  // once more (the only look with 0 s)
  }

 private:

  void read() {
    ws_.async_read(buffer_, [this](beast::error_code ec, size_t) {
      std::lock_guard lock(mutex_);
      if (ec) {
        closed_ = true;
        close_code_ = ws_.reason().code;
        return;
      }
      const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      messages_.push_back({now, json::parse(beast::buffers_to_string(buffer_.data()), nullptr, false)});
      buffer_.consume(buffer_.size());
      read();
    });
  }

  asio::io_context io_;
  websocket::stream<tcp::socket> ws_{io_};
  beast::flat_buffer buffer_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Received> messages_;
  bool closed_ = false;
  unsigned close_code_ = 0;
};

}  // namespace carapace::testing
