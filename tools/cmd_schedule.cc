// `carapace schedule add|list|show|pause|resume|trigger|backfill|rm`: the
// home's schedules (docs/schedules.md).
//
// Schedules fire inside `carapace serve`, the home's one writer. While one
// serves the home (its address is in the home's serve.json, its pid holds
// the log), every command here goes through its API, with the home's token.
// Without one, add, pause, resume and rm write the schedule's stream
// themselves (the next `carapace serve` takes them up), list and show read
// the log; trigger and backfill need the server, which runs the sessions.
#include <curl/curl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "base/clock.h"
#include "base/curl_lib.h"
#include "schedule/schedule_json.h"
#include "schedule/schedule_spec.h"
#include "schedule/schedule_store.h"
#include "storage/db_lock.h"
#include "tools/cli.h"
#include "tools/serve/serve_token.h"

namespace carapace::cli {
namespace {

using nlohmann::json;
using namespace carapace::schedule;

struct ScheduleArgs {
  std::string name;
  // add
  std::string cron, task, tz, overlap, catchup, jitter, model, workspace, instructions;
  uint64_t pause_after_failures = 0;
  uint64_t max_turns = 0;
  bool paused = false;
  bool replace = false;
  // pause
  std::string reason;
  // backfill
  std::string from, to;
};

std::string who_am_i() {
  const char* user = std::getenv("USER");
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return std::string(user != nullptr && *user ? user : "?") + "@" + host + " (pid " + std::to_string(::getpid()) + ")";
}

// The server hosting the home, if one does: its URL from serve.json, when
// the pid there is the one holding the log.
bool hosting_server(const Context& ctx, std::string* url) {
  const pid_t holder = lock_holder(ctx.log_path(), /*count_this_process=*/false);
  if (holder == 0) return false;
  std::string text;
  if (!read_bounded_file(ctx.home() + "/serve.json", 4096, "serve.json", &text).ok()) return false;
  json j;
  if (!parse_bounded_json(text, "serve.json", &j, 4).ok() || !j.is_object()) return false;
  if (j.value("pid", int64_t{0}) != static_cast<int64_t>(holder) || !j.value("hosting", false)) return false;
  *url = j.value("url", "");
  return url->starts_with("http://127.0.0.1:") || url->starts_with("http://[::1]:");
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (s->size() + size * n > (4u << 20)) return 0;  // bounded
  s->append(data, size * n);
  return size * n;
}

// A request to the hosting server: its JSON answer (the envelope), or why not.
Status call_server(const Context& ctx, const std::string& url, const std::string& method, const std::string& path,
                   const json& body, unsigned* status, json* answer) {
  web::ServeToken token;
  CARAPACE_RETURN_IF_ERROR(web::serve_token(ctx.home(), std::getenv("CARAPACE_SERVE_TOKEN"), &token));
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status::io_error("cannot start an HTTP client: " + curl_load_error());
  std::string response;
  std::string payload = body.dump();
  std::string target = url;
  while (!target.empty() && target.back() == '/') target.pop_back();
  target += path;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, ("Authorization: Bearer " + token.value).c_str());
  headers = curl_slist_append(headers, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 60'000L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5'000L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
  }
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    return Status::io_error("carapace serve at " + url + " did not answer: " + curl_easy_strerror(rc));
  }
  *status = static_cast<unsigned>(code);
  return parse_bounded_json(response, "the server's answer", answer, 64);
}

// A reply as the command prints it: the data, or the error with its hint.
int finish(const Context& ctx, unsigned status, const json& answer, const std::function<void(const json&)>& human,
           const std::string& conflict_hint = "") {
  if (status == 200 && answer.value("success", false)) {
    if (ctx.json) {
      ctx.print_success(answer["data"], answer.value("summary", ""));
    } else if (human) {
      human(answer["data"]);
    } else {
      std::printf("%s\n", ctx.shown(answer.value("summary", "")).c_str());
    }
    return kExitOk;
  }
  const json& err = answer.contains("error") ? answer["error"] : json::object();
  std::string message = err.is_object() ? err.value("message", "refused") : err.dump();
  std::string hint = err.is_object() ? err.value("hint", "") : "";
  if (status == 409 && !conflict_hint.empty()) hint = conflict_hint;
  Status s = status == 404   ? Status::not_found(message)
             : status == 409 ? Status::busy(message)
                             : Status::invalid_argument(message);
  return ctx.fail(s, hint);
}

void print_schedule_line(const Context& ctx, const json& s) {
  std::string state = s.value("paused", false) ? "paused" : (s["running"].empty() ? "idle" : "running");
  std::string next = s.contains("next") ? s["next"].get<std::string>() : "-";
  std::string last = "-";
  if (!s["recent"].empty()) last = s["recent"][0].value("outcome", "?") + " " + s["recent"][0].value("session", "");
  std::printf("%-20s %-18s %-16s %-8s next %s  last %s\n", ctx.shown(s.value("name", "")).c_str(),
              ctx.shown(s.value("cron", "")).c_str(), s.value("tz", "UTC").c_str(), state.c_str(), next.c_str(),
              ctx.shown(last).c_str());
}

void print_schedule(const Context& ctx, const json& s) {
  std::printf("schedule %s: \"%s\" in %s, overlap %s, catch-up %s, jitter %s", ctx.shown(s.value("name", "")).c_str(),
              ctx.shown(s.value("cron", "")).c_str(), s.value("tz", "UTC").c_str(), s.value("overlap", "").c_str(),
              s.value("catchup", "").c_str(), s.value("jitter", "").c_str());
  if (s.value("pause_after_failures", 0) > 0) {
    std::printf(", pauses after %d failures in a row", s.value("pause_after_failures", 0));
  }
  std::printf("\n  task: %s\n", ctx.shown(s.value("task", "")).c_str());
  if (s.value("paused", false)) std::printf("  paused: %s\n", ctx.shown(s.value("pause_reason", "")).c_str());
  if (s.contains("next")) {
    std::printf("  next: %s (%s)\n", s["next"].get<std::string>().c_str(), s.value("next_local", "").c_str());
  }
  std::printf("  %s fired, %s skipped, %llu failed in a row\n", count(s.value("fired", uint64_t{0}), "run").c_str(),
              count(s.value("skipped", uint64_t{0}), "due time").c_str(),
              static_cast<unsigned long long>(s.value("consecutive_failures", uint64_t{0})));
  for (const auto& r : s["running"]) {
    std::printf("  running: %s (%s, due %s)\n", ctx.shown(r.value("session", "")).c_str(),
                r.value("trigger", "").c_str(), r.value("nominal", "").c_str());
  }
  for (const auto& r : s["recent"]) {
    std::printf("  %-9s %s (%s, due %s, %llu ms)%s\n", r.value("outcome", "").c_str(),
                ctx.shown(r.value("session", "")).c_str(), r.value("trigger", "").c_str(), r.value("nominal", "").c_str(),
                static_cast<unsigned long long>(r.value("duration_ms", uint64_t{0})),
                r.contains("error") ? (": " + ctx.shown(r["error"].get<std::string>())).c_str() : "");
  }
}

// Without a server: the log, read or written here.
class Local {
 public:
  explicit Local(const Context& ctx) : ctx_(ctx) {}

  int read(const std::function<int(const EventLog&)>& body) {
    if (Status home = ctx_.prepare_home(/*create=*/false); !home.ok()) return ctx_.fail(home);
    auto log = ctx_.open_log(EventLog::Mode::kReader);
    if (!log) return kExitFailed;
    return body(*log);
  }

  int write(const std::function<int(EventLog&)>& body) {
    if (Status home = ctx_.prepare_home(/*create=*/true); !home.ok()) return ctx_.fail(home);
    if (pid_t holder = lock_holder(ctx_.log_path(), false); holder != 0) {
      return ctx_.fail(Status::busy("process " + std::to_string(holder) + " writes this home and is not a carapace serve "
                                    "hosting it"),
                       "try again when it ends, or run `carapace serve` and use this command while it runs");
    }
    auto log = ctx_.open_log(EventLog::Mode::kWriter);
    if (!log) return kExitFailed;
    return body(*log);
  }

 private:
  const Context& ctx_;
};

Status load_live(const EventLog& log, const std::string& name, ScheduleState* s, CronExpression* cron, TimeZone* zone) {
  CARAPACE_RETURN_IF_ERROR(validate_name(name));
  CARAPACE_RETURN_IF_ERROR(load_schedule(log, name, s));
  if (!s->defined || s->removed) return Status::not_found("no schedule '" + name + "'");
  CARAPACE_RETURN_IF_ERROR(CronExpression::parse(s->definition.cron, cron));
  return TimeZone::load(s->definition.tz, zone);
}

json definition_body(const ScheduleArgs& a) {
  json j = {{"cron", a.cron}, {"task", a.task}};
  if (!a.tz.empty()) j["tz"] = a.tz;
  if (!a.overlap.empty()) j["overlap"] = a.overlap;
  if (!a.catchup.empty()) j["catchup"] = a.catchup;
  if (!a.jitter.empty()) j["jitter"] = a.jitter;
  if (a.pause_after_failures) j["pause_after_failures"] = a.pause_after_failures;
  if (a.paused) j["paused"] = true;
  json session = json::object();
  if (!a.model.empty()) session["model"] = a.model;
  if (a.max_turns) session["max_turns"] = a.max_turns;
  if (!a.workspace.empty()) session["workspace"] = a.workspace;
  if (!a.instructions.empty()) session["instructions"] = a.instructions;
  if (!session.empty()) j["session"] = session;
  return j;
}

int run_action(Context& ctx, const std::string& action, const ScheduleArgs& a) {
  std::string url;
  const bool served = hosting_server(ctx, &url);
  if (action != "list") {
    if (Status s = validate_name(a.name); !s.ok()) return ctx.usage(s);
  }
  auto human_show = [&ctx](const json& d) { print_schedule(ctx, d); };
  if (served) {
    std::string method = "POST";
    std::string path = "/api/schedules/" + a.name + "/" + action;
    json body = json::object();
    std::function<void(const json&)> human;  // the server's summary
    if (action == "list") {
      method = "GET";
      path = "/api/schedules";
      human = [&ctx](const json& d) {
        if (d["schedules"].empty()) std::printf("no schedules (carapace schedule add NAME --cron ... --task ...)\n");
        for (const auto& s : d["schedules"]) print_schedule_line(ctx, s);
      };
    } else if (action == "show") {
      method = "GET";
      path = "/api/schedules/" + a.name;
      human = human_show;
    } else if (action == "add") {
      path = "/api/schedules";
      body = definition_body(a);
      body["name"] = a.name;
      if (a.replace) body["replace"] = true;
      human = [&ctx](const json& d) {
        std::printf("schedule %s defined; next run %s\n", ctx.shown(d.value("name", "")).c_str(),
                    d.value("next", "-").c_str());
      };
    } else if (action == "pause") {
      if (!a.reason.empty()) body["reason"] = a.reason;
    } else if (action == "rm") {
      path = "/api/schedules/" + a.name + "/remove";
    } else if (action == "trigger") {
      human = [&ctx, &a](const json& d) {
        std::printf("schedule %s triggered: session %s\n", ctx.shown(a.name).c_str(),
                    ctx.shown(d.value("session", "")).c_str());
      };
    } else if (action == "backfill") {
      body = {{"from", a.from}, {"to", a.to}};
      human = [&ctx, &a](const json& d) {
        std::printf("schedule %s backfilled: %zu runs started, %zu had run already\n", ctx.shown(a.name).c_str(),
                    d["started"].size(), d["exists"].size());
        for (const auto& s : d["started"]) std::printf("  started %s\n", ctx.shown(s.get<std::string>()).c_str());
      };
    }
    unsigned status = 0;
    json answer;
    Status s = call_server(ctx, url, method, path, body, &status, &answer);
    if (!s.ok()) return ctx.fail(s, "is carapace serve still running? `carapace serve` starts it");
    return finish(ctx, status, answer, human, action == "add" ? "add --replace to change it, or choose another name" : "");
  }
  // No server: the log itself.
  Local local(ctx);
  const int64_t now = now_us();
  if (action == "list" || action == "show") {
    return local.read([&](const EventLog& log) {
      if (action == "show") {
        ScheduleState s;
        CronExpression cron;
        TimeZone zone;
        if (Status st = load_live(log, a.name, &s, &cron, &zone); !st.ok()) {
          return ctx.fail(st, "`carapace schedule list` lists the schedules");
        }
        json d = schedule_json(s, cron, zone, now, true);
        return finish(ctx, 200, {{"success", true}, {"data", d}, {"summary", "schedule " + a.name}}, human_show);
      }
      std::vector<std::string> names;
      if (Status st = list_schedules(log, &names); !st.ok()) return ctx.fail(st);
      json list = json::array();
      for (const auto& n : names) {
        ScheduleState s;
        CronExpression cron;
        TimeZone zone;
        if (load_live(log, n, &s, &cron, &zone).ok()) list.push_back(schedule_json(s, cron, zone, now, false));
      }
      return finish(ctx, 200,
                    {{"success", true}, {"data", {{"schedules", list}}}, {"summary", count(list.size(), "schedule")}},
                    [&ctx](const json& d) {
                      if (d["schedules"].empty()) {
                        std::printf("no schedules (carapace schedule add NAME --cron ... --task ...)\n");
                      }
                      for (const auto& s : d["schedules"]) print_schedule_line(ctx, s);
                      std::printf("(no carapace serve hosts this home: nothing fires until one does)\n");
                    });
    });
  }
  if (action == "trigger" || action == "backfill") {
    return ctx.fail(Status::unsupported("no carapace serve hosts this home, and it is the server that runs a "
                                        "schedule's sessions"),
                    "start `carapace serve` (with a provider or --scenario), then run this again");
  }
  return local.write([&](EventLog& log) {
    ScheduleState s;
    if (Status st = load_schedule(log, a.name, &s); !st.ok()) return ctx.fail(st);
    const bool live = s.defined && !s.removed;
    std::vector<EventBody> bodies;
    std::string summary;
    if (action == "add") {
      if (live && !a.replace) {
        return ctx.fail(Status::busy("schedule '" + a.name + "' exists already"),
                        "add --replace to change it, or choose another name");
      }
      ScheduleDefined d;
      if (Status st = definition_from_json(a.name, definition_body(a), "--", now, &d); !st.ok()) {
        std::string m = st.message();
        if (m.starts_with("--.")) m = "--" + m.substr(3);  // "--.cron: ..." reads "--cron: ..."
        return ctx.usage(Status::invalid_argument(m), "docs/schedules.md describes the fields");
      }
      d.source = "cli";
      d.who = who_am_i();
      bodies.push_back(d);
      summary = "schedule " + a.name + " defined";
    } else if (!live) {
      return ctx.fail(Status::not_found("no schedule '" + a.name + "'"), "`carapace schedule list` lists them");
    } else if (action == "pause") {
      if (s.paused) return ctx.fail(Status::busy("schedule '" + a.name + "' is paused already"));
      bodies.push_back(SchedulePaused{.reason = a.reason, .source = "cli", .who = who_am_i()});
      summary = "schedule " + a.name + " paused";
    } else if (action == "resume") {
      if (!s.paused) return ctx.fail(Status::busy("schedule '" + a.name + "' is not paused"));
      bodies.push_back(ScheduleResumed{.source = "cli", .who = who_am_i()});
      summary = "schedule " + a.name + " resumed";
    } else if (action == "rm") {
      bodies.push_back(ScheduleRemoved{.source = "cli", .who = who_am_i()});
      summary = "schedule " + a.name + " removed (its runs stay in the home)";
    }
    if (Status st = append_schedule(log, &s, std::move(bodies), now); !st.ok()) return ctx.fail(st);
    json data = {{"name", a.name}};
    if (!s.removed) {
      CronExpression cron;
      TimeZone zone;
      if (CronExpression::parse(s.definition.cron, &cron).ok() && TimeZone::load(s.definition.tz, &zone).ok()) {
        data = schedule_json(s, cron, zone, now, false);
      }
    }
    return finish(ctx, 200, {{"success", true}, {"data", data}, {"summary", summary}}, [&](const json& d) {
      std::printf("%s%s\n", ctx.shown(summary).c_str(),
                  d.contains("next") ? ("; next run " + d["next"].get<std::string>()).c_str() : "");
      std::printf("(no carapace serve hosts this home: it fires once one does)\n");
    });
  });
}

}  // namespace

void register_schedule_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ScheduleArgs>();
  auto* sched = app.add_subcommand("schedule", "Sessions that start on a cron schedule, run by carapace serve (docs/schedules.md)");
  sched->require_subcommand(1);
  auto action = [&ctx, args](CLI::App* cmd, const std::string& name) {
    add_json_flag(cmd, ctx);
    cmd->callback([&ctx, args, name] { ctx.run = [&ctx, args, name] { return run_action(ctx, name, *args); }; });
  };
  auto* add = sched->add_subcommand("add", "Define a schedule (--replace changes one)");
  add->add_option("name", args->name, "Its name: a-z, 0-9, '_', '-'")->required();
  add->add_option("--cron", args->cron, "When: five fields (\"*/5 * * * *\") or @hourly, @daily, ...")->required();
  add->add_option("--task", args->task, "The first user message of every run")->required();
  add->add_option("--tz", args->tz, "The time zone the fields are read in (default UTC), e.g. Europe/Berlin");
  add->add_option("--overlap", args->overlap, "When a run is still going: skip (default), buffer-one, allow");
  add->add_option("--catchup", args->catchup, "Fires missed by up to this long still run (default 1h)");
  add->add_option("--jitter", args->jitter, "Each fire waits a deterministic 0..this long (default 0)");
  add->add_option("--pause-after-failures", args->pause_after_failures, "Pause after N failed runs in a row (0: never)");
  add->add_option("--model", args->model, "The model of its sessions (default: the server's)");
  add->add_option("--max-turns", args->max_turns, "The turn budget of each run");
  add->add_option("--workspace", args->workspace, "Each run's workspace under the server's workspace root");
  add->add_option("--instructions", args->instructions, "Session instructions of each run");
  add->add_flag("--paused", args->paused, "Create it paused");
  add->add_flag("--replace", args->replace, "Replace the schedule of that name");
  action(add, "add");
  action(sched->add_subcommand("list", "The schedules, their next fire and last run"), "list");
  auto* show = sched->add_subcommand("show", "A schedule: its definition, state, next fire and last 20 runs");
  show->add_option("name", args->name, "The schedule")->required();
  action(show, "show");
  auto* pause = sched->add_subcommand("pause", "Pause a schedule: due times pass without a run");
  pause->add_option("name", args->name, "The schedule")->required();
  pause->add_option("--reason", args->reason, "Why (recorded)");
  action(pause, "pause");
  auto* resume = sched->add_subcommand("resume", "Resume a paused schedule (the paused time is not caught up)");
  resume->add_option("name", args->name, "The schedule")->required();
  action(resume, "resume");
  auto* trigger = sched->add_subcommand("trigger", "Run a schedule now (needs carapace serve)");
  trigger->add_option("name", args->name, "The schedule")->required();
  action(trigger, "trigger");
  auto* backfill = sched->add_subcommand("backfill", "Run the due times of a past range now (needs carapace serve)");
  backfill->add_option("name", args->name, "The schedule")->required();
  backfill->add_option("--from", args->from, "Start of the range (RFC 3339 or a date)")->required();
  backfill->add_option("--to", args->to, "End of the range, included")->required();
  action(backfill, "backfill");
  auto* rm = sched->add_subcommand("rm", "Remove a schedule (its runs stay in the home)");
  rm->add_option("name", args->name, "The schedule")->required();
  action(rm, "rm");
}

}  // namespace carapace::cli
