#include "actors/provider/http_provider.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <mutex>

#include "base/bounded_json.h"
#include "base/digest.h"
#include "storage/body_store.h"

namespace carapace {
namespace {

void scrub(std::string& text, const std::string& secret) {
  if (secret.empty()) return;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "[redacted]");
  }
}

// A body kept only in part may end inside the key a server echoed: that
// beginning of the key (8 bytes or more) goes too.
void scrub_cut_end(std::string& text, const std::string& secret) {
  for (size_t n = std::min(text.size(), secret.size() > 0 ? secret.size() - 1 : 0); n >= 8; --n) {
    if (text.compare(text.size() - n, n, secret, 0, n) == 0) {
      text.replace(text.size() - n, n, "[redacted]");
      return;
    }
  }
}

// Retry-After (seconds or an HTTP date), retry-after-ms and x-should-retry.
// The delay a server asks for is recorded as it was asked (the retry policy
// caps what is waited); only what no uint64_t holds is cut, to 2^53 ms.
uint64_t retry_ms(double ms) {
  constexpr double kMost = 9007199254740992.0;  // 2^53
  return ms >= kMost ? static_cast<uint64_t>(kMost) : static_cast<uint64_t>(ms);
}

void read_retry_headers(const std::map<std::string, std::string>& headers, ProviderFailure* f) {
  if (auto it = headers.find("retry-after-ms"); it != headers.end()) {
    const std::string& v = it->second;
    if (!v.empty() && v.find_first_not_of("0123456789.") == std::string::npos) {
      f->has_retry_after = true;
      f->retry_after_ms = retry_ms(std::strtod(v.c_str(), nullptr));
    }
  }
  if (auto it = headers.find("retry-after"); it != headers.end() && !f->has_retry_after) {
    const std::string& v = it->second;
    if (!v.empty() && v.find_first_not_of("0123456789.") == std::string::npos) {
      f->has_retry_after = true;
      f->retry_after_ms = retry_ms(std::strtod(v.c_str(), nullptr) * 1000);
    } else {
      time_t when = curl_getdate(v.c_str(), nullptr);
      if (when != -1) {
        time_t now = std::time(nullptr);
        f->has_retry_after = true;
        f->retry_after_ms = when > now ? static_cast<uint64_t>(when - now) * 1000 : 0;
      }
    }
  }
  if (auto it = headers.find("x-should-retry"); it != headers.end()) {
    if (it->second == "true" || it->second == "false") {
      f->has_should_retry = true;
      f->should_retry = it->second == "true";
    }
  }
}

// One attempt's state, shared by the client's callbacks (all on its I/O thread).
struct Attempt {
  ProviderRequest request;  // session, turn, attempt and model only (for deltas and messages)
  std::string request_body;
  std::string url;
  std::string raw;        // the response bytes as received (their beginning, past the store's limit)
  uint64_t received = 0;  // how many there were
  SseParser parser;
  std::unique_ptr<StreamDecoder> decoder;
  bool failed = false;
  ProviderFailure failure;
  DeltaSink on_delta;
  ReplySink done;
  uint64_t id = 0;
};

// What is kept of an error body when no body store keeps it: enough for its message.
constexpr uint64_t kRawKeptWithoutStore = 64 * 1024;

// A bound of docs/config.md's "Limits" that a response went past: permanent.
ProviderFailure over_limit(const std::string& what, const std::string& key, uint64_t limit) {
  return ProviderFailure{.error = what + " " + key + " (" + std::to_string(limit) +
                                  "); the attempt was stopped there. Raise " + key +
                                  " if the server is right to send that much"};
}

// A reply, or an event of its stream, nested past the JSON depth bound:
// permanent, as the other bounds.
ProviderFailure too_deep(const std::string& what) {
  return ProviderFailure{.error = what + ": JSON nested deeper than " + std::to_string(limits::kJsonDepth) +
                                  " levels (the limit on JSON depth, docs/config.md); the reply is refused"};
}

// A whole reply's tool calls against the bounds on them: their number, and
// the nesting of each one's arguments (a value nested deeper would crash
// whatever later copies or prints it). Permanent, as the other bounds.
bool tool_calls_within_bounds(const ProviderResponse& response, const HttpProviderOptions& o,
                              ProviderFailure* f) {
  if (response.tool_calls.size() > o.max_tool_calls) {
    *f = over_limit("the reply has more tool calls than", "provider.max_tool_calls", o.max_tool_calls);
    return false;
  }
  for (size_t i = 0; i < response.tool_calls.size(); ++i) {
    const ToolCall& c = response.tool_calls[i];
    if (json_depth_exceeds(c.args.text)) {
      *f =
          too_deep("the arguments of tool call " + std::to_string(i + 1) + " (" + c.name.substr(0, 64) + ")");
      return false;
    }
  }
  return true;
}

// The key of the timeout that ended a request, for its message.
std::string timeout_key(HttpTimeout t) {
  switch (t) {
    case HttpTimeout::kFirstByte:
      return "provider.first_byte_timeout_ms";
    case HttpTimeout::kIdle:
      return "provider.idle_timeout_ms";
    case HttpTimeout::kTotal:
      return "provider.max_stream_ms";
    default:
      return "";
  }
}

}  // namespace

HttpProvider::HttpProvider(HttpProviderOptions options, std::shared_ptr<HttpClient> client,
                           std::shared_ptr<BodyStore> bodies)
    : client_(std::move(client)) {
  while (!options.base_url.empty() && options.base_url.back() == '/') options.base_url.pop_back();
  shared_ = std::make_shared<const Shared>(Shared{std::move(options), std::move(bodies)});
}

namespace {

// An HTTP error status as a message saying what to check (never the key).
std::string describe_status(const HttpProviderOptions& options, const std::string& url, long status,
                            std::string_view body, const std::string& model) {
  std::string msg = "HTTP " + std::to_string(status) + " from " + url + ": " + error_text(body);
  switch (status) {
    case 401:
      msg += "; check the API key in $" + options.api_key_env + " (it was " +
             (options.api_key.empty() ? "not set" : "rejected") + ")";
      break;
    case 403:
      msg += "; check that the key in $" + options.api_key_env + " may use model \"" + model + "\"";
      break;
    case 404:
      msg += "; check provider.base_url (" + options.base_url + ") and the model name (\"" + model + "\")";
      break;
    case 400:
      msg += "; check the model name (\"" + model + "\") and provider.max_tokens / provider.temperature";
      break;
    default:
      break;
  }
  scrub(msg, options.api_key);
  return msg;
}

}  // namespace

uint64_t HttpProvider::start(const ProviderRequest& request, DeltaSink on_delta, ReplySink done) {
  auto a = std::make_shared<Attempt>();
  a->request.session_id = request.session_id;
  a->request.turn = request.turn;
  a->request.attempt = request.attempt;
  a->request.model = request.model;
  a->request_body = render_request(request);
  a->url = url();
  a->decoder = decoder(a->request_body);
  const HttpProviderOptions& opts = shared_->options;
  a->parser = SseParser(opts.max_line_bytes);
  if (on_delta) {
    a->on_delta = [a_raw = a.get(), sink = std::move(on_delta)](const StreamDelta& d) {
      StreamDelta tagged = d;
      tagged.session_id = a_raw->request.session_id;
      tagged.turn = a_raw->request.turn;
      tagged.attempt = a_raw->request.attempt;
      sink(tagged);
    };
  }
  a->done = std::move(done);

  HttpRequest http{.url = a->url,
                   .headers = auth_headers(),
                   .body = a->request_body,
                   .connect_timeout_ms = opts.connect_timeout_ms,
                   .first_byte_timeout_ms = opts.first_byte_timeout_ms,
                   .idle_timeout_ms = opts.idle_timeout_ms,
                   .total_timeout_ms = opts.max_stream_ms};
  http.headers.push_back("Content-Type: application/json");
  if (opts.stream) http.headers.push_back("Accept: text/event-stream");
  for (const auto& h : opts.extra_headers) http.headers.push_back(h);

  const uint64_t raw_kept = shared_->bodies ? shared_->bodies->max_body_bytes() : kRawKeptWithoutStore;
  auto on_body = [a, shared = shared_, raw_kept](long status, std::string_view bytes) {
    const HttpProviderOptions& o = shared->options;
    if (a->failed) return false;
    a->received += bytes.size();
    if (a->received > o.max_response_bytes) {
      a->failed = true;
      a->failure =
          over_limit("the response is longer than", "provider.max_response_bytes", o.max_response_bytes);
      return false;
    }
    bool is_2xx = status >= 200 && status < 300;
    // A body that may have to be parsed whole (not streamed, or nothing of
    // SSE in it yet: no event, no comment) is kept whole; otherwise only as
    // much as the body store keeps.
    if (is_2xx && (!o.stream || (a->parser.events() == 0 && a->parser.comments() == 0))) {
      a->raw.append(bytes);
    } else if (a->raw.size() < raw_kept) {
      a->raw.append(
          bytes.substr(0, static_cast<size_t>(std::min<uint64_t>(bytes.size(), raw_kept - a->raw.size()))));
    }
    if (!o.stream || !is_2xx || !a->decoder) return true;
    a->parser.feed(bytes, [&a, &o](const SseEvent& e) {
      if (a->failed) return;
      if (json_depth_exceeds(e.data)) {
        a->failed = true;
        a->failure = too_deep("an event of the response stream");
      } else if (!a->decoder->on_event(e, a->on_delta, &a->failure)) {
        a->failed = true;
      } else if (a->decoder->tool_call_count() > o.max_tool_calls) {
        a->failed = true;
        a->failure =
            over_limit("the reply has more tool calls than", "provider.max_tool_calls", o.max_tool_calls);
      }
    });
    if (!a->failed && a->parser.overflowed()) {
      a->failed = true;
      a->failure = over_limit("a line of the response stream (or the data of one event) is longer than",
                              "provider.max_line_bytes", o.max_line_bytes);
    }
    return !a->failed;  // a failed stream is not read further
  };
  auto on_done = [shared = shared_, a](HttpResult r) {
    const HttpProviderOptions& o = shared->options;
    ProviderReply reply;
    reply.latency_ms = r.latency_ms;
    reply.answered = r.status != 0;
    scrub(a->raw, o.api_key);
    ProviderFailure& f = reply.failure;
    bool is_2xx = r.status >= 200 && r.status < 300;
    if (a->failed) {
      f = a->failure;
    } else if (r.transport_failed && !(r.cancelled && a->failed)) {
      std::string key = timeout_key(r.timeout);
      std::string transport_error = r.error + (key.empty() ? "" : "; the limit is " + key);
      f.transport = true;
      f.error = r.error;
      if (is_2xx && r.timeout != HttpTimeout::kTotal) {
        f.error += " (after " + std::to_string(a->received) + " bytes of the response)";
      }
      if (!key.empty()) f.error += "; the limit is " + key;
      if (r.status != 0 && !is_2xx) {
        f.transport = false;
        f.http_status = static_cast<uint32_t>(r.status);
        f.error = describe_status(o, a->url, r.status, a->raw, a->request.model) +
                  " (then: " + transport_error + ")";
        read_retry_headers(r.headers, &f);
      }
    } else if (!is_2xx) {
      f.http_status = static_cast<uint32_t>(r.status);
      f.error = describe_status(o, a->url, r.status, a->raw, a->request.model);
      read_retry_headers(r.headers, &f);
    } else if (((o.stream && a->parser.events() == 0) || !o.stream) && json_depth_exceeds(a->raw)) {
      f = too_deep("the response");
    } else if (o.stream && a->parser.events() == 0 &&
               a->decoder->parse_whole(a->raw, &reply.response, &f.error)) {
      reply.ok = true;  // a server that does not stream answered with a whole body
    } else if (o.stream) {
      f.error.clear();
      if (!a->decoder->complete()) {
        f.transport = true;
        f.error = "the response stream ended without " + a->decoder->terminator() + " (after " +
                  std::to_string(a->received) + " bytes)";
      } else {
        reply.ok = true;
        reply.response = a->decoder->finish();
      }
    } else {
      std::string why;
      if (a->decoder->parse_whole(a->raw, &reply.response, &why)) {
        reply.ok = true;
      } else {
        f.transport = true;
        f.error = "malformed response: " + why;
      }
    }
    if (reply.ok && !tool_calls_within_bounds(reply.response, o, &f)) {
      reply.ok = false;
      reply.response.tool_calls.clear();  // nothing past a bound goes on
    }
    scrub(f.error, o.api_key);
    if (reply.ok) reply.failure = {};
    ReplySink done_sink = std::move(a->done);
    a->decoder.reset();
    if (!shared->bodies || a->raw.empty()) return done_sink(std::move(reply));
    if (a->raw.size() > shared->bodies->max_body_bytes()) a->raw.resize(shared->bodies->max_body_bytes());
    if (a->received > a->raw.size()) scrub_cut_end(a->raw, o.api_key);
    // The response bytes are durable before the reply (and so any event
    // referencing them) goes on; the store's writer thread syncs them, so
    // this thread goes back to the other transfers at once.
    shared->bodies->put_async(
        std::move(a->raw), a->received,
        [reply = std::move(reply), done_sink = std::move(done_sink)](Status s, std::string ref) mutable {
          if (s.ok()) reply.body_ref = std::move(ref);
          done_sink(std::move(reply));
        });
  };
  a->id = client_->start(std::move(http), on_body, on_done);
  return a->id;
}

void HttpProvider::cancel(uint64_t id) { client_->cancel(id); }

ProviderReply HttpProvider::call(const ProviderRequest& request, const DeltaSink& on_delta) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  ProviderReply out;
  start(request, on_delta, [&](ProviderReply r) {
    std::lock_guard lock(mu);
    out = std::move(r);
    ready = true;
    cv.notify_one();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return ready; });
  return out;
}

std::string generated_call_id(const std::string& request_body, size_t index) {
  return "call_" + digest128(request_body).hex().substr(0, 16) + "_" + std::to_string(index);
}

std::string error_text(std::string_view body) {
  nlohmann::json j = parse_stored_json(body);
  std::string text;
  if (j.is_object()) {
    if (j.contains("error") && j["error"].is_object()) {
      const auto& e = j["error"];
      if (e.contains("type") && e["type"].is_string()) text = e["type"].get<std::string>() + ": ";
      if (e.contains("message") && e["message"].is_string()) text += e["message"].get<std::string>();
    } else if (j.contains("error") && j["error"].is_string()) {
      text = j["error"].get<std::string>();
    } else if (j.contains("message") && j["message"].is_string()) {
      text = j["message"].get<std::string>();
    }
  }
  if (text.empty()) text = body.empty() ? "(empty body)" : std::string(body.substr(0, 500));
  return text;
}

bool is_loopback_url(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  std::string_view host = rest;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(1, host.find(']') - 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, written as a dotted IPv4 address (not a name starting "127.").
  if (host.substr(0, 4) != "127." || host.find_first_not_of("0123456789.") != std::string_view::npos) return false;
  return std::count(host.begin(), host.end(), '.') == 3;
}

}  // namespace carapace
