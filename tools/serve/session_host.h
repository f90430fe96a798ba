// SessionHost: the write side of `carapace serve` in host mode
// (docs/serve.md, "Hosting sessions"). It answers the API's POSTs (start a
// session, send it a message, stop, resume, fork, answer an approval) and
// GET /api/approvals through the Runtime the server opened, as the single
// writer of the home; the read side stays HomeView's.
//
// Every body is checked before anything is written: a JSON object (depth
// and size bounded), no unknown field, every field of its type and within
// its bounds, a workspace only as a relative path under the workspace root
// (no `..`, no symbolic link on the way). A refused request changes nothing.
//
// What sessions do live reaches the page through the publisher (called on
// an actor thread): a streamed piece of an answer ({"type": "delta"}, for
// the session's watchers) and an approval request a session parks on
// ({"type": "approval"}, for every client). Both pass the home's redactor,
// as everything the server answers does; a secret split between two
// streamed pieces is masked only in the answer the log keeps.
//
// Thread-safe: the server calls it from its worker threads.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/runtime.h"
#include "tools/serve/home_view.h"

namespace carapace::web {

// The largest body a POST may have.
inline constexpr size_t kPostBodyLimit = 64 * 1024;

struct HostOptions {
  std::string workspace_root;  // sessions' workspaces are made under it (it exists, owner-only)
  std::string who;             // recorded as who answered an approval ("user@host (pid N)")
  const Redactor* redactor = nullptr;  // what it publishes and lists passes it (required)
};

// The reason a stop over the API records; and the one a stopped server
// records for the sessions it was running (resumed at its next start).
inline constexpr std::string_view kApiStopReason = "stopped over the API";
inline constexpr std::string_view kServeStopPrefix = "carapace serve stopped";

class ScheduleRunner;

class SessionHost {
 public:
  explicit SessionHost(HostOptions options) : options_(std::move(options)) {}

  // The runtime it drives (whose on_approval and observe_delta call this
  // host: it must outlive the runtime), once open.
  void attach(Runtime* runtime) { runtime_ = runtime; }
  // Where what sessions do goes (WebServer::publisher()); until it is set,
  // nothing is published.
  void set_publisher(std::function<void(LiveMessage)> publish);

  // The schedules it answers /api/schedules with (null: 404); set once, before the server starts.
  void set_schedules(ScheduleRunner* schedules) { schedules_ = schedules; }

  // A POST to `path` (under /api/) with `body`.
  ApiReply post(std::string_view path, std::string_view body);
  // GET /api/schedules[/NAME].
  ApiReply get_schedules(std::string_view path);
  // GET /api/approvals[?session=ID].
  ApiReply approvals(std::string_view query);

  // Starts a schedule's run as POST /api/sessions does: `options` with its
  // id and task, in the workspace `workspace` names under the root (""
  // ROOT/ID). already_exists-like refusals come back as the runtime's.
  Status start_run(SessionOptions options, const std::string& workspace);

  // Told by the runtime (Runtime::Options::on_approval).
  void on_approval(const Approval& request);

  // Told by the runtime (Runtime::Options::observe_delta): a piece of a
  // session's answer as it streams, whatever started the run (a start, a
  // message, a resume, a fork, an approval that woke it).
  void on_delta(const std::string& session, const StreamDelta& delta);

 private:
  ApiReply start(const nlohmann::json& body);
  ApiReply message(const std::string& session, const nlohmann::json& body);
  ApiReply stop(const std::string& session, const nlohmann::json& body);
  ApiReply resume(const std::string& session, const nlohmann::json& body);
  ApiReply fork(const std::string& session, const nlohmann::json& body);
  ApiReply decide(const std::string& session, const std::string& call, const nlohmann::json& body);
  // The workspace `relative` names under the root, made owner-only; or why not.
  Status workspace_for(const std::string& relative, std::string* path) const;

  void publish(LiveMessage message);

  Runtime* runtime_ = nullptr;
  ScheduleRunner* schedules_ = nullptr;
  HostOptions options_;
  std::mutex publish_mu_;
  std::function<void(LiveMessage)> publish_;
};

// The HTTP status for a Status the runtime answered.
unsigned http_status_of(const Status& s);
// api_error() with that status and the Status's message.
ApiReply api_failed(const Status& s, std::string hint = "");

}  // namespace carapace::web
