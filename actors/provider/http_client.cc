#include "actors/provider/http_client.h"

#include "base/clock.h"
#include "base/curl_lib.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace carapace {
namespace {

using Clock = std::chrono::steady_clock;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  uint64_t id = 0;
  HttpRequest request;
  HttpClient::BodySink on_body;
  HttpClient::DoneSink on_done;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpResult result;
  Clock::time_point started;
  Clock::time_point last_byte;
  bool got_byte = false;
  uint64_t body_bytes = 0;
  char error[CURL_ERROR_SIZE] = {0};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.substr(0, 5) == "HTTP/") {  // a new response (after a 100 Continue, a redirect)
    t->result.headers.clear();
    size_t sp = line.find(' ');
    if (sp != std::string_view::npos) t->result.status = std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  t->result.headers[name] = std::string(value);
  return size * n;
}

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->got_byte = true;
  t->last_byte = Clock::now();
  t->body_bytes += size * n;
  if (t->on_body && !t->on_body(t->result.status, std::string_view(data, size * n))) return 0;  // aborts
  return size * n;
}

}  // namespace

struct HttpClient::Impl {
  CURLM* multi = nullptr;
  std::thread thread;
  mutable std::mutex mu;
  std::deque<std::unique_ptr<Transfer>> starting;
  std::vector<uint64_t> cancelling;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{0};
  std::atomic<size_t> in_flight{0};
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> running;  // I/O thread only

  void run();
  void add(std::unique_ptr<Transfer> t);
  void finish(uint64_t id, CURLcode code, HttpTimeout timeout, bool cancelled, const std::string& why);
};

void HttpClient::Impl::add(std::unique_ptr<Transfer> t) {
  CURL* e = multi != nullptr ? curl_easy_init() : nullptr;
  t->easy = e;
  if (e == nullptr) {
    const uint64_t id = t->id;
    std::string why = curl_load_error();
    running.emplace(id, std::move(t));
    finish(id, CURLE_FAILED_INIT, HttpTimeout::kNone, false,
           "libcurl could not start" + (why.empty() ? std::string() : ": " + why));
    return;
  }
  for (const auto& h : t->request.headers) t->headers = curl_slist_append(t->headers, h.c_str());
  t->headers = curl_slist_append(t->headers, "Expect:");
  curl_easy_setopt(e, CURLOPT_URL, t->request.url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->request.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->request.body.size()));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(t->request.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(e, CURLOPT_PRIVATE, reinterpret_cast<void*>(t->id));
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  t->started = Clock::now();
  curl_multi_add_handle(multi, e);
  running.emplace(t->id, std::move(t));
}

void HttpClient::Impl::finish(uint64_t id, CURLcode code, HttpTimeout timeout, bool cancelled,
                              const std::string& why) {
  auto it = running.find(id);
  if (it == running.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  running.erase(it);
  curl_multi_remove_handle(multi, t->easy);
  HttpResult r = std::move(t->result);
  r.latency_ms = ms_since(t->started);
  r.timed_out = timeout != HttpTimeout::kNone || code == CURLE_OPERATION_TIMEDOUT;
  r.timeout = timeout;
  r.cancelled = cancelled;
  if (!why.empty()) {
    r.error = why;
    r.transport_failed = true;
  } else if (code != CURLE_OK) {
    r.error = std::string(curl_easy_strerror(code));
    if (t->error[0] != '\0') r.error += ": " + std::string(t->error);
    r.transport_failed = true;
  }
  curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->headers);
  in_flight.fetch_sub(1);
  if (t->on_done) t->on_done(std::move(r));
}

void HttpClient::Impl::run() {
  while (!stopping.load()) {
    {
      std::deque<std::unique_ptr<Transfer>> fresh;
      std::vector<uint64_t> cancel;
      {
        std::lock_guard lock(mu);
        fresh.swap(starting);
        cancel.swap(cancelling);
      }
      for (auto& t : fresh) add(std::move(t));
      for (uint64_t id : cancel) finish(id, CURLE_OK, HttpTimeout::kNone, true, "cancelled");
    }
    int still = 0;
    curl_multi_perform(multi, &still);
    while (CURLMsg* m = curl_multi_info_read(multi, &still)) {
      if (m->msg != CURLMSG_DONE) continue;
      void* p = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
      finish(reinterpret_cast<uint64_t>(p), m->data.result, HttpTimeout::kNone, false, "");
    }
    // The first-byte, idle and total timeouts, measured here (curl's own
    // only bound the whole transfer, and would not say which one fired).
    struct Expired {
      uint64_t id;
      HttpTimeout timeout;
      std::string why;
    };
    std::vector<Expired> expired;
    for (auto& [id, t] : running) {
      const HttpRequest& rq = t->request;
      if (rq.total_timeout_ms > 0 && ms_since(t->started) > rq.total_timeout_ms) {
        expired.push_back({id, HttpTimeout::kTotal,
                           "timed out: the response was still coming after " +
                               std::to_string(rq.total_timeout_ms) + " ms (total timeout, after " +
                               std::to_string(t->body_bytes) + " bytes of it)"});
      } else if (!t->got_byte && ms_since(t->started) > rq.first_byte_timeout_ms) {
        expired.push_back({id, HttpTimeout::kFirstByte,
                           "timed out: no response within " + std::to_string(rq.first_byte_timeout_ms) +
                               " ms (first-byte timeout)"});
      } else if (t->got_byte && ms_since(t->last_byte) > rq.idle_timeout_ms) {
        expired.push_back({id, HttpTimeout::kIdle,
                           "timed out: the response stalled for more than " +
                               std::to_string(rq.idle_timeout_ms) + " ms (idle timeout)"});
      }
    }
    for (auto& e : expired) finish(e.id, CURLE_OPERATION_TIMEDOUT, e.timeout, false, e.why);
    if (curl_multi_poll(multi, nullptr, 0, running.empty() ? 1000 : 20, nullptr) == CURLM_BAD_HANDLE) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // no libcurl: each request fails in add()
    }
  }
  std::vector<uint64_t> ids;
  for (auto& [id, t] : running) ids.push_back(id);
  for (uint64_t id : ids)
    finish(id, CURLE_OK, HttpTimeout::kNone, true, "cancelled: the client is shutting down");
}

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) {
  global_init();
  impl_->multi = curl_multi_init();
  curl_multi_setopt(impl_->multi, CURLMOPT_MAXCONNECTS, 256L);
  impl_->thread = std::thread([this] { impl_->run(); });
}

HttpClient::~HttpClient() {
  impl_->stopping.store(true);
  curl_multi_wakeup(impl_->multi);
  impl_->thread.join();
  std::deque<std::unique_ptr<Transfer>> left;
  {
    std::lock_guard lock(impl_->mu);
    left.swap(impl_->starting);
  }
  for (auto& t : left) {
    HttpResult r;
    r.error = "cancelled: the client is shutting down";
    r.transport_failed = true;
    r.cancelled = true;
    if (t->on_done) t->on_done(std::move(r));
  }
  curl_multi_cleanup(impl_->multi);
}

uint64_t HttpClient::start(HttpRequest request, BodySink on_body, DoneSink on_done) {
  auto t = std::make_unique<Transfer>();
  t->id = ++impl_->next_id;
  t->request = std::move(request);
  t->on_body = std::move(on_body);
  t->on_done = std::move(on_done);
  uint64_t id = t->id;
  impl_->in_flight.fetch_add(1);
  {
    std::lock_guard lock(impl_->mu);
    impl_->starting.push_back(std::move(t));
  }
  curl_multi_wakeup(impl_->multi);
  return id;
}

void HttpClient::cancel(uint64_t id) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->cancelling.push_back(id);
  }
  curl_multi_wakeup(impl_->multi);
}

size_t HttpClient::in_flight() const { return impl_->in_flight.load(); }

}  // namespace carapace
