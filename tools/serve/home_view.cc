#include "tools/serve/home_view.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <set>

#include "actors/collector/export.h"
#include "actors/collector/export_content.h"
#include "actors/collector/span_builder.h"
#include "actors/collector/trace_stats.h"
#include "actors/collector/trace_view.h"
#include "base/bounded_json.h"
#include "base/redactor.h"
#include "events/event_json.h"
#include "events/session_state.h"
#include "runtime/approval_scan.h"
#include "schedule/schedule_json.h"
#include "schedule/schedule_store.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "tools/cli_run.h"
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

std::string seconds(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

// The messages of the WebSocket (and the feed's entries): at_us is when it happened.
json status_message(const std::string& session, const json& live, int64_t at_us) {
  return {{"type", "status"},
          {"session", session},
          {"message", live["message"]},
          {"reason", live.value("reason", std::string())},
          {"retry_at_us", live.value("retry_at_us", int64_t{0})},
          {"at_us", at_us}};
}

json error_message(const std::string& session, const std::string& message, int64_t at_us) {
  return {{"type", "error"}, {"session", session}, {"message", message}, {"at_us", at_us}};
}

// What a session's row says while a failed model call waits for its retry.
json retry_live(const LlmFailed& failed, int64_t ts_us) {
  std::string what = failed.http_status ? "HTTP " + std::to_string(failed.http_status) + " " : "";
  std::string reason = "attempt " + std::to_string(failed.attempt) + " failed: " + what + failed.error;
  return {{"message", "retrying in " + seconds(failed.retry_delay_ms) + " (" + reason + ")"},
          {"reason", reason},
          {"retry_at_us", ts_us + static_cast<int64_t>(failed.retry_delay_ms) * 1000}};
}

std::string gave_up_error(const LlmFailed& failed) {
  std::string what = failed.http_status ? "HTTP " + std::to_string(failed.http_status) + " " : "";
  return "the model call failed (attempt " + std::to_string(failed.attempt) + "): " + what + failed.error;
}

std::string session_failed_error(const SessionFailed& failed) {
  return "the session failed (" + failed.stop_reason + "): " + failed.error;
}

std::string crash_error(const std::string& session, uint64_t crashed_after) {
  return "crashed after seq " + std::to_string(crashed_after) + ": the process writing it died (`carapace resume " +
         session + "` goes on)";
}

// The parameters of GET /api/sessions/ID/events.
constexpr uint64_t kEventsLimit = 100;      // events in an answer, unless asked for fewer or more
constexpr uint64_t kEventsMaxLimit = 500;   // a larger limit is cut to this
constexpr uint64_t kEventsScanned = 20000;  // events read for one answer, matching or not
constexpr size_t kEventsMaxText = 200;      // bytes of the text searched for
constexpr size_t kEventsMaxTypes = 32;

struct EventsQuery {
  uint64_t from = 1;
  uint64_t limit = kEventsLimit;
  std::set<std::string> types;
  std::string text;  // lowercase
};

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// ?from=SEQ&limit=N&type=T1,T2&q=TEXT; "" or what was wrong.
std::string parse_events_query(std::string_view query, EventsQuery* out) {
  std::set<std::string> seen;
  auto number = [](const std::string& text, uint64_t* n) {
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    return std::from_chars(text.data(), text.data() + text.size(), *n).ec == std::errc() && *n >= 1;
  };
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key, value;
    if (!percent_decode(pair.substr(0, eq), &key, true) ||
        !percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), &value, true)) {
      return "a bad %-escape in the query";
    }
    if (key.size() > 16) key = key.substr(0, 16) + "…";
    if (!seen.insert(key).second) return "'" + key + "' is given twice";
    if (key == "from") {
      if (!number(value, &out->from)) return "from=" + value.substr(0, 24) + " is not a seq (a whole number from 1)";
    } else if (key == "limit") {
      if (!number(value, &out->limit)) return "limit=" + value.substr(0, 24) + " is not a whole number from 1";
      out->limit = std::min(out->limit, kEventsMaxLimit);
    } else if (key == "type") {
      size_t at = 0;
      while (at <= value.size()) {
        size_t comma = value.find(',', at);
        if (comma == std::string::npos) comma = value.size();
        std::string type = value.substr(at, comma - at);
        at = comma + 1;
        if (type.empty()) continue;
        if (!event_type_from_name(type)) return "type=" + type.substr(0, 40) + " is not an event type";
        out->types.insert(type);
        if (out->types.size() > kEventsMaxTypes) return "more than " + std::to_string(kEventsMaxTypes) + " types";
      }
    } else if (key == "q") {
      if (value.size() > kEventsMaxText) {
        return "q is " + std::to_string(value.size()) + " bytes, over " + std::to_string(kEventsMaxText);
      }
      out->text = lower(std::move(value));
    } else {
      return "no parameter '" + key + "'";
    }
  }
  return "";
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
                     : status == 409 ? "conflict"
                     : status == 415 ? "unsupported media type"
                     : status == 413 ? "too large"
                     : status == 431 ? "too large"
                     : status >= 500 ? "internal"
                                     : "error";
  json error = {{"code", code}, {"message", std::move(message)}};
  if (!hint.empty()) error["hint"] = std::move(hint);
  return {{"success", false}, {"error", std::move(error)}};
}

ApiReply api_ok(nlohmann::json data, std::string summary) {
  return ApiReply{200, {{"success", true}, {"data", std::move(data)}, {"summary", std::move(summary)}}};
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
    std::vector<FeedSeed> seeds;
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
      feed_seeds_of(spans, info.crashed_after_seq, &seeds);
      view->outlines_[meta.id] = view->outline_of(spans, export_last_us(spans));
      row.meta = std::move(meta);
    }
    view->seed_feed(std::move(seeds));
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
  cli::redact_json(j, ctx_.redactor());  // ids, digests and body references kept whole
  return j;
}

bool approvals_query(std::string_view query, std::string* session, ApiReply* refused) {
  if (query.empty()) return true;
  constexpr std::string_view kKey = "session=";
  if (!query.starts_with(kKey) || query.find('&') != std::string_view::npos) {
    *refused = api_error(400, "the query may name one session: /api/approvals?session=ID");
    return false;
  }
  if (!percent_decode(query.substr(kKey.size()), session) || !keys::validate_session_id(*session).ok()) {
    *refused = api_error(400, "a bad session id in the query");
    return false;
  }
  return true;
}

ApiReply approvals_reply(const std::vector<Approval>& list, const Redactor& redactor) {
  json out = json::array();
  for (const auto& a : list) out.push_back(cli::approval_json(a.session_id, a.seq, a.request));
  cli::redact_json(out, redactor);
  return ApiReply{200, {{"success", true}, {"data", std::move(out)}, {"summary", std::to_string(list.size()) + " waiting"}}};
}

json HomeView::row_json(const Row& row) const {
  const auto& m = row.meta;
  const auto& a = row.totals;
  auto u = [&](const char* key) { return a.contains(key) && a[key].is_number() ? a[key].get<uint64_t>() : 0; };
  std::string status = row.crashed_after      ? "crashed"
                       : !row.stopped.empty() ? "stopped"
                       : m.status == SessionStatus::kRunning && a.contains("waiting_call")
                           ? "waiting"  // parked on a person (docs/approvals.md)
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
          {"cache_read", u("cache_read")},
          {"cache_write", u("cache_write")},
          // The share of the input read from the provider's prompt cache (docs/trace.md).
          {"cache_hit_ratio", cache_hit_ratio(u("tokens_in"), u("cache_read"), u("cache_write"))},
          {"cost_usd", a.contains("cost_usd") && a["cost_usd"].is_number() ? a["cost_usd"].get<double>() : 0.0},
          {"model_calls", u("llm_attempts")},
          {"retries", u("retries")},
          {"tool_calls", u("tool_calls")},
          {"tool_errors", u("tool_errors")},
          {"crashed_after_seq", row.crashed_after},
          {"live", row.live},
          {"last_error", row.last_error}};
}

void HomeView::feed_seeds_of(const std::vector<Span>& spans, uint64_t crashed_after, std::vector<FeedSeed>* seeds) {
  if (spans.empty()) return;
  const std::string& session = spans[0].session;
  // A failed model call is an llm span closed as an error; a failed session, the session span.
  for (const auto& sp : spans) {
    if ((sp.kind == kSpanLlm && sp.status == "error") || (sp.kind == kSpanSession && sp.status == "failed")) {
      seeds->push_back(FeedSeed{sp.end_us, session, sp.close_seq, 0});
    }
  }
  if (crashed_after) {
    seeds->push_back(FeedSeed{spans[0].attrs.value("last_ts_us", int64_t{0}), session, 0, crashed_after});
  }
}

void HomeView::seed_feed(std::vector<FeedSeed> seeds) {
  std::sort(seeds.begin(), seeds.end(), [](const FeedSeed& x, const FeedSeed& y) {
    return x.at_us != y.at_us ? x.at_us > y.at_us : x.seq > y.seq;
  });
  if (seeds.size() > kFeedMax) seeds.resize(kFeedMax);
  // The messages the WebSocket carried when they happened, from their events.
  for (const auto& seed : seeds) {
    json message;
    if (seed.crashed_after) {
      message = error_message(seed.session, crash_error(seed.session, seed.crashed_after), seed.at_us);
    } else {
      std::vector<Event> events;
      if (!log_ || !log_->read(seed.session, seed.seq, seed.seq, &events).ok() || events.empty()) continue;
      const Event& e = events[0];
      if (const auto* failed = get_if<LlmFailed>(e)) {
        message = failed->will_retry ? status_message(seed.session, retry_live(*failed, e.ts_us), e.ts_us)
                                     : error_message(seed.session, gave_up_error(*failed), e.ts_us);
      } else if (const auto* session_failed = get_if<SessionFailed>(e)) {
        message = error_message(seed.session, session_failed_error(*session_failed), e.ts_us);
      } else {
        continue;
      }
    }
    feed_.push_back(redacted(std::move(message)));
  }
}

void HomeView::remember(const json& message) {
  feed_.push_front(message);
  if (feed_.size() > kFeedMax) feed_.pop_back();
}

json HomeView::feed() const { return json(std::vector<json>(feed_.begin(), feed_.end())); }

json HomeView::hello(const std::string& version) const {
  std::vector<const Row*> rows;
  for (const auto& [id, row] : rows_) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row* x, const Row* y) { return x->meta.updated_us > y->meta.updated_us; });
  json sessions = json::array();
  for (const Row* row : rows) sessions.push_back(row_json(*row));
  return {{"type", "hello"}, {"version", version}, {"sessions", redacted(std::move(sessions))}, {"feed", feed()}};
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

namespace {
constexpr const char* kEndpoints =
    "the API has /api/sessions, /api/sessions/ID, /api/sessions/ID/spans/SPAN_ID, /api/sessions/ID/events and "
    "/api/activity, /api/approvals, /api/schedules";
}  // namespace

ApiReply HomeView::get_approvals(std::string_view query) {
  std::string session;
  if (ApiReply refused; !approvals_query(query, &session, &refused)) return refused;
  std::vector<Approval> list;
  if (log_) {
    Status s = waiting_approvals(*log_, session, &list);
    if (s.is_not_found()) return api_error(404, "no session '" + session + "'", "GET /api/sessions lists the sessions");
    if (!s.ok()) return api_error(500, s.to_string());
  } else if (!session.empty()) {
    return api_error(404, "no session '" + session + "'", "GET /api/sessions lists the sessions");
  }
  return approvals_reply(list, ctx_.redactor());
}

ApiReply HomeView::get_schedules(std::string_view path) {
  std::vector<std::string_view> parts = split_path(path);  // "", "api", "schedules", NAME?
  std::vector<std::string> names;
  if (log_) {
    Status s = schedule::list_schedules(*log_, &names);
    if (!s.ok()) return api_error(500, s.to_string());
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto one = [&](const std::string& name, json* out) {
    schedule::ScheduleState state;
    CARAPACE_RETURN_IF_ERROR(schedule::load_schedule(*log_, name, &state));
    if (!state.defined || state.removed) return Status::not_found("no schedule '" + name + "'");
    schedule::CronExpression cron;
    schedule::TimeZone zone;
    CARAPACE_RETURN_IF_ERROR(schedule::CronExpression::parse(state.definition.cron, &cron));
    CARAPACE_RETURN_IF_ERROR(schedule::TimeZone::load(state.definition.tz, &zone));
    *out = schedule::schedule_json(state, cron, zone, now, parts.size() == 4);
    return Status();
  };
  if (parts.size() == 3) {
    json list = json::array();
    for (const auto& name : names) {
      json j;
      if (one(name, &j).ok()) list.push_back(redacted(j));
    }
    return ApiReply{200, {{"success", true},
                          {"data", {{"schedules", list}}},
                          {"summary", std::to_string(list.size()) + " schedules"}}};
  }
  std::string name;
  if (parts.size() != 4 || !percent_decode(parts[3], &name) || !log_) {
    return api_error(404, "nothing at " + std::string(path), "GET /api/schedules, or /api/schedules/NAME");
  }
  json j;
  Status s = one(name, &j);
  if (s.is_not_found()) return api_error(404, s.message(), "GET /api/schedules lists them");
  if (!s.ok()) return api_error(500, s.to_string());
  return ApiReply{200, {{"success", true}, {"data", redacted(j)}, {"summary", "schedule " + name}}};
}

ApiReply HomeView::get(std::string_view path, std::string_view query) {
  std::vector<std::string_view> parts = split_path(path);  // "", "api", ...
  if (parts.size() >= 3 && parts[1] == "api" && parts[2] == "schedules") return get_schedules(path);
  if (parts.size() == 3 && parts[1] == "api" && parts[2] == "activity") {
    return ApiReply{200, {{"success", true},
                          {"data", feed()},
                          {"summary", std::to_string(feed_.size()) + " retries, failures and crashes, newest first"}}};
  }
  if (parts.size() == 3 && parts[1] == "api" && parts[2] == "approvals") return get_approvals(query);
  if (parts.size() < 3 || parts[1] != "api" || parts[2] != "sessions") {
    return api_error(404, "no API endpoint " + std::string(path), kEndpoints);
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
  if (parts.size() == 4) return get_session(session, query);
  if (parts.size() == 5 && parts[4] == "events") return get_events(session, query);
  if (parts.size() == 6 && parts[4] == "spans") {
    std::string span_id;
    if (!percent_decode(parts[5], &span_id) || !is_span_id(span_id)) {
      return api_error(400, "bad span id '" + std::string(parts[5]) + "'",
                       "a span id is 16 lowercase hex digits, as /api/sessions/" + session + " lists them");
    }
    return get_span(session, span_id);
  }
  return api_error(404, "no API endpoint " + std::string(path), kEndpoints);
}

ApiReply HomeView::get_events(const std::string& session, std::string_view query) {
  EventsQuery q;
  if (std::string wrong = parse_events_query(query, &q); !wrong.empty()) {
    return api_error(400, "bad query for /api/sessions/" + session + "/events: " + wrong,
                     "it takes from=SEQ, limit=N (at most " + std::to_string(kEventsMaxLimit) +
                         "), type=T[,T...] (event types such as llm.failed) and q=TEXT (at most " +
                         std::to_string(kEventsMaxText) + " bytes)");
  }
  uint64_t last = 0;
  if (log_) (void)log_->last_seq(session, &last);
  if (last == 0) {
    return api_error(404, "no session '" + session + "' in " + ctx_.home(), "the session list shows what there is");
  }
  // The text is looked for in what is shown, the redacted event: a search
  // never finds a secret by its hidden part. Only an event whose raw text
  // holds it (or a search the marker could match) is redacted to be sure.
  const std::string marker = lower(std::string(Redactor::kMarker));
  const bool marker_may_match = !q.text.empty() && marker.find(q.text) != std::string::npos;
  json events = json::array();
  uint64_t scanned = 0, next = 0;
  auto cursor = log_->cursor(session, q.from);
  for (; cursor->valid(); cursor->next()) {
    if (events.size() >= q.limit || scanned >= kEventsScanned) {
      next = cursor->seq();
      break;
    }
    ++scanned;
    Event e;
    if (Status decoded = cursor->event(&e); !decoded.ok()) {
      if (q.types.empty() && q.text.empty()) {
        events.push_back({{"seq", cursor->seq()}, {"type", "unreadable"}, {"error", decoded.message()}});
      }
      continue;
    }
    if (!q.types.empty() && !q.types.count(std::string(e.type_name()))) continue;
    json j = event_to_json(e);
    if (!q.text.empty()) {
      const bool raw = lower(j.dump(-1, ' ', false, json::error_handler_t::replace)).find(q.text) != std::string::npos;
      if (!raw && !marker_may_match) continue;
      j = redacted(std::move(j));
      if (lower(j.dump(-1, ' ', false, json::error_handler_t::replace)).find(q.text) == std::string::npos) continue;
      events.push_back(std::move(j));
    } else {
      events.push_back(redacted(std::move(j)));
    }
  }
  if (Status read = cursor->status(); !read.ok()) {
    return api_error(500, "cannot read the events of session '" + session + "': " + read.message());
  }
  std::string summary = std::to_string(events.size()) + " events of session " + session;
  json types = json::array();
  for (uint16_t t = 1; t <= kMaxKnownEventType; ++t) types.push_back(std::string(wire_name(t)));
  json data = {{"session", session}, {"events", std::move(events)}, {"types", std::move(types)}, {"from", q.from}, {"limit", q.limit},
               {"scanned", scanned}, {"last_seq", last}, {"next", next ? json(next) : json(nullptr)}};
  return ApiReply{200, {{"success", true}, {"data", std::move(data)}, {"summary", summary}}};
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

json HomeView::outline_of(const std::vector<Span>& spans, int64_t last_us) const {
  // The spans the skeleton shows: the session, each span shown whole with
  // what is under it, each turn shown on one line, the first and last of
  // what a fold stands for. Not what is inside the middle of a long session.
  std::set<std::string> shown;
  std::map<std::string, std::vector<size_t>> children;
  for (size_t i = 0; i < spans.size(); ++i) children[spans[i].parent_id].push_back(i);
  std::function<void(const std::string&)> subtree = [&](const std::string& id) {
    shown.insert(id);
    for (size_t k : children[id]) subtree(spans[k].span_id);
  };
  json skeleton = skeleton_json(spans);
  if (!spans.empty()) shown.insert(spans[0].span_id);
  for (const auto& item : skeleton) {
    if (item["show"] == "whole") subtree(item["span"].get<std::string>());
    if (item["show"] == "compact") shown.insert(item["span"].get<std::string>());
    if (item["show"] == "fold") {
      shown.insert(item["first"].get<std::string>());
      shown.insert(item["last"].get<std::string>());
    }
  }
  json list = json::array();
  for (const auto& sp : spans) {
    if (shown.count(sp.span_id)) list.push_back(span_to_json(sp));
  }
  const bool complete = list.size() == spans.size();
  return redacted({{"spans", std::move(list)},
                   {"skeleton", std::move(skeleton)},
                   {"span_count", spans.size()},
                   {"complete", complete},
                   {"last_us", last_us}});
}

ApiReply HomeView::get_session(const std::string& session, std::string_view query) {
  bool all = false;
  if (query == "spans=all") {
    all = true;
  } else if (!query.empty()) {
    return api_error(400, "bad query for /api/sessions/" + session + ": " + std::string(query.substr(0, 64)),
                     "it takes spans=all (every span; without it, the spans the skeleton shows)");
  }
  json data;
  auto outline = outlines_.find(session);
  if (!all && outline != outlines_.end()) {
    data = outline->second;
  } else {
    std::vector<Span> spans;
    int64_t last_us = 0;
    if (ApiReply failed; !load_spans(session, &spans, &last_us, &failed)) return failed;
    if (all) {
      json span_list = json::array();
      for (const auto& sp : spans) span_list.push_back(span_to_json(sp));
      data = redacted({{"spans", std::move(span_list)},
                       {"skeleton", skeleton_json(spans)},
                       {"span_count", spans.size()},
                       {"complete", true},
                       {"last_us", last_us}});
    } else {
      data = outline_of(spans, last_us);
      if (rows_.count(session)) outlines_[session] = data;
    }
  }
  auto row = rows_.find(session);
  data["session"] = row != rows_.end() ? redacted(row_json(row->second)) : json(nullptr);
  std::string summary = "session " + session + ": " + std::to_string(data["spans"].size()) + " of " +
                        std::to_string(data["span_count"].get<size_t>()) + " spans";
  return ApiReply{200, {{"success", true}, {"data", std::move(data)}, {"summary", std::move(summary)}}};
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

bool HomeView::watch_message(const std::string& session, json* out, bool reset) {
  if (Status valid = keys::validate_session_id(session); !valid.ok()) {
    *out = {{"type", "error"}, {"message", "cannot watch: bad session id: " + valid.message()}};
    return false;
  }
  // A client that has the spans (from the API) of a session nothing writes
  // needs no fold of it: its changes will come when it grows.
  if (!reset && rows_.count(session) && !(watch_ && watch_->builder(session))) {
    *out = {{"type", "spans"}, {"session", session}, {"spans", json::array()}, {"last_us", 0}, {"reset", false}};
    return true;
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
  *out = redacted({{"type", "spans"}, {"session", session}, {"spans", std::move(list)},
                   {"skeleton", skeleton_json(spans)}, {"last_us", last_us}, {"reset", true}});
  return true;
}

void HomeView::note_events(Row& row, const std::vector<Event>& events, uint64_t after_seq,
                           std::vector<LiveMessage>* out) {
  const std::string& id = row.meta.id;
  for (const auto& e : events) {
    if (e.seq <= after_seq) continue;
    if (const auto* failed = get_if<LlmFailed>(e)) {
      if (failed->will_retry) {
        row.live = retry_live(*failed, e.ts_us);
        out->push_back({redacted(status_message(id, row.live, e.ts_us)), ""});
      } else {
        row.live = nullptr;
        row.last_error = gave_up_error(*failed);
        out->push_back({redacted(error_message(id, row.last_error, e.ts_us)), ""});
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
      row.last_error = session_failed_error(*session_failed);
      out->push_back({redacted(error_message(id, row.last_error, e.ts_us)), ""});
    }
  }
}

Status HomeView::poll(std::vector<LiveMessage>* out, const std::function<bool(const std::string&)>& watched) {
  const size_t first_new = out->size();
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
    outlines_.erase(change.session);
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
      row.last_error = crash_error(change.session, change.crashed_after);
      out->push_back({redacted(error_message(change.session, row.last_error, row.meta.updated_us)), ""});
    }
    out->push_back({redacted({{"type", "session"}, {"session", row_json(row)}}), ""});
    if (!change.changed.empty() && (!watched || watched(change.session))) {
      json list = json::array();
      for (const auto& sp : change.changed) list.push_back(span_to_json(sp));
      int64_t last_us = change.root ? change.root->attrs.value("last_ts_us", int64_t{0}) : 0;
      // The skeleton of the whole session: a change may regroup its turns.
      const SpanBuilder* builder = watch_->builder(change.session);
      out->push_back({redacted({{"type", "spans"},
                                {"session", change.session},
                                {"spans", std::move(list)},
                                {"skeleton", builder ? skeleton_json(builder->spans()) : json::array()},
                                {"last_us", last_us},
                                {"reset", false}}),
                      change.session});
    }
  }
  for (size_t i = first_new; i < out->size(); ++i) {
    const json& m = (*out)[i].message;
    if (m["type"] == "status" || m["type"] == "error") remember(m);
  }
  return Status();
}

}  // namespace carapace::web
