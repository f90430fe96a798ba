// What `carapace serve` knows of a home, as JSON: one row per session
// (status, tokens, cost, what it is doing now), a session's spans, one
// span's details with its verbatim bodies and message content; and, polled,
// a session's events a page at a time, the activity feed (the last
// retries, failures and crashes: read from the log at the start, then as they
// happen); and, polled, what changed since: the messages the page gets over
// its WebSocket (docs/serve.md has the API).
//
// It reads the home as a RocksDB secondary (no writer lock: `carapace run`
// works beside it) and follows the log with LogWatch, as the out-of-process
// collector does. A home with no log yet is shown empty until one appears.
// Everything it returns has passed the home's redactor.
//
// Not thread-safe: the server's one thread calls it.
#pragma once

#include <nlohmann/json.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/collector/log_watch.h"
#include "storage/event_log.h"
#include "runtime/session_options.h"
#include "storage/trace_store.h"
#include "tools/cli.h"

namespace carapace::web {

// An HTTP answer: the status code and the JSON body
// ({"success": true, "data", "summary"} or {"success": false, "error", "hint"}).
struct ApiReply {
  unsigned status = 200;
  nlohmann::json body;
};

// A message for the WebSocket clients: every client's, or only those that
// watch `watchers_of`.
struct LiveMessage {
  nlohmann::json message;
  std::string watchers_of;
};

// 200 {"success": true, "data": ..., "summary": ...}.
ApiReply api_ok(nlohmann::json data, std::string summary);
// {"success": false, "error": ..., "hint": ...}.
ApiReply api_error(unsigned status, std::string error, std::string hint = "");
// The body of every refusal and error the server answers, the CLI's --json
// envelope: {"success": false, "error": {"code", "message", "hint"}}, the
// code named from the HTTP status ("not found", "invalid argument", ...).
nlohmann::json error_body(unsigned status, std::string message, std::string hint = "");

// GET /api/approvals' query ("" or "session=ID"): false and the 400 to
// answer when it is not one of those.
bool approvals_query(std::string_view query, std::string* session, ApiReply* refused);
// Its answer: the requests (cli::approval_json), redacted.
ApiReply approvals_reply(const std::vector<Approval>& list, const Redactor& redactor);

class HomeView {
 public:
  // Reads every session's row (from the trace store where it is up to date,
  // else the log).
  static Status open(const cli::Context& ctx, std::unique_ptr<HomeView>* out);
  ~HomeView();

  // Answers a GET of `path` under /api/, with its query string (no '?').
  ApiReply get(std::string_view path, std::string_view query = {});

  // How many entries the activity feed keeps.
  static constexpr size_t kFeedMax = 50;
  // The activity feed, newest first: the status and error messages the
  // WebSocket carried ({"type", "session", "message", "at_us", ...}).
  nlohmann::json feed() const;

  // {"type": "hello", "version", "sessions": [rows], "feed": feed()}.
  nlohmann::json hello(const std::string& version) const;

  // {"type": "spans", "session", "spans": [every span], "skeleton", "last_us", "reset": true},
  // or false and an {"type": "error", "message"} in *out. Without `reset`
  // (the client has the spans), a session nothing writes gets
  // {"type": "spans", "spans": [], "reset": false}: no fold of it.
  bool watch_message(const std::string& session, nlohmann::json* out, bool reset = true);

  // Catches up with the log; the messages for what changed. The spans of a
  // session are sent only if `watched` (when given) says a client watches it.
  Status poll(std::vector<LiveMessage>* out, const std::function<bool(const std::string&)>& watched = {});

  size_t session_count() const { return rows_.size(); }

 private:
  struct Row {
    SessionMeta meta;
    uint64_t last_seq = 0;
    nlohmann::json totals = nlohmann::json::object();  // the session span's attributes
    uint64_t crashed_after = 0;
    std::string stopped;  // why, when its last event is session.stopped
    nlohmann::json live;  // null, or {"message", "retry_at_us"}
    std::string last_error;
  };
  explicit HomeView(const cli::Context& ctx) : ctx_(ctx) {}
  Status open_log();
  nlohmann::json row_json(const Row& row) const;
  // The session's spans and the time of its last event.
  Status spans_of(const std::string& session, std::vector<Span>* spans, int64_t* last_us);
  // spans_of, or false and the error to answer.
  bool load_spans(const std::string& session, std::vector<Span>* spans, int64_t* last_us, ApiReply* failed);
  // The session's spans: those its skeleton shows, or with `spans=all` every one.
  ApiReply get_session(const std::string& session, std::string_view query);
  // {"spans": those the skeleton shows, "skeleton", "span_count", "complete", "last_us"}, redacted.
  nlohmann::json outline_of(const std::vector<Span>& spans, int64_t last_us) const;
  ApiReply get_span(const std::string& session, const std::string& span_id);
  ApiReply get_events(const std::string& session, std::string_view query);
  // The approval requests that wait (every session's, or `session=ID`'s), as the log says.
  ApiReply get_approvals(std::string_view query);
  // GET /api/schedules[/NAME] of a read-only server, from the log.
  ApiReply get_schedules(std::string_view path);
  // Where the log holds a retry, a failure or a crash: the event at `seq`
  // (a crash: none, the session's last event at `at_us`).
  struct FeedSeed {
    int64_t at_us = 0;
    std::string session;
    uint64_t seq = 0;
    uint64_t crashed_after = 0;
  };
  static void feed_seeds_of(const std::vector<Span>& spans, uint64_t crashed_after, std::vector<FeedSeed>* seeds);
  // The feed from what the log holds: the last kFeedMax of `seeds`.
  void seed_feed(std::vector<FeedSeed> seeds);
  // A status or error message into the feed (redacted already), newest first.
  void remember(const nlohmann::json& message);
  // What the new events of a session say it is doing; status and error messages.
  void note_events(Row& row, const std::vector<Event>& events, uint64_t after_seq, std::vector<LiveMessage>* out);
  nlohmann::json redacted(nlohmann::json j) const;

  const cli::Context& ctx_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogWatch> watch_;
  std::map<std::string, Row> rows_;
  std::deque<nlohmann::json> feed_;
  // Each session's outline (outline_of), until it changes.
  std::map<std::string, nlohmann::json> outlines_;
};

}  // namespace carapace::web
