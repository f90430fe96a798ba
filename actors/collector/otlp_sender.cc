#include "actors/collector/otlp_sender.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <mutex>
#include <thread>

#include "base/curl_lib.h"

namespace carapace {
namespace {

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t n = size * count;
  if (body->size() < 4096) body->append(data, std::min(n, 4096 - body->size()));
  return n;
}

struct Headers {
  long retry_after_s = -1;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  size_t n = size * count;
  std::string line(data, n);
  std::string lower = line;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("http/", 0) == 0) static_cast<Headers*>(user)->retry_after_s = -1;  // a new response
  if (lower.rfind("retry-after:", 0) == 0) {
    std::string v = line.substr(12);
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t\r\n") + 1);
    size_t digits = 0;
    while (digits < v.size() && digits < 6 && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
    if (digits > 0 && digits == v.size()) {
      static_cast<Headers*>(user)->retry_after_s = std::stol(v);
    } else if (time_t when = curl_getdate(v.c_str(), nullptr); when != -1) {
      // An HTTP date: the wait until then.
      time_t now = std::time(nullptr);
      static_cast<Headers*>(user)->retry_after_s = when > now ? static_cast<long>(when - now) : 0;
    }
  }
  return n;
}

bool retryable(long status) { return status == 429 || status == 502 || status == 503 || status == 504; }

std::string one_line(std::string text) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (text.size() > 500) text = text.substr(0, 500) + "…";
  return text;
}

}  // namespace

std::string url_for_display(const std::string& url) {
  std::string out = url;
  size_t scheme = out.find("://");
  size_t host_at = scheme == std::string::npos ? 0 : scheme + 3;
  size_t path_at = out.find_first_of("/?#", host_at);
  size_t at = out.rfind('@', path_at == std::string::npos ? std::string::npos : path_at);
  if (at != std::string::npos && at >= host_at) out.erase(host_at, at + 1 - host_at);
  size_t cut = out.find_first_of("?#", host_at);
  if (cut != std::string::npos) out.erase(cut);
  return out;
}

Status otlp_traces_url(const std::string& endpoint, std::string* url) {
  size_t scheme = endpoint.find("://");
  std::string s = scheme == std::string::npos ? "" : endpoint.substr(0, scheme);
  if (s != "http" && s != "https") {
    return Status::invalid_argument("--endpoint '" + url_for_display(endpoint) +
                                    "' is not an http:// or https:// URL");
  }
  size_t host_at = scheme + 3;
  size_t path_at = endpoint.find_first_of("/?#", host_at);
  if (path_at == host_at || host_at >= endpoint.size()) {
    return Status::invalid_argument("--endpoint '" + url_for_display(endpoint) + "' has no host");
  }
  for (char c : endpoint) {
    if (static_cast<unsigned char>(c) <= ' ') return Status::invalid_argument("--endpoint has a space or a control character");
  }
  if (path_at == std::string::npos) {
    *url = endpoint + "/v1/traces";
  } else if (endpoint[path_at] != '/') {  // a query or fragment, no path
    *url = endpoint.substr(0, path_at) + "/v1/traces" + endpoint.substr(path_at);
  } else if (path_at + 1 == endpoint.size() || endpoint[path_at + 1] == '?' || endpoint[path_at + 1] == '#') {
    *url = endpoint.substr(0, path_at) + "/v1/traces" + endpoint.substr(path_at + 1);
  } else {
    *url = endpoint;
  }
  return Status();
}

Status otlp_send(const OtlpSendOptions& options, const std::string& payload, OtlpSendReport* report) {
  std::string url;
  CARAPACE_RETURN_IF_ERROR(otlp_traces_url(options.endpoint, &url));
  report->url = url_for_display(url);
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status::io_error("libcurl could not start: " + curl_load_error());
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  Status result;
  const int attempts = std::max(1, options.max_attempts);
  for (int attempt = 1;; ++attempt) {
    std::string body;
    Headers got;
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &got);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<uint64_t>(options.timeout_ms, 10'000)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "carapace-otlp");
    CURLcode code = curl_easy_perform(curl);
    report->attempts = attempt;
    long status = 0;
    std::string why;
    if (code == CURLE_OK) {
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
      report->status = status;
      report->body = body;
      if (status >= 200 && status < 300) break;
      why = "HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + one_line(body));
      if (!retryable(status)) {
        result = Status::invalid_argument("the OTLP receiver at " + report->url + " refused the export with " + why);
        break;
      }
    } else {
      why = curl_easy_strerror(code);
    }
    if (attempt >= attempts) {
      result = Status::io_error("the OTLP receiver at " + report->url + " did not take the export after " +
                                std::to_string(attempt) + " attempts: " + why);
      break;
    }
    uint64_t delay = std::min(options.max_delay_ms, options.base_delay_ms << std::min(attempt - 1, 20));
    if (got.retry_after_s >= 0) delay = std::min<uint64_t>(static_cast<uint64_t>(got.retry_after_s) * 1000, 60'000);
    if (options.on_retry) options.on_retry(attempt + 1, delay, why);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

}  // namespace carapace
