#include "tools/serve/home_view.h"

#include <algorithm>
#include <cstdio>

#include "actors/collector/export.h"
#include "actors/collector/export_content.h"
#include "actors/collector/span_builder.h"
#include "actors/collector/trace_view.h"
#include "base/bounded_json.h"
#include "events/session_state.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "tools/serve/web_access.h"
#include "tools/trace_load.h"

namespace carapace::web {
namespace {

using nlohmann::json;

bool is_span_id(std::string_view id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

std::string seconds(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

json status_message(const std::string& session, const json& live) {
  return {{"type", "status"}, {"session", session}, {"message", live["message"]},
          {"reason", live.value("reason", std::string())}, {"retry_at_us", live.value("retry_at_us", int64_t{0})}};
}

json error_message(const std::string& session, const std::string& message) {
  return {{"type", "error"}, {"session", session}, {"message", message}};
}

// Why the session was stopped, when its session span ended so (session.stopped); "" otherwise.
std::string stop_reason_of(const std::vector<Span>& spans) {
  if (spans.empty() || spans[0].status != "stopped") return "";
  std::string reason = spans[0].attrs.value("stop_reason", std::string());
  return reason.empty() ? "stopped" : reason;
}

}  // namespace

json error_body(unsigned status, std::string message, std::string hint) {
  const char* code = status == 400   ? "invalid argument"
                     : status == 401 ? "unauthorized"
                     : status == 403 ? "forbidden"
                     : status == 404 ? "not found"
                     : status == 405 ? "method not allowed"
                     : status == 413 ? "too large"
                     : status == 431 ? "too large"
                     : status >= 500 ? "internal"
                                     : "error";
  json error = {{"code", code}, {"message", std::move(message)}};
  if (!hint.empty()) error["hint"] = std::move(hint);
  return {{"success", false}, {"error", std::move(error)}};
}

ApiReply api_error(unsigned status, std::string error, std::string hint) {
  return ApiReply{status, error_body(status, std::move(error), std::move(hint))};
}

HomeView::~HomeView() = default;

Status HomeView::open(const cli::Context& ctx, std::unique_ptr<HomeView>* out) {
  std::unique_ptr<HomeView> view(new HomeView(ctx));
  Status opened = view->open_log();
  if (!opened.ok() && !opened.is_not_found()) return opened;
  if (view->log_) {
    auto store = cli::open_store(ctx);
    std::vector<SessionMeta> metas;
    std::vector<std::string> unreadable;
    CARAPACE_RETURN_IF_ERROR(view->log_->list_sessions(&metas, &unreadable));
    for (auto& meta : metas) {
      std::vector<Span> spans;
      cli::TraceInfo info;
      if (!cli::load_trace(ctx, *view->log_, store.get(), meta.id, &spans, &info).ok()) continue;
      Row& row = view->rows_[meta.id];
      row.last_seq = info.last_seq;
      row.crashed_after = info.crashed_after_seq;
      if (!spans.empty()) row.totals = spans[0].attrs;
      row.stopped = stop_reason_of(spans);
      if (info.crashed_after_seq) row.last_error = "crashed after seq " + std::to_string(info.crashed_after_seq);
      view->watch_->seed(meta.id, info.last_seq, info.crashed_after_seq);
      row.meta = std::move(meta);
    }
  }
  *out = std::move(view);
  return Status();
}

Status HomeView::open_log() {
  std::unique_ptr<EventLog> log;
  CARAPACE_RETURN_IF_ERROR(
      EventLog::open(EventLog::Options{.path = ctx_.log_path(), .mode = EventLog::Mode::kReader}, &log));
  log_ = std::move(log);
  if (watch_) {
    watch_->use_log(log_.get());
  } else {
    watch_ = std::make_unique<LogWatch>(log_.get(), ctx_.log_path());
  }
  return Status();
}

json HomeView::redacted(json j) const {
  // The ids, digests and body references Carapace derived are kept whole:
  // the redactor would take their hex digits for a secret.
  std::function<void(json&)> walk = [&](json& v) {
    if (v.is_string()) {
      std::string out;
      if (ctx_.redactor().redact(v.get_ref<const std::string&>(), &out)) v = std::move(out);
    } else if (v.is_array()) {
      for (auto& item : v) walk(item);
    } else if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it.value().is_string() && cli::our_reference(it.key())) continue;
        walk(it.value());
      }
    }
  };
  walk(j);
  return j;
}

json HomeView::row_json(const Row& row) const {
  const auto& m = row.meta;
  const auto& a = row.totals;
  auto u = [&](const char* key) { return a.contains(key) && a[key].is_number() ? a[key].get<uint64_t>() : 0; };
  std::string status = row.crashed_after      ? "crashed"
                       : !row.stopped.empty() ? "stopped"
                                              : std::string(status_name(m.status));
  return {{"id", m.id},
          {"status", status},
          {"turns", m.committed_turn},
          {"last_seq", row.last_seq},
          {"provider", m.provider},
          {"model", m.model},
          {"agent_id", m.agent_id},
          {"parent_session", m.parent_session},
          {"parent_turn", m.parent_turn},
          {"created_us", m.created_us},
          {"updated_us", m.updated_us},
          {"tokens_in", u("tokens_in")},
          {"tokens_out", u("tokens_out")},
          {"cost_usd", a.contains("cost_usd") && a["cost_usd"].is_number() ? a["cost_usd"].get<double>() : 0.0},
          {"model_calls", u("llm_attempts")},
          {"retries", u("retries")},
          {"tool_calls", u("tool_calls")},
          {"tool_errors", u("tool_errors")},
          {"crashed_after_seq", row.crashed_after},
          {"live", row.live},
          {"last_error", row.last_error}};
}

json HomeView::hello(const std::string& version) const {
  std::vector<const Row*> rows;
  for (const auto& [id, row] : rows_) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row* x, const Row* y) { return x->meta.updated_us > y->meta.updated_us; });
  json sessions = json::array();
  for (const Row* row : rows) sessions.push_back(row_json(*row));
  return redacted({{"type", "hello"}, {"version", version}, {"sessions", std::move(sessions)}});
}

Status HomeView::spans_of(const std::string& session, std::vector<Span>* spans, int64_t* last_us) {
  if (const SpanBuilder* builder = watch_ ? watch_->builder(session) : nullptr) {
    *spans = builder->spans();
  } else {
    if (!log_) return Status::not_found("no session '" + session + "': the home has no log yet");
    cli::TraceInfo info;
    CARAPACE_RETURN_IF_ERROR(cli::load_trace(ctx_, *log_, nullptr, session, spans, &info));
  }
  *last_us = export_last_us(*spans);
  return Status();
}

ApiReply HomeView::get(std::string_view path) {
  std::vector<std::string_view> parts = split_path(path);  // "", "api", ...
  if (parts.size() < 3 || parts[1] != "api" || parts[2] != "sessions") {
    return api_error(404, "no API endpoint " + std::string(path),
                     "the API has /api/sessions, /api/sessions/ID and /api/sessions/ID/spans/SPAN_ID");
  }
  if (parts.size() == 3) {
    json hello_data = hello("");
    std::string summary = std::to_string(rows_.size()) + (rows_.size() == 1 ? " session" : " sessions");
    return ApiReply{200, {{"success", true}, {"data", hello_data["sessions"]}, {"summary", summary}}};
  }
  std::string session;
  if (!percent_decode(parts[3], &session)) {
    return api_error(400, "a bad %-escape in the session id of " + std::string(path),
                     "escape a character as % and two hex digits");
  }
  if (Status valid = keys::validate_session_id(session); !valid.ok()) {
    return api_error(400, "bad session id: " + valid.message(), "the session list gives every session's id");
  }
  if (parts.size() == 4) return get_session(session);
  if (parts.size() == 6 && parts[4] == "spans") {
    std::string span_id;
    if (!percent_decode(parts[5], &span_id) || !is_span_id(span_id)) {
      return api_error(400, "bad span id '" + std::string(parts[5]) + "'",
                       "a span id is 16 lowercase hex digits, as /api/sessions/" + session + " lists them");
    }
    return get_span(session, span_id);
  }
  return api_error(404, "no API endpoint " + std::string(path),
                   "the API has /api/sessions, /api/sessions/ID and /api/sessions/ID/spans/SPAN_ID");
}

bool HomeView::load_spans(const std::string& session, std::vector<Span>* spans, int64_t* last_us, ApiReply* failed) {
  Status s = spans_of(session, spans, last_us);
  if (s.is_not_found()) {
    *failed = api_error(404, "no session '" + session + "' in " + ctx_.home(), "the session list shows what there is");
  } else if (!s.ok()) {
    *failed = api_error(500, "cannot read session '" + session + "': " + s.message());
  }
  return s.ok();
}

ApiReply HomeView::get_session(const std::string& session) {
  std::vector<Span> spans;
  int64_t last_us = 0;
  if (ApiReply failed; !load_spans(session, &spans, &last_us, &failed)) return failed;
  json span_list = json::array();
  for (const auto& sp : spans) span_list.push_back(span_to_json(sp));
  json data = {{"spans", std::move(span_list)}, {"last_us", last_us}};
  auto row = rows_.find(session);
  data["session"] = row != rows_.end() ? row_json(row->second) : json(nullptr);
  return ApiReply{200, redacted({{"success", true},
                                 {"data", std::move(data)},
                                 {"summary", "session " + session + ": " + std::to_string(spans.size()) + " spans"}})};
}

ApiReply HomeView::get_span(const std::string& session, const std::string& span_id) {
  std::vector<Span> spans;
  int64_t last_us = 0;
  if (ApiReply failed; !load_spans(session, &spans, &last_us, &failed)) return failed;
  auto it = std::find_if(spans.begin(), spans.end(), [&](const Span& sp) { return sp.span_id == span_id; });
  if (it == spans.end()) {
    return api_error(404, "no span " + span_id + " in session " + session,
                     "/api/sessions/" + session + " lists the session's spans");
  }
  const Span& sp = *it;
  // The verbatim bodies it references, and its message content.
  std::unique_ptr<BodyStore> store;
  Status opened = BodyStore::open(ctx_.home() + "/bodies", BodyStore::Mode::kReader, &store);
  json bodies = json::array();
  std::map<std::string, std::string> texts;
  for (const char* which : {"request", "response"}) {
    std::string ref = sp.attrs.value(std::string(which) + "_body", std::string());
    if (ref.empty()) continue;
    json body = {{"which", which}, {"ref", ref}};
    std::string text;
    Status got = opened.ok() ? store->get(ref, &text) : opened;
    if (!got.ok()) {
      body["error"] = got.message();
    } else {
      body["bytes"] = text.size();
      json parsed = parse_stored_json(text);
      if (!parsed.is_discarded()) body["json"] = parsed;
      body["text"] = text;
      texts[ref] = std::move(text);
    }
    bodies.push_back(std::move(body));
  }
  json content = nullptr;
  if (log_ && (sp.kind == kSpanLlm || sp.kind == kSpanTool)) {
    uint64_t last = 0;
    (void)log_->last_seq(session, &last);
    std::vector<Event> events;
    (void)log_->read(session, sp.open_seq, sp.open() ? last : sp.close_seq, &events);
    std::map<std::string, json> found;
    collect_content({sp}, events, texts, &found);
    if (auto c = found.find(sp.span_id); c != found.end()) content = c->second;
  }
  json data = {{"span", span_to_json(sp)}, {"bodies", std::move(bodies)}, {"content", std::move(content)}};
  return ApiReply{200, redacted({{"success", true},
                                 {"data", std::move(data)},
                                 {"summary", sp.name + " of session " + session + ": " + sp.status}})};
}

bool HomeView::watch_message(const std::string& session, json* out) {
  if (Status valid = keys::validate_session_id(session); !valid.ok()) {
    *out = {{"type", "error"}, {"message", "cannot watch: bad session id: " + valid.message()}};
    return false;
  }
  std::vector<Span> spans;
  int64_t last_us = 0;
  Status s = spans_of(session, &spans, &last_us);
  if (!s.ok()) {
    *out = {{"type", "error"}, {"session", session}, {"message", "cannot watch session '" + session + "': " + s.message()}};
    *out = redacted(std::move(*out));
    return false;
  }
  json list = json::array();
  for (const auto& sp : spans) list.push_back(span_to_json(sp));
  *out = redacted({{"type", "spans"}, {"session", session}, {"spans", std::move(list)}, {"last_us", last_us},
                   {"reset", true}});
  return true;
}

void HomeView::note_events(Row& row, const std::vector<Event>& events, uint64_t after_seq,
                           std::vector<LiveMessage>* out) {
  const std::string& id = row.meta.id;
  for (const auto& e : events) {
    if (e.seq <= after_seq) continue;
    if (const auto* failed = get_if<LlmFailed>(e)) {
      std::string what = failed->http_status ? "HTTP " + std::to_string(failed->http_status) + " " : "";
      what += failed->error;
      if (failed->will_retry) {
        std::string reason = "attempt " + std::to_string(failed->attempt) + " failed: " + what;
        row.live = {{"message", "retrying in " + seconds(failed->retry_delay_ms) + " (" + reason + ")"},
                    {"reason", reason},
                    {"retry_at_us", e.ts_us + static_cast<int64_t>(failed->retry_delay_ms) * 1000}};
        out->push_back({redacted(status_message(id, row.live)), ""});
      } else {
        row.live = nullptr;
        row.last_error = "the model call failed (attempt " + std::to_string(failed->attempt) + "): " + what;
        out->push_back({redacted(error_message(id, row.last_error)), ""});
      }
    } else if (const auto* requested = get_if<LlmRequested>(e)) {
      row.live = {{"message", "waiting for the model (attempt " + std::to_string(requested->attempt) + ")"},
                  {"retry_at_us", 0}};
    } else if (const auto* tool = get_if<ToolRequested>(e)) {
      row.live = {{"message", "running tool " + tool->tool}, {"retry_at_us", 0}};
    } else if (get_if<LlmResponded>(e) || get_if<ToolCompleted>(e) || get_if<TurnCommitted>(e) ||
               get_if<SessionCompleted>(e) || get_if<SessionStopped>(e)) {
      row.live = nullptr;
    } else if (get_if<SessionResumed>(e)) {
      row.live = nullptr;
      row.last_error.clear();
    } else if (const auto* session_failed = get_if<SessionFailed>(e)) {
      row.live = nullptr;
      row.last_error = "the session failed (" + session_failed->stop_reason + "): " + session_failed->error;
      out->push_back({redacted(error_message(id, row.last_error)), ""});
    }
  }
}

Status HomeView::poll(std::vector<LiveMessage>* out) {
  if (!log_) {
    Status opened = open_log();
    if (opened.is_not_found()) return Status();  // still no log: nothing to show
    CARAPACE_RETURN_IF_ERROR(opened);
  }
  std::vector<WatchChange> changes;
  Status polled = watch_->poll(&changes);
  if (!polled.ok()) {
    // The writer may have just closed (its WAL files go): open the log again.
    CARAPACE_RETURN_IF_ERROR(open_log());
    changes.clear();
    CARAPACE_RETURN_IF_ERROR(watch_->poll(&changes));
  }
  for (auto& change : changes) {
    Row& row = rows_[change.session];
    row.meta = std::move(change.meta);
    uint64_t last = 0;
    (void)log_->last_seq(change.session, &last);
    row.last_seq = std::max(change.folded_seq, last);
    if (change.root) {
      row.totals = change.root->attrs;
      row.stopped = stop_reason_of({*change.root});
    }
    note_events(row, change.events, change.seen_seq, out);
    row.crashed_after = change.crashed_after;
    if (change.newly_crashed) {
      row.live = nullptr;
      row.last_error = "crashed after seq " + std::to_string(change.crashed_after) +
                       ": the process writing it died (`carapace resume " + change.session + "` goes on)";
      out->push_back({redacted(error_message(change.session, row.last_error)), ""});
    }
    out->push_back({redacted({{"type", "session"}, {"session", row_json(row)}}), ""});
    if (!change.changed.empty()) {
      json list = json::array();
      for (const auto& sp : change.changed) list.push_back(span_to_json(sp));
      int64_t last_us = change.root ? change.root->attrs.value("last_ts_us", int64_t{0}) : 0;
      out->push_back({redacted({{"type", "spans"},
                                {"session", change.session},
                                {"spans", std::move(list)},
                                {"last_us", last_us},
                                {"reset", false}}),
                      change.session});
    }
  }
  return Status();
}

}  // namespace carapace::web
