// provider_bench: what the HTTP providers cost, each figure against its raw
// baseline in the same run.
//
//   build/bench/provider_bench [--mb N] [--requests N] [--sessions N] [--dir DIR] [--quick]
//
// (a) parse   a recorded stream of ~N MB in each format (OpenAI chunks,
//             Anthropic events: text in small pieces, some tool calls) fed in
//             16 KB pieces, as libcurl hands them over, through what an
//             attempt does with each piece (keep the raw bytes, SseParser,
//             the format's StreamDecoder, a delta sink) vs splitting the same
//             pieces into lines with memchr. Beside them, nlohmann's
//             json::parse of every event's data alone: what bounds the parse.
// (b) request a 300-token streamed reply (OpenAI format) from a server on
//             127.0.0.1 through OpenAiProvider (the HttpClient's I/O thread,
//             the decoder, the body store) vs the same request made with a
//             bare libcurl easy handle that only counts the bytes; both reuse
//             their connection. Sent at once, and paced at 1 ms a token (a
//             fast local model).
// (c) wait    sessions of the runtime whose model (the openai provider)
//             answers after 500 ms: 1 session, then N at once; wall time of
//             each and the process's threads while they wait.
//
// The server runs in a child process forked before any thread starts, so its
// threads are not counted in (c). Prints a table, then one JSON object as the
// last line.
#include <curl/curl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/logging.h"
#include "actors/provider/anthropic_provider.h"
#include "actors/provider/openai_provider.h"
#include "actors/provider/sse_parser.h"
#include "runtime/runtime.h"
#include "storage/body_store.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "provider_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return 0;
}

// The decoders are protected in the providers: opened up for the benchmark.
struct OpenAi : OpenAiProvider {
  using OpenAiProvider::decoder;
  using OpenAiProvider::OpenAiProvider;
};
struct Anthropic : AnthropicProvider {
  using AnthropicProvider::AnthropicProvider;
  using AnthropicProvider::decoder;
};

// An answer of `pieces` text pieces (tokens of 1-8 bytes, some multi-byte)
// and a tool call every 200 pieces whose arguments come in 20 fragments.
testing::WireAnswer long_answer(size_t pieces) {
  static const char* kWords[] = {"the", " model", " wrote", " caf\xC3\xA9", " 5 \xE2\x82\xAC", ",", " and", " then",
                                 "\n", " tokens", " of", " text", " \xF0\x9F\x98\x80", " here", ".", " It"};
  testing::WireAnswer a;
  for (size_t i = 0; i < pieces; ++i) a.text_pieces.push_back(kWords[(i * 7 + i / 3) % 16]);
  for (size_t c = 0; c < pieces / 200; ++c) {
    testing::WireToolCall call{.id = "call_" + std::to_string(c), .name = "write_file"};
    call.arg_pieces.push_back("{\"path\": \"f" + std::to_string(c) + ".txt\", \"content\": \"");
    for (int f = 0; f < 18; ++f) call.arg_pieces.push_back("line " + std::to_string(f) + "\\n");
    call.arg_pieces.push_back("\"}");
    a.calls.push_back(std::move(call));
  }
  a.input = 1200;
  a.output = pieces;
  return a;
}

// A stream of about `bytes` in `format`.
std::string stream_of_size(const std::string& format, size_t bytes) {
  auto render = [&](size_t pieces) {
    testing::WireAnswer a = long_answer(pieces);
    return format == "openai" ? testing::openai_stream(a) : testing::anthropic_stream(a);
  };
  size_t per_piece = render(1000).size() / 1000;
  return render(std::max<size_t>(1000, bytes / per_piece));
}

struct ParseFigures {
  double mb = 0;
  size_t events = 0;
  double carapace_mb_s = 0, memchr_mb_s = 0, json_only_mb_s = 0;
  // The parts of the path alone: SseParser with an empty sink; simdjson's
  // DOM parse of every event's data (what the decoders parse with).
  double sse_only_mb_s = 0, simdjson_only_mb_s = 0;
};

// (a) for one format.
ParseFigures measure_parse(const std::string& format, size_t bytes, int rounds) {
  std::string stream = stream_of_size(format, bytes);
  ParseFigures f;
  f.mb = static_cast<double>(stream.size()) / 1e6;
  constexpr size_t kPiece = 16 * 1024;
  HttpProviderOptions options{.base_url = "http://127.0.0.1:1"};
  auto client = std::make_shared<HttpClient>();
  std::shared_ptr<HttpProvider> provider;
  if (format == "openai") {
    provider = std::make_shared<OpenAi>(options, client, nullptr);
  } else {
    provider = std::make_shared<Anthropic>(options, client, nullptr);
  }
  double best_carapace = 1e100, best_memchr = 1e100, best_json = 1e100, best_sse = 1e100,
         best_simdjson = 1e100;
  size_t sink_bytes = 0, lines = 0;
  std::vector<std::string> payloads;
  {
    SseParser p;
    p.feed(stream, [&](const SseEvent& e) { payloads.push_back(e.data); });
    f.events = payloads.size();
  }
  for (int r = 0; r < rounds; ++r) {
    // Carapace: what an attempt does with each piece.
    auto start = Clock::now();
    std::unique_ptr<StreamDecoder> decoder = format == "openai" ? static_cast<OpenAi&>(*provider).decoder("{}")
                                                                : static_cast<Anthropic&>(*provider).decoder("{}");
    SseParser parser;
    std::string raw;
    ProviderFailure failure;
    bool failed = false;
    DeltaSink on_delta = [&sink_bytes](const StreamDelta& d) { sink_bytes += d.text.size() + d.args_fragment.size(); };
    for (size_t at = 0; at < stream.size(); at += kPiece) {
      std::string_view piece = std::string_view(stream).substr(at, kPiece);
      raw.append(piece);
      parser.feed(piece, [&](const SseEvent& e) {
        if (!failed && !decoder->on_event(e, on_delta, &failure)) failed = true;
      });
    }
    ProviderResponse response = decoder->finish();
    best_carapace = std::min(best_carapace, seconds_since(start));
    if (failed || !decoder->complete() || response.tool_calls.empty()) {
      std::fprintf(stderr, "provider_bench: the %s stream did not decode: %s\n", format.c_str(), failure.error.c_str());
      std::exit(1);
    }
    // Baseline: lines split with memchr, the same pieces.
    start = Clock::now();
    for (size_t at = 0; at < stream.size(); at += kPiece) {
      std::string_view piece = std::string_view(stream).substr(at, kPiece);
      const char* p = piece.data();
      const char* end = p + piece.size();
      while (const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)))) {
        ++lines;
        p = nl + 1;
      }
    }
    best_memchr = std::min(best_memchr, seconds_since(start));
    // What bounds it: every event's JSON parsed, nothing else.
    start = Clock::now();
    size_t keys = 0;
    for (const auto& data : payloads) {
      json j = json::parse(data, nullptr, false);
      keys += j.is_object() ? j.size() : 1;
    }
    best_json = std::min(best_json, seconds_since(start));
    sink_bytes += keys;
    // The SSE parser alone, the same pieces.
    start = Clock::now();
    {
      SseParser sse;
      size_t seen = 0;
      for (size_t at = 0; at < stream.size(); at += kPiece) {
        sse.feed(std::string_view(stream).substr(at, kPiece),
                 [&seen](const SseEvent& e) { seen += e.data.size(); });
      }
      sink_bytes += seen;
    }
    best_sse = std::min(best_sse, seconds_since(start));
    // simdjson's DOM parse of every event's data alone, one parser reused.
    start = Clock::now();
    {
      simdjson::dom::parser dom;
      for (const auto& data : payloads) {
        simdjson::dom::element root;
        keys += dom.parse(data.data(), data.size(), true).get(root) == simdjson::SUCCESS && root.is_object();
      }
    }
    best_simdjson = std::min(best_simdjson, seconds_since(start));
    sink_bytes += keys;
  }
  if (sink_bytes == 0 || lines == 0) std::exit(1);
  f.carapace_mb_s = f.mb / best_carapace;
  f.memchr_mb_s = f.mb / best_memchr;
  f.json_only_mb_s = f.mb / best_json;
  f.sse_only_mb_s = f.mb / best_sse;
  f.simdjson_only_mb_s = f.mb / best_simdjson;
  return f;
}

// ---- the server child ---------------------------------------------------------

// Serves on 127.0.0.1 until killed; writes its port to `port_fd`. The
// request's model says how to answer: "paced-<us>" (300 tokens, <us> between
// events), "delay-<ms>" (a short answer after <ms>), else 300 tokens at once.
[[noreturn]] void serve(int port_fd) {
  testing::WireAnswer tokens;
  for (int i = 0; i < 300; ++i) tokens.text_pieces.push_back(i % 5 == 0 ? " token" : "s");
  tokens.input = 50;
  tokens.output = 300;
  const std::string stream = testing::openai_stream(tokens);
  std::vector<size_t> cuts;  // one piece per event
  for (size_t at = stream.find("\n\n"); at != std::string::npos; at = stream.find("\n\n", at + 2)) {
    if (at + 2 < stream.size()) cuts.push_back(at + 2);
  }
  const std::string short_answer = testing::openai_stream(testing::WireAnswer{.text_pieces = {"done"}});
  testing::MockLlmServer server;
  server.set_handler([&](const testing::MockRequest& r, size_t) {
    std::string model = json::parse(r.body, nullptr, false).value("model", "");
    testing::MockReply reply{.headers = {"Content-Type: text/event-stream"}, .body = stream};
    if (model.rfind("delay-", 0) == 0) {
      reply.body = short_answer;
      reply.delay_ms = std::stoi(model.substr(6));
    } else if (model.rfind("paced-", 0) == 0) {
      reply.cuts = cuts;
      reply.pace_us = std::stoi(model.substr(6));
    } else {
      reply.pace_us = 0;
    }
    return reply;
  });
  uint16_t port = static_cast<uint16_t>(std::stoi(server.url().substr(server.url().rfind(':') + 1)));
  [[maybe_unused]] ssize_t n = ::write(port_fd, &port, sizeof port);
  ::close(port_fd);
  for (;;) ::pause();
}

// ---- (b) ----------------------------------------------------------------------

size_t count_bytes(char*, size_t size, size_t n, void* user) {
  *static_cast<size_t*>(user) += size * n;
  return size * n;
}

struct RequestFigures {
  double provider_ms = 0, curl_ms = 0;
  double provider_capture_ms = 0;
};

RequestFigures measure_requests(const std::string& url, const std::string& model, int requests, const fs::path& dir) {
  RequestFigures f;
  ProviderRequest request{.session_id = "bench", .turn = 1, .attempt = 1, .model = model,
                          .messages = {Message{.role = Role::kUser, .text = "Say 300 tokens."}}};
  auto client = std::make_shared<HttpClient>();
  std::unique_ptr<BodyStore> store;
  check(BodyStore::open((dir / ("bodies-" + model)).string(), BodyStore::Mode::kWriter, &store), "body store");
  std::shared_ptr<BodyStore> bodies = std::move(store);
  auto plain = std::make_shared<OpenAiProvider>(HttpProviderOptions{.base_url = url + "/v1"}, client, nullptr);
  auto capturing = std::make_shared<OpenAiProvider>(HttpProviderOptions{.base_url = url + "/v1"}, client, bodies);
  std::string body = plain->render_request(request);

  CURL* easy = curl_easy_init();
  size_t got = 0;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: text/event-stream");
  headers = curl_slist_append(headers, "Expect:");
  std::string endpoint = url + "/v1/chat/completions";
  curl_easy_setopt(easy, CURLOPT_URL, endpoint.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, count_bytes);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &got);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);

  auto run_provider = [&](Provider& p) {
    size_t deltas = 0;
    ProviderReply r = p.call(request, [&deltas](const StreamDelta&) { ++deltas; });
    if (!r.ok || deltas < 300) {
      std::fprintf(stderr, "provider_bench: the provider's request failed: %s\n", r.failure.error.c_str());
      std::exit(1);
    }
  };
  auto run_curl = [&] {
    got = 0;
    CURLcode c = curl_easy_perform(easy);
    if (c != CURLE_OK || got < 1000) {
      std::fprintf(stderr, "provider_bench: curl: %s\n", curl_easy_strerror(c));
      std::exit(1);
    }
  };
  run_provider(*plain);  // warm: connections open
  run_curl();
  double provider = 0, curl = 0, capture = 0;
  for (int i = 0; i < requests; ++i) {  // interleaved, so that noise hits both
    auto start = Clock::now();
    run_provider(*plain);
    provider += seconds_since(start);
    start = Clock::now();
    run_curl();
    curl += seconds_since(start);
    start = Clock::now();
    run_provider(*capturing);
    capture += seconds_since(start);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(easy);
  f.provider_ms = provider * 1000 / requests;
  f.curl_ms = curl * 1000 / requests;
  f.provider_capture_ms = capture * 1000 / requests;
  return f;
}

// ---- (c) ----------------------------------------------------------------------

struct WaitFigures {
  double one_s = 0, many_s = 0;
  int threads_idle = 0, threads_max = 0;
  int sessions = 0;
};

WaitFigures measure_waiting(const std::string& url, int sessions, const fs::path& dir) {
  WaitFigures f;
  f.sessions = sessions;
  fs::create_directories(dir / "ws");
  Config config;
  config.provider.name = "openai";
  config.provider.model = "delay-500";
  config.provider.base_url = url + "/v1";
  config.tools_enabled = {};
  config.workspace = (dir / "ws").string();
  std::unique_ptr<Runtime> rt;
  check(Runtime::open(Runtime::Options{.home = (dir / "home").string(), .config = config, .builtin_tools = true}, &rt), "runtime");
  auto run_many = [&](int n, const std::string& prefix) {
    auto start = Clock::now();
    // Started from several threads at once, as a server's request handlers
    // would: each start is durable before it returns, and the log's group
    // commit shares the syncs of starts that overlap.
    std::vector<std::string> ids(static_cast<size_t>(n));
    std::vector<std::thread> starters;
    const int kStarters = std::min(n, 16);
    for (int t = 0; t < kStarters; ++t) {
      starters.emplace_back([&, t] {
        for (int i = t; i < n; i += kStarters) {
          check(rt->start_session(SessionOptions{.id = prefix + std::to_string(i), .task = "wait"},
                                  &ids[static_cast<size_t>(i)]),
                "start");
        }
      });
    }
    for (auto& t : starters) t.join();
    std::atomic<bool> done{false};
    std::thread sampler([&] {
      while (!done) {
        f.threads_max = std::max(f.threads_max, thread_count() - 1);  // not the sampler
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    for (const auto& id : ids) {
      SessionOutcome out;
      check(rt->wait(id, std::chrono::minutes(5), &out), "wait");
      if (out.status != SessionStatus::kCompleted) {
        std::fprintf(stderr, "provider_bench: session %s: %s\n", id.c_str(), out.error.c_str());
        std::exit(1);
      }
    }
    done = true;
    sampler.join();
    double total = seconds_since(start);
    return total;
  };
  run_many(1, "warm-");
  f.threads_idle = thread_count();
  f.one_s = run_many(1, "one-");
  f.many_s = run_many(sessions, "many-");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  // Warnings and errors only: the runtime logs every turn at info level.
  (void)carapace::configure_logging(carapace::LogOptions{});
  // The server first, while this process has one thread.
  int fds[2];
  if (::pipe(fds) != 0) return 1;
  pid_t server_pid = ::fork();
  if (server_pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the benchmark, whichever way it ends
    ::close(fds[0]);
    serve(fds[1]);
  }
  ::close(fds[1]);
  uint16_t port = 0;
  if (::read(fds[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "provider_bench: the server did not start\n");
    return 1;
  }
  ::close(fds[0]);
  struct KillServer {
    pid_t pid;
    ~KillServer() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } kill_server{server_pid};
  std::string url = "http://127.0.0.1:" + std::to_string(port);

  CLI::App app{"HTTP provider costs against raw baselines"};
  size_t mb = 10;
  int requests = 200;
  int sessions = 200;
  std::string dir_flag;
  bool quick = false;
  app.add_option("--mb", mb, "Size of the recorded streams of (a), in MB");
  app.add_option("--requests", requests, "Requests of (b), per variant");
  app.add_option("--sessions", sessions, "Sessions at once in (c)");
  app.add_option("--dir", dir_flag, "Work directory (default: a temporary one, removed)");
  app.add_flag("--quick", quick, "Tiny sizes: checks the benchmark runs, measures nothing useful");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    mb = 1;
    requests = 3;
    sessions = 5;
  }
  fs::path dir = dir_flag.empty() ? fs::temp_directory_path() / ("provider-bench-" + std::to_string(::getpid()))
                                  : fs::path(dir_flag) / ("provider-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  ParseFigures openai = measure_parse("openai", mb * 1000 * 1000, quick ? 1 : 5);
  ParseFigures anthropic = measure_parse("anthropic", mb * 1000 * 1000, quick ? 1 : 5);
  RequestFigures at_once = measure_requests(url, "at-once", requests, dir);
  RequestFigures paced = measure_requests(url, "paced-1000", std::max(1, requests / 10), dir);
  WaitFigures waiting = measure_waiting(url, sessions, dir / "wait");
  fs::remove_all(dir);

  std::printf("%-66s %10s %10s %7s\n", "measurement", "carapace", "baseline", "ratio");
  auto row = [](const std::string& what, double a, double b, int precision = 1) {
    if (b > 0) {
      std::printf("%-66s %10.*f %10.*f %7.2f\n", what.c_str(), precision, a, precision, b, a / b);
    } else {
      std::printf("%-66s %10.*f\n", what.c_str(), precision, a);
    }
  };
  for (const auto& [name, f] : {std::pair{"openai", openai}, std::pair{"anthropic", anthropic}}) {
    char what[128];
    std::snprintf(what, sizeof what, "(a) %s stream, %.1f MB, %zu events, vs memchr lines [MB/s]", name, f.mb,
                  f.events);
    row(what, f.carapace_mb_s, f.memchr_mb_s);
    row("    vs json::parse of each event's data alone [MB/s]", f.carapace_mb_s, f.json_only_mb_s);
    row("    vs simdjson's DOM parse of each event's data alone [MB/s]", f.carapace_mb_s,
        f.simdjson_only_mb_s);
    row("    vs SseParser alone, an empty sink [MB/s]", f.carapace_mb_s, f.sse_only_mb_s);
  }
  // Ratios as throughput: the baseline's time over Carapace's.
  row("(b) 300 tokens at once, provider vs bare curl easy handle [ms]", at_once.provider_ms, at_once.curl_ms, 3);
  std::printf("%-66s %10s %10s %7.2f\n", "    as throughput", "", "", at_once.curl_ms / at_once.provider_ms);
  row("    with the response captured in the body store (synced) [ms]", at_once.provider_capture_ms, at_once.curl_ms, 3);
  row("(b) 300 tokens paced 1 ms each, provider vs bare curl [ms]", paced.provider_ms, paced.curl_ms, 3);
  std::printf("%-66s %10s %10s %7.2f\n", "    as throughput", "", "", paced.curl_ms / paced.provider_ms);
  char what[128];
  std::snprintf(what, sizeof what, "(c) %d sessions at once vs 1, model answers after 500 ms [s]", waiting.sessions);
  row(what, waiting.many_s, waiting.one_s, 3);
  row("    threads: idle runtime, most while they waited", waiting.threads_idle, waiting.threads_max, 0);

  json j = {{"parse_mb", openai.mb},
            {"openai_parse_mb_s", openai.carapace_mb_s},
            {"openai_memchr_mb_s", openai.memchr_mb_s},
            {"openai_json_only_mb_s", openai.json_only_mb_s},
            {"openai_simdjson_only_mb_s", openai.simdjson_only_mb_s},
            {"openai_sse_only_mb_s", openai.sse_only_mb_s},
            {"openai_ratio_vs_memchr", openai.carapace_mb_s / openai.memchr_mb_s},
            {"openai_ratio_vs_json_only", openai.carapace_mb_s / openai.json_only_mb_s},
            {"anthropic_parse_mb_s", anthropic.carapace_mb_s},
            {"anthropic_memchr_mb_s", anthropic.memchr_mb_s},
            {"anthropic_json_only_mb_s", anthropic.json_only_mb_s},
            {"anthropic_simdjson_only_mb_s", anthropic.simdjson_only_mb_s},
            {"anthropic_sse_only_mb_s", anthropic.sse_only_mb_s},
            {"anthropic_ratio_vs_memchr", anthropic.carapace_mb_s / anthropic.memchr_mb_s},
            {"anthropic_ratio_vs_json_only", anthropic.carapace_mb_s / anthropic.json_only_mb_s},
            {"at_once_provider_ms", at_once.provider_ms},
            {"at_once_curl_ms", at_once.curl_ms},
            {"at_once_capture_ms", at_once.provider_capture_ms},
            {"at_once_ratio", at_once.curl_ms / at_once.provider_ms},
            {"paced_provider_ms", paced.provider_ms},
            {"paced_curl_ms", paced.curl_ms},
            {"paced_ratio", paced.curl_ms / paced.provider_ms},
            {"wait_sessions", waiting.sessions},
            {"wait_one_s", waiting.one_s},
            {"wait_many_s", waiting.many_s},
            {"wait_ratio", waiting.many_s / waiting.one_s},
            {"threads_idle", waiting.threads_idle},
            {"threads_max_waiting", waiting.threads_max}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
