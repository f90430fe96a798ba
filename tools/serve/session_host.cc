#include "tools/serve/session_host.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "base/bounded_json.h"
#include "tools/cli_run.h"
#include "tools/serve/schedule_runner.h"
#include "tools/serve/web_access.h"

namespace carapace::web {
namespace {

using nlohmann::json;

constexpr size_t kTextLimit = 60 * 1024;   // a task, a message, an answer
constexpr size_t kShortLimit = 1024;       // a reason, a model name
constexpr size_t kIdLimit = 128;
constexpr uint64_t kTurnLimit = 100'000;

// The fields of a request body, checked: each known, of its type and bounds.
class Body {
 public:
  explicit Body(const json& j) : j_(j) {}

  // A string field; `required`: it must be there and not empty.
  bool text(const char* name, std::string* out, size_t limit, bool required = false) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) {
      if (required) return fail(std::string("\"") + name + "\" is required");
      return true;
    }
    if (!it->is_string()) return fail(std::string("\"") + name + "\" must be a string");
    const auto& s = it->get_ref<const std::string&>();
    if (required && s.empty()) return fail(std::string("\"") + name + "\" must not be empty");
    if (s.size() > limit) {
      return fail(std::string("\"") + name + "\" is " + std::to_string(s.size()) + " bytes, over its limit of " +
                  std::to_string(limit));
    }
    *out = s;
    return true;
  }

  bool number(const char* name, uint64_t* out, uint64_t least, uint64_t most, bool required = false) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) {
      if (required) return fail(std::string("\"") + name + "\" is required");
      return true;
    }
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
      return fail(std::string("\"") + name + "\" must be a whole number");
    }
    const bool negative = it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0;
    uint64_t v = negative ? 0 : it->get<uint64_t>();
    if (negative || v < least || v > most) {
      return fail(std::string("\"") + name + "\" must be from " + std::to_string(least) + " to " +
                  std::to_string(most));
    }
    *out = v;
    return true;
  }

  // After the fields were read: one not asked for is an error.
  bool no_other_fields() {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!known_.count(it.key())) {
        std::string names;
        for (const auto& k : known_) names += (names.empty() ? "" : ", ") + k;
        return fail("unknown field \"" + it.key().substr(0, 64) + "\"" +
                    (names.empty() ? ": this request takes no field" : ": the fields are " + names));
      }
    }
    return error_.empty();
  }

  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  const json& j_;
  std::set<std::string> known_;
  std::string error_;
};

ApiReply refused(const Body& b, const std::string& hint = "") { return api_error(400, b.error(), hint); }

bool plain_component(const std::string& c) {
  if (c.empty() || c == "." || c == ".." || c.size() > 128) return false;
  for (unsigned char ch : c) {
    if (!(std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.')) return false;
  }
  return true;
}

}  // namespace

ApiReply api_failed(const Status& s, std::string hint) {
  return api_error(http_status_of(s), s.message().empty() ? s.to_string() : s.message(), std::move(hint));
}

unsigned http_status_of(const Status& s) {
  if (s.ok()) return 200;
  if (s.is_not_found()) return 404;
  if (s.is_invalid_argument()) return 400;
  if (s.is_busy() || s.is_already_finished() || s.is_needs_resume() || s.is_already_decided() || s.is_expired()) {
    return 409;
  }
  return 500;
}

void SessionHost::set_publisher(std::function<void(LiveMessage)> publish) {
  std::lock_guard lock(publish_mu_);
  publish_ = std::move(publish);
}

void SessionHost::publish(LiveMessage message) {
  std::function<void(LiveMessage)> to;
  {
    std::lock_guard lock(publish_mu_);
    to = publish_;
  }
  cli::redact_json(message.message, *options_.redactor);
  if (to) to(std::move(message));
}

void SessionHost::on_delta(const std::string& session, const StreamDelta& d) {
  if (d.text.empty()) return;
  publish(LiveMessage{.message = {{"type", "delta"}, {"session", session}, {"text", d.text}}, .watchers_of = session});
}

void SessionHost::on_approval(const Approval& a) {
  publish(LiveMessage{
      .message = {{"type", "approval"}, {"session", a.session_id}, {"request", cli::approval_json(a.session_id, a.seq, a.request)}},
      .watchers_of = ""});
}

ApiReply SessionHost::approvals(std::string_view query) {
  std::string session;
  if (ApiReply refused; !approvals_query(query, &session, &refused)) return refused;
  std::vector<Approval> list;
  Status s = runtime_->list_approvals(session, &list);
  if (!s.ok()) return api_failed(s, s.is_not_found() ? "GET /api/sessions lists the sessions" : "");
  return approvals_reply(list, *options_.redactor);
}

ApiReply SessionHost::post(std::string_view path, std::string_view text) {
  json body;
  Status parsed = parse_bounded_json(text.empty() ? "{}" : text, "the request body", &body, 16);
  if (!parsed.ok()) return api_error(400, parsed.message(), "send a JSON object");
  if (!body.is_object()) return api_error(400, "the request body must be a JSON object", "send {\"field\": value}");
  // /api/sessions, /api/sessions/ID/{messages,stop,resume,fork}, /api/sessions/ID/approvals/CALL
  auto parts = split_path(path.substr(std::string_view("/api/").size()));
  std::vector<std::string> decoded;
  for (const auto& p : parts) {
    std::string d;
    if (!percent_decode(p, &d)) return api_error(400, "a bad % escape in the path");
    decoded.push_back(std::move(d));
  }
  if (!decoded.empty() && decoded[0] == "schedules") {
    if (schedules_ == nullptr) return api_error(404, "this server runs no schedule");
    ApiReply reply = schedules_->post(path, body);
    cli::redact_json(reply.body, *options_.redactor);
    return reply;
  }
  if (decoded.empty() || decoded[0] != "sessions") {
    return api_error(404, "nothing to POST at " + std::string(path), "docs/serve.md lists the API");
  }
  if (decoded.size() == 1) return start(body);
  const std::string& id = decoded[1];
  if (id.empty() || id.size() > kIdLimit) return api_error(400, "a bad session id in the path");
  if (decoded.size() == 3) {
    if (decoded[2] == "messages") return message(id, body);
    if (decoded[2] == "stop") return stop(id, body);
    if (decoded[2] == "resume") return resume(id, body);
    if (decoded[2] == "fork") return fork(id, body);
  }
  if (decoded.size() == 4 && decoded[2] == "approvals" && !decoded[3].empty() && decoded[3].size() <= kIdLimit) {
    return decide(id, decoded[3], body);
  }
  return api_error(404, "nothing to POST at " + std::string(path),
                   "POST /api/sessions, or /api/sessions/ID/messages, stop, resume, fork, approvals/CALL");
}

Status SessionHost::workspace_for(const std::string& relative, std::string* path) const {
  if (relative.size() > 512) return Status::invalid_argument("\"workspace\" is over 512 bytes");
  if (relative.empty() || relative.front() == '/') {
    return Status::invalid_argument("\"workspace\" '" + relative +
                                    "' must be a relative path under the workspace root " + options_.workspace_root);
  }
  auto parts = split_path(relative);
  if (parts.size() > 8) return Status::invalid_argument("\"workspace\" is over 8 levels deep");
  std::string at = options_.workspace_root;
  for (std::string_view part : parts) {
    const std::string c(part);
    if (!plain_component(c)) {
      return Status::invalid_argument("\"workspace\" '" + relative + "' has the part '" + c.substr(0, 64) +
                                      "': each part is letters, digits, '-', '_' or '.', never '.' or '..', "
                                      "so that it stays under the workspace root");
    }
    at += "/" + c;
    struct stat st {};
    if (::lstat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return Status::invalid_argument("\"workspace\": " + at +
                                        " is not a directory (a symbolic link is not followed out of the root)");
      }
    } else if (errno != ENOENT) {
      return Status::io_error("\"workspace\": " + at + ": " + std::strerror(errno));
    } else if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::io_error("cannot make the workspace " + at + ": " + std::strerror(errno));
    }
  }
  *path = at;
  return Status();
}

ApiReply SessionHost::start(const json& j) {
  Body b(j);
  SessionOptions o;
  std::string workspace;
  uint64_t max_turns = 0;
  if (!b.text("task", &o.task, kTextLimit, true) || !b.text("id", &o.id, kIdLimit) ||
      !b.text("model", &o.model, kShortLimit) || !b.number("max_turns", &max_turns, 1, kTurnLimit) ||
      !b.text("workspace", &workspace, 512) || !b.text("instructions", &o.instructions, kTextLimit) ||
      !b.no_other_fields()) {
    return refused(b, "POST /api/sessions takes {\"task\", \"id\"?, \"model\"?, \"max_turns\"?, \"workspace\"?, "
                      "\"instructions\"?}");
  }
  o.max_turns = max_turns;
  if (o.id.empty()) o.id = generate_session_id();
  // The workspace: the one named under the root, else ROOT/ID. The id is
  // checked first, so that a bad one makes no directory.
  if (!plain_component(o.id)) {
    return api_error(400, "\"id\" '" + o.id.substr(0, 64) + "' is not a session id: letters, digits, '-', '_', '.'");
  }
  {
    std::vector<Event> none;
    if (runtime_->read_events(o.id, UINT64_MAX, &none).ok()) {
      return api_error(409, "session '" + o.id + "' exists already",
                       "POST /api/sessions/" + o.id + "/messages goes on with it; or choose another id");
    }
  }
  Status ws = workspace_for(workspace.empty() ? o.id : workspace, &o.workspace);
  if (!ws.ok()) return api_failed(ws);
  std::string id;
  Status s = runtime_->start_session(o, &id);
  if (!s.ok())
    return api_failed(s, s.is_busy() || s.is_invalid_argument() ? "choose another id, or leave it out" : "");
  return api_ok({{"session", id}, {"workspace", o.workspace}}, "started " + id);
}

ApiReply SessionHost::get_schedules(std::string_view path) {
  if (schedules_ == nullptr) return api_error(404, "this server runs no schedule");
  ApiReply reply = schedules_->get(path);
  cli::redact_json(reply.body, *options_.redactor);
  return reply;
}

Status SessionHost::start_run(SessionOptions o, const std::string& workspace) {
  if (runtime_ == nullptr) return Status::unsupported("this server runs no session");
  Status ws = workspace_for(workspace.empty() ? o.id : workspace, &o.workspace);
  if (!ws.ok()) return ws;
  std::string id;
  return runtime_->start_session(o, &id);
}

ApiReply SessionHost::message(const std::string& session, const json& j) {
  Body b(j);
  std::string text;
  if (!b.text("text", &text, kTextLimit, true) || !b.no_other_fields()) return refused(b);
  Status s = runtime_->send_message(session, text);
  if (!s.ok()) {
    return api_failed(s, s.is_needs_resume()
                             ? "POST /api/sessions/" + session +
                                   "/resume with {\"message\": TEXT} goes on with it and sends it"
                             : "");
  }
  return api_ok({{"session", session}}, "message sent to " + session);
}

ApiReply SessionHost::stop(const std::string& session, const json& j) {
  Body b(j);
  std::string reason;
  if (!b.text("reason", &reason, kShortLimit) || !b.no_other_fields()) return refused(b);
  Status s = runtime_->stop(session, reason.empty() ? std::string(kApiStopReason) : reason);
  if (s.is_not_found()) {
    return api_error(409, "session " + session + " is not running in this server", "only a running session stops");
  }
  if (!s.ok()) return api_failed(s);
  return api_ok({{"session", session}}, "stopped " + session);
}

ApiReply SessionHost::resume(const std::string& session, const json& j) {
  Body b(j);
  std::string mode, message;
  uint64_t max_turns = 0;
  if (!b.text("mode", &mode, 16) || !b.number("max_turns", &max_turns, 1, kTurnLimit) ||
      !b.text("message", &message, kTextLimit) || !b.no_other_fields()) {
    return refused(b, "POST /api/sessions/ID/resume takes {\"mode\"?: \"step\"|\"turn\", \"max_turns\"?, \"message\"?}");
  }
  if (!mode.empty() && mode != "step" && mode != "turn") {
    return api_error(400, "\"mode\" '" + mode.substr(0, 16) + "' is not step or turn");
  }
  Runtime::ResumeOptions o;
  o.mode = mode == "turn" ? Runtime::ResumeMode::kTurn : Runtime::ResumeMode::kStep;
  o.max_turns = max_turns;
  if (!message.empty()) o.follow_ups.push_back(message);
  Status s = runtime_->resume_session(session, o);
  if (!s.ok()) {
    return api_failed(
        s, s.is_already_finished() ? "POST /api/sessions/" + session + "/messages goes on with it" : "");
  }
  return api_ok({{"session", session}}, "resumed " + session);
}

ApiReply SessionHost::fork(const std::string& session, const json& j) {
  Body b(j);
  uint64_t at_turn = 0;
  Runtime::ForkOptions o;
  if (!b.number("at_turn", &at_turn, 0, kTurnLimit, true) || !b.text("task", &o.task, kTextLimit) ||
      !b.text("id", &o.id, kIdLimit) || !b.no_other_fields()) {
    return refused(b, "POST /api/sessions/ID/fork takes {\"at_turn\", \"task\"?, \"id\"?}");
  }
  if (o.id.empty()) o.id = generate_session_id();
  if (!plain_component(o.id)) {
    return api_error(400, "\"id\" '" + o.id.substr(0, 64) + "' is not a session id: letters, digits, '-', '_', '.'");
  }
  std::string id;
  Status s = runtime_->fork_session(session, at_turn, o, &id);
  if (!s.ok()) return api_failed(s);
  return api_ok({{"session", id}, {"parent", session}, {"at_turn", at_turn}},
                "forked " + session + " as " + id);
}

ApiReply SessionHost::decide(const std::string& session, const std::string& call, const json& j) {
  Body b(j);
  std::string decision;
  ApprovalAnswer a;
  a.call_id = call;
  if (!b.text("decision", &decision, 16, true) || !b.text("reason", &a.reason, kShortLimit) ||
      !b.text("text", &a.text, kTextLimit) || !b.text("digest", &a.args_digest, 64) || !b.no_other_fields()) {
    return refused(b, "POST /api/sessions/ID/approvals/CALL takes {\"decision\": \"approve\"|\"deny\"|\"answer\", "
                      "\"reason\"?, \"text\"?, \"digest\"?}");
  }
  if (decision == "approve") {
    a.kind = ApprovalAnswer::Kind::kApprove;
  } else if (decision == "deny") {
    a.kind = ApprovalAnswer::Kind::kDeny;
  } else if (decision == "answer") {
    a.kind = ApprovalAnswer::Kind::kAnswer;
    if (a.text.empty()) return api_error(400, "\"text\" is required to answer a question");
  } else {
    return api_error(400, "\"decision\" '" + decision + "' is not approve, deny or answer");
  }
  if (a.kind != ApprovalAnswer::Kind::kAnswer && !a.text.empty()) {
    return api_error(400, "\"text\" is for an answer to a question; approve and deny take \"reason\"");
  }
  a.by = "web";
  a.who = options_.who;
  ApprovalDecided recorded;
  Status s = runtime_->decide(session, a, &recorded);
  if (!s.ok()) {
    return api_failed(s, s.is_already_decided()
                             ? "GET /api/sessions/" + session + "/events shows the decision"
                         : s.is_not_found() ? "GET /api/approvals lists what waits"
                                            : "");
  }
  return api_ok({{"session", session}, {"call_id", call}, {"decision", recorded.decision}},
                recorded.decision + " " + call + " of " + session);
}

}  // namespace carapace::web
