#include "tools/serve/schedule_runner.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "base/clock.h"
#include "runtime/runtime_internal.h"
#include "schedule/planner.h"
#include "schedule/schedule_json.h"
#include "schedule/schedule_spec.h"
#include "schedule/schedule_store.h"
#include "tools/serve/session_host.h"
#include "tools/serve/web_access.h"

namespace carapace::web {

using nlohmann::json;
using namespace carapace::schedule;

namespace {

// The run's outcome once its run ended, or "" while it goes on (or waits for a person).
std::string ended_outcome(Runtime& rt, const std::string& id, std::string* error, bool* missing) {
  SessionOutcome out;
  Status s = rt.wait(id, std::chrono::milliseconds(0), &out);
  *missing = false;
  if (s.is_not_found()) {
    *missing = true;
    return "";
  }
  if (s.is_timed_out() || s.is_busy()) return "";
  if (s.is_needs_resume()) {
    *error = s.message();
    return "stopped";
  }
  if (!s.ok()) return "";
  if (out.continues) return "";
  if (out.status == SessionStatus::kCompleted) return "completed";
  if (out.status == SessionStatus::kFailed) {
    *error = out.error;
    return "failed";
  }
  if (out.stop_reason == "waiting") return "";
  *error = out.stop_reason + (out.error.empty() ? "" : ": " + out.error);
  return "stopped";
}

}  // namespace

Status read_config_schedules(const std::string& path, json* out) {
  *out = nullptr;
  std::string text;
  CARAPACE_RETURN_IF_ERROR(read_bounded_file(path, 4 << 20, "the config file", &text));
  json j;
  CARAPACE_RETURN_IF_ERROR(parse_bounded_json(text, path, &j, 64));
  if (!j.is_object() || !j.contains("schedules")) return Status();
  const json& s = j["schedules"];
  if (!s.is_object()) return Status::invalid_argument(path + ": schedules: must be an object of NAME: {cron, task, ...}");
  *out = s;
  return Status();
}

ScheduleRunner::ScheduleRunner(Runtime* runtime, SessionHost* host, RunnerOptions options)
    : runtime_(runtime), host_(host), options_(std::move(options)) {}

ScheduleRunner::~ScheduleRunner() { stop(); }

void ScheduleRunner::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ScheduleRunner::set_publisher(std::function<void(LiveMessage)> publish) {
  std::lock_guard lock(publish_mu_);
  publish_ = std::move(publish);
}

void ScheduleRunner::publish(const std::string& name, const std::string& what) {
  std::lock_guard lock(publish_mu_);
  if (publish_) publish_(LiveMessage{.message = {{"type", "schedule"}, {"name", name}, {"what", what}}});
}

Status ScheduleRunner::load_locked(const std::string& name) {
  Entry e;
  CARAPACE_RETURN_IF_ERROR(load_schedule(runtime_log(*runtime_), name, &e.state));
  if (e.state.defined) {
    CARAPACE_RETURN_IF_ERROR(CronExpression::parse(e.state.definition.cron, &e.cron));
    CARAPACE_RETURN_IF_ERROR(TimeZone::load(e.state.definition.tz, &e.zone));
  }
  schedules_[name] = std::move(e);
  return Status();
}

Status ScheduleRunner::append_locked(Entry& e, std::vector<EventBody> bodies, int64_t now) {
  if (bodies.empty()) return Status();
  std::vector<std::string> what;
  bool redefined = false;
  for (const auto& b : bodies) {
    what.emplace_back(wire_name(event_type_number(b)));
    redefined = redefined || std::holds_alternative<ScheduleDefined>(b);
  }
  CARAPACE_RETURN_IF_ERROR(append_schedule(runtime_log(*runtime_), &e.state, std::move(bodies), now));
  if (redefined) {
    // A new definition brings its own cron and zone (checked before it was written).
    CARAPACE_RETURN_IF_ERROR(CronExpression::parse(e.state.definition.cron, &e.cron));
    CARAPACE_RETURN_IF_ERROR(TimeZone::load(e.state.definition.tz, &e.zone));
  }
  for (const auto& w : what) publish(e.state.name, w);
  return Status();
}

Status ScheduleRunner::load(const json* config, std::vector<std::string>* report) {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  CARAPACE_RETURN_IF_ERROR(list_schedules(runtime_log(*runtime_), &names));
  for (const auto& n : names) {
    Status s = load_locked(n);
    if (!s.ok()) return s.with_context("schedule '" + n + "'");
  }
  const int64_t now = now_us();
  // config.json's schedules: defined when new or changed; those it made
  // and no longer names are removed.
  std::set<std::string> in_config;
  if (config != nullptr && config->is_object()) {
    for (const auto& [name, spec] : config->items()) {
      CARAPACE_RETURN_IF_ERROR(validate_name(name));
      ScheduleDefined d;
      CARAPACE_RETURN_IF_ERROR(definition_from_json(name, spec, "config.json: schedules." + name, now, &d));
      in_config.insert(name);
      auto it = schedules_.find(name);
      const bool live = it != schedules_.end() && it->second.state.defined && !it->second.state.removed;
      if (live && same_definition(it->second.state.definition, d)) continue;
      CARAPACE_RETURN_IF_ERROR(define_locked(d, true, "config", now));
      report->push_back((live ? "schedule " + name + " changed by the config: " : "schedule " + name + " from the config: ") +
                        d.cron + (d.tz.empty() ? "" : " (" + d.tz + ")"));
    }
  }
  for (auto& [name, e] : schedules_) {
    if (e.state.defined && !e.state.removed && e.state.definition.source == "config" && !in_config.count(name)) {
      CARAPACE_RETURN_IF_ERROR(append_locked(e, {ScheduleRemoved{.source = "config", .who = options_.who}}, now));
      report->push_back("schedule " + name + " removed: the config no longer has it");
    }
  }
  return Status();
}

void ScheduleRunner::start(std::vector<std::string>* report) {
  std::unique_lock lock(mu_);
  const int64_t now = now_us();
  // Fires whose session never started (the host died in between): now,
  // under the id they recorded.
  for (auto& [name, e] : schedules_) {
    for (const auto& run : std::vector<ScheduleRun>(e.state.open)) {
      std::string error;
      bool missing = false;
      (void)ended_outcome(*runtime_, run.session, &error, &missing);
      if (!missing) continue;
      report->push_back("schedule " + name + ": starting " + run.session + ", fired at " + utc_text(run.actual_us) +
                        " before the server stopped");
      start_fire_locked(e, ScheduleFired{.nominal_us = run.nominal_us,
                                         .actual_us = run.actual_us,
                                         .session = run.session,
                                         .trigger = run.trigger});
    }
  }
  tick_locked(now);
  size_t live = 0;
  for (const auto& [name, e] : schedules_) live += e.state.defined && !e.state.removed ? 1 : 0;
  if (live > 0) report->push_back(std::to_string(live) + (live == 1 ? " schedule" : " schedules") + " running");
  lock.unlock();
  thread_ = std::thread([this] { loop(); });
}

void ScheduleRunner::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int64_t now = now_us();
    tick_locked(now);
    // Sleep until the next due fire, at most a poll interval (open runs
    // are looked at, and a clock that jumps is noticed).
    int64_t wait_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.poll).count();
    for (const auto& [name, e] : schedules_) {
      if (e.wake_at_us) wait_us = std::min(wait_us, std::max<int64_t>(*e.wake_at_us - now, 1000));
    }
    cv_.wait_for(lock, std::chrono::microseconds(wait_us), [this] { return stopping_ || poke_; });
    poke_ = false;
  }
}

void ScheduleRunner::tick() {
  std::lock_guard lock(mu_);
  tick_locked(now_us());
}

void ScheduleRunner::watch_runs_locked(Entry& e, int64_t now) {
  for (const auto& run : std::vector<ScheduleRun>(e.state.open)) {
    std::string error;
    bool missing = false;
    std::string outcome = ended_outcome(*runtime_, run.session, &error, &missing);
    if (outcome.empty()) continue;
    const uint64_t duration_ms = now > run.actual_us ? static_cast<uint64_t>((now - run.actual_us) / 1000) : 0;
    Status s = append_locked(e,
                             {ScheduleRunEnded{.session = run.session,
                                               .nominal_us = run.nominal_us,
                                               .outcome = outcome,
                                               .error = error.substr(0, 2000),
                                               .duration_ms = duration_ms}},
                             now);
    if (!s.ok()) {
      spdlog::error("cron_error jobId={} error=\"cannot record the end of {}: {}\"", e.state.name, run.session,
                    s.to_string());
      continue;
    }
    spdlog::info("cron_end jobId={} sessionId={} status={} durationMs={}", e.state.name, run.session, outcome,
                 duration_ms);
    if (outcome == "failed") spdlog::error("cron_error jobId={} sessionId={} error=\"{}\"", e.state.name, run.session, error);
  }
}

void ScheduleRunner::start_fire_locked(Entry& e, const ScheduleFired& fire) {
  // The fire is durable; the session is not started yet.
  if (options_.faults) {
    Fault f = check_fault(options_.faults.get(),
                          FaultSite{.point = FaultPoint::kScheduleFired, .session = fire.session, .name = e.state.name});
    if (f.action == FaultAction::kCrash) crash_now();
    if (f.action == FaultAction::kDelay) std::this_thread::sleep_for(std::chrono::milliseconds(f.delay_ms));
  }
  const ScheduleDefined& d = e.state.definition;
  SessionOptions o;
  o.id = fire.session;
  o.task = d.task;
  std::string workspace;
  json session = json::parse(d.session.text.empty() ? "{}" : d.session.text, nullptr, false);
  if (session.is_object()) {
    o.model = session.value("model", "");
    o.max_turns = session.value("max_turns", uint64_t{0});
    o.instructions = session.value("instructions", "");
    workspace = session.value("workspace", "");
  }
  Status s = host_->start_run(o, workspace);
  if (!s.ok()) {
    // Recorded as the run's end, so that the schedule goes on (and counts the failure).
    spdlog::error("cron_error jobId={} sessionId={} error=\"{}\"", e.state.name, fire.session, s.to_string());
    const int64_t now = now_us();
    (void)append_locked(e,
                        {ScheduleRunEnded{.session = fire.session,
                                          .nominal_us = fire.nominal_us,
                                          .outcome = "failed",
                                          .error = "the session did not start: " + s.to_string()}},
                        now);
    return;
  }
  spdlog::info("cron_start jobId={} sessionId={} schedule=\"{}\" trigger={} nominal={}", e.state.name, fire.session,
               d.cron, fire.trigger, utc_text(fire.nominal_us));
}

void ScheduleRunner::tick_locked(int64_t now) {
  for (auto& [name, e] : schedules_) {
    e.wake_at_us.reset();
    if (!e.state.defined || e.state.removed) continue;
    watch_runs_locked(e, now);
    Plan plan = plan_due(e.state, e.cron, e.zone, now);
    e.wake_at_us = plan.wake_at_us;
    if (plan.events.empty()) continue;
    std::vector<ScheduleFired> fires;
    for (const auto& b : plan.events) {
      if (const auto* f = std::get_if<ScheduleFired>(&b)) fires.push_back(*f);
      if (const auto* k = std::get_if<ScheduleSkipped>(&b)) {
        spdlog::info("schedule {}: {} due time{} skipped ({}), {} to {}", name, k->count, k->count == 1 ? "" : "s",
                     k->reason, utc_text(k->nominal_us), utc_text(k->last_nominal_us));
      }
      if (const auto* p = std::get_if<SchedulePaused>(&b)) {
        spdlog::error("cron_error jobId={} error=\"paused: {}\"", name, p->reason);
      }
    }
    Status s = append_locked(e, plan.events, now);
    if (!s.ok()) {
      spdlog::error("cron_error jobId={} error=\"cannot record what is due: {}\"", name, s.to_string());
      continue;
    }
    for (const auto& f : fires) start_fire_locked(e, f);
  }
}

Status ScheduleRunner::define_locked(ScheduleDefined d, bool replace, const std::string& source, int64_t now) {
  auto it = schedules_.find(d.name);
  if (it == schedules_.end()) {
    CARAPACE_RETURN_IF_ERROR(load_locked(d.name));
    it = schedules_.find(d.name);
  }
  Entry& e = it->second;
  const bool live = e.state.defined && !e.state.removed;
  if (live && !replace) {
    return Status::already_decided("schedule '" + d.name + "' exists already");
  }
  d.source = source;
  d.who = options_.who;
  return append_locked(e, {d}, now);
}

json ScheduleRunner::describe_locked(const Entry& e, int64_t now, bool full) const {
  return schedule_json(e.state, e.cron, e.zone, now, full);
}

ApiReply ScheduleRunner::get(std::string_view path) {
  auto parts = split_path(path.substr(std::string_view("/api/schedules").size()));
  std::lock_guard lock(mu_);
  const int64_t now = now_us();
  if (parts.size() == 1 && parts[0].empty()) {
    json list = json::array();
    for (const auto& [name, e] : schedules_) {
      if (e.state.defined && !e.state.removed) list.push_back(describe_locked(e, now, false));
    }
    return api_ok({{"schedules", list}}, std::to_string(list.size()) + " schedules");
  }
  std::string name;
  if (parts.size() == 2 && parts[0].empty() && percent_decode(parts[1], &name)) {
    auto it = schedules_.find(name);
    if (it == schedules_.end() || !it->second.state.defined || it->second.state.removed) {
      return api_error(404, "no schedule '" + name.substr(0, 64) + "'", "GET /api/schedules lists them");
    }
    return api_ok(describe_locked(it->second, now, true), "schedule " + name);
  }
  return api_error(404, "nothing at " + std::string(path), "GET /api/schedules, or /api/schedules/NAME");
}

ApiReply ScheduleRunner::post(std::string_view path, const json& body) {
  auto parts = split_path(path.substr(std::string_view("/api/schedules").size()));
  if (parts.size() == 1 && parts[0].empty()) return define_api(body);
  std::string name;
  if (parts.size() == 3 && parts[0].empty() && percent_decode(parts[1], &name)) return act_api(name, std::string(parts[2]), body);
  return api_error(404, "nothing to POST at " + std::string(path),
                   "POST /api/schedules, or /api/schedules/NAME/pause, resume, trigger, backfill, remove");
}

ApiReply ScheduleRunner::define_api(const json& body) {
  json spec = body;
  if (!spec.contains("name") || !spec["name"].is_string()) {
    return api_error(400, "\"name\" is required: a schedule name", "POST /api/schedules takes {\"name\", \"cron\", \"task\", ...}");
  }
  const std::string name = spec["name"].get<std::string>();
  bool replace = false;
  if (spec.contains("replace")) {
    if (!spec["replace"].is_boolean()) return api_error(400, "\"replace\" must be true or false");
    replace = spec["replace"].get<bool>();
  }
  spec.erase("name");
  spec.erase("replace");
  Status s = validate_name(name);
  if (!s.ok()) return api_failed(s);
  std::lock_guard lock(mu_);
  const int64_t now = now_us();
  ScheduleDefined d;
  s = definition_from_json(name, spec, "schedule " + name, now, &d);
  if (!s.ok()) return api_failed(s, "docs/schedules.md lists the fields");
  s = define_locked(d, replace, "api", now);
  if (s.is_already_decided()) {
    return api_error(409, s.message(), "send \"replace\": true to change it, or choose another name");
  }
  if (!s.ok()) return api_failed(s);
  poke_ = true;
  cv_.notify_all();
  return api_ok(describe_locked(schedules_[name], now, false), "schedule " + name + " defined: " + d.cron);
}

ApiReply ScheduleRunner::act_api(const std::string& name, const std::string& action, const json& body) {
  std::lock_guard lock(mu_);
  const int64_t now = now_us();
  auto it = schedules_.find(name);
  if (it == schedules_.end() || !it->second.state.defined || it->second.state.removed) {
    return api_error(404, "no schedule '" + name.substr(0, 64) + "'", "GET /api/schedules lists them");
  }
  Entry& e = it->second;
  auto text = [&](const char* field, std::string* out, bool required, ApiReply* refusal) {
    auto f = body.find(field);
    if (f == body.end() || f->is_null()) {
      if (!required) return true;
      *refusal = api_error(400, std::string("\"") + field + "\" is required");
      return false;
    }
    if (!f->is_string() || f->get_ref<const std::string&>().size() > 1024) {
      *refusal = api_error(400, std::string("\"") + field + "\" must be a string of at most 1024 bytes");
      return false;
    }
    *out = f->get<std::string>();
    return true;
  };
  auto only = [&](std::initializer_list<const char*> fields, ApiReply* refusal) {
    for (auto f = body.begin(); f != body.end(); ++f) {
      bool known = false;
      for (const char* k : fields) known = known || f.key() == k;
      if (!known) {
        *refusal = api_error(400, "unknown field \"" + f.key().substr(0, 64) + "\"");
        return false;
      }
    }
    return true;
  };
  ApiReply refusal;
  Status s;
  if (action == "pause") {
    std::string reason;
    if (!only({"reason"}, &refusal) || !text("reason", &reason, false, &refusal)) return refusal;
    if (e.state.paused) return api_error(409, "schedule '" + name + "' is paused already");
    s = append_locked(e, {SchedulePaused{.reason = reason, .source = "api", .who = options_.who}}, now);
    if (!s.ok()) return api_failed(s);
    return api_ok(describe_locked(e, now, false), "schedule " + name + " paused");
  }
  if (action == "resume") {
    if (!only({}, &refusal)) return refusal;
    if (!e.state.paused) return api_error(409, "schedule '" + name + "' is not paused");
    s = append_locked(e, {ScheduleResumed{.source = "api", .who = options_.who}}, now);
    if (!s.ok()) return api_failed(s);
    poke_ = true;
    cv_.notify_all();
    return api_ok(describe_locked(e, now, false), "schedule " + name + " resumed");
  }
  if (action == "remove") {
    if (!only({}, &refusal)) return refusal;
    s = append_locked(e, {ScheduleRemoved{.source = "api", .who = options_.who}}, now);
    if (!s.ok()) return api_failed(s);
    return api_ok({{"name", name}, {"removed", true}},
                  "schedule " + name + " removed (its runs stay in the home)");
  }
  if (action == "trigger") {
    if (!only({}, &refusal)) return refusal;
    ScheduleFired f;
    s = plan_trigger(e.state, now, options_.who, &f);
    if (s.is_busy()) return api_error(409, s.message(), "wait for the run to end, or define the schedule with overlap allow");
    if (!s.ok()) return api_failed(s);
    std::vector<Event> none;
    if (runtime_->read_events(f.session, UINT64_MAX, &none).ok()) {
      return api_error(409, "session '" + f.session + "' exists already (a trigger in the same second)", "try again");
    }
    s = append_locked(e, {f}, now);
    if (!s.ok()) return api_failed(s);
    start_fire_locked(e, f);
    return api_ok({{"name", name}, {"session", f.session}}, "schedule " + name + " triggered: " + f.session);
  }
  if (action == "backfill") {
    std::string from_text, to_text;
    if (!only({"from", "to"}, &refusal) || !text("from", &from_text, true, &refusal) ||
        !text("to", &to_text, true, &refusal)) {
      return refusal;
    }
    int64_t from = 0, to = 0;
    s = parse_time(from_text, "\"from\"", &from);
    if (s.ok()) s = parse_time(to_text, "\"to\"", &to);
    if (!s.ok()) return api_failed(s);
    Plan plan;
    auto exists = [this](const std::string& id) {
      std::vector<Event> none;
      return runtime_->read_events(id, UINT64_MAX, &none).ok();
    };
    s = plan_backfill(e.state, e.cron, e.zone, from, to, now, options_.who, exists, options_.max_backfill, &plan);
    if (!s.ok()) return api_failed(s);
    std::vector<ScheduleFired> fires;
    json started = json::array();
    json skipped = json::array();
    for (const auto& b : plan.events) {
      if (const auto* f = std::get_if<ScheduleFired>(&b)) {
        fires.push_back(*f);
        started.push_back(f->session);
      }
      if (const auto* k = std::get_if<ScheduleSkipped>(&b)) skipped.push_back(utc_text(k->nominal_us));
    }
    s = append_locked(e, plan.events, now);
    if (!s.ok()) return api_failed(s);
    for (const auto& f : fires) start_fire_locked(e, f);
    return api_ok({{"name", name}, {"started", started}, {"exists", skipped}},
                  "schedule " + name + " backfilled: " + std::to_string(fires.size()) + " runs started, " +
                      std::to_string(skipped.size()) + " had run already");
  }
  return api_error(404, "no action '" + action.substr(0, 32) + "' on a schedule",
                   "POST /api/schedules/NAME/pause, resume, trigger, backfill or remove");
}

}  // namespace carapace::web
