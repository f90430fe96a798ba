// Schedules in a hosting `carapace serve` (docs/schedules.md), in its own
// process, its clock set by Debian's faketime: a due time fires one session
// named by the schedule and the time, with cron_start / cron_end lines; a
// host down for an hour catches up by the window and skips the rest; a host
// killed between a fire and its session starts that session once at its next
// start; a host killed (or stopped) while a scheduled run goes resumes it
// and ends the run once; failures in a row pause the schedule; bad
// definitions are refused naming the field, with nothing written; config.json
// defines, changes and removes schedules; the CLI works with and without a
// server.
#define BOOST_TEST_MODULE schedule_host_test
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/support/serve_host.h"

using namespace carapace;
using carapace::testing::Reply;
using carapace::testing::serve_host_detail::contains;
using carapace::testing::serve_host_detail::slurp;
using carapace::testing::serve_host_detail::wait_for;
using nlohmann::json;

namespace {

constexpr const char* kQuick = R"({"replies": [{"text": "The report is done."}]})";
constexpr const char* kSlow = R"({"replies": [{"text": "A slow report, a while in the making.", "latency_ms": 4000}]})";
constexpr const char* kFailing = R"({"replies": [{"error": {"status": 400, "message": "bad request"}}]})";

int64_t utc_us(int y, int mo, int d, int h, int mi) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000;
}

// The day the servers' clocks are set to: tomorrow (UTC), so that their
// times (03:00 to 04:02) are ahead of this machine's real clock, as the
// files the servers write are stamped by it. (A server whose clock is
// behind its log files' times does not list new sessions: left as found.)
const std::tm kTomorrow = [] {
  const std::time_t t = std::time(nullptr) + 24 * 3600;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}();
const int kYear = kTomorrow.tm_year + 1900, kMonth = kTomorrow.tm_mon + 1, kDayOfMonth = kTomorrow.tm_mday;
std::string day_text(const char* format) {
  char buf[16];
  std::strftime(buf, sizeof buf, format, &kTomorrow);
  return buf;
}
const std::string kDay = day_text("%Y-%m-%d");
const std::string kDayCompact = day_text("%Y%m%d");

// Debian's libfaketime, preloaded straight into the program (the faketime
// command forks, so the pid a test kills would not be the server's).
constexpr const char* kFaketimeLib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

bool have_faketime() { return std::filesystem::exists(kFaketimeLib); }

struct Fixture : carapace::testing::ServeHost {
  // The program under libfaketime, its clock starting at `when` (UTC) and
  // running on; monotonic time stays real (timers and waits are unchanged).
  static std::string at(const std::string& when) {
    return "TZ=UTC FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME='@" + when + "' LD_PRELOAD=" + std::string(kFaketimeLib) + " ";
  }

  // `carapace ARGS` now (not under faketime); its exit code and output.
  int cli(const std::string& args, std::string* out = nullptr) {
    std::string file = dir.sub("cli.out");
    std::string cmd = "'" + std::string(CARAPACE_BIN) + "' --home '" + home + "' " + args + " >'" + file + "' 2>&1";
    int rc = std::system(cmd.c_str());
    if (out != nullptr) *out = slurp(file);
    return WEXITSTATUS(rc);
  }

  json schedule(const std::string& name) {
    Reply r = get("/api/schedules/" + name);
    return r.status == 200 ? r.j["data"] : json();
  }

  // The stream's events of one type.
  std::vector<json> stream(const std::string& name, const std::string& type) { return of_type("schedule:" + name, type); }

  std::string logs() {
    std::string all;
    for (const auto& entry : std::filesystem::directory_iterator(home + "/logs")) all += slurp(entry.path().string());
    return all;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(schedule_host, Fixture)

BOOST_AUTO_TEST_CASE(a_due_time_fires_one_session_named_by_the_schedule_and_its_time) {
  if (!have_faketime()) {
    BOOST_TEST_MESSAGE("skipped: faketime is not installed (bootstrap.sh test installs it)");
    return;
  }
  start_server(kQuick, "", "serve.out", at(kDay + " 03:59:45"));
  Reply made = post("/api/schedules", {{"name", "report"}, {"cron", "0 4 * * *"}, {"task", "write the report"}});
  BOOST_REQUIRE_MESSAGE(made.status == 200, made.body);
  BOOST_TEST(made.j["data"]["next"] == kDay + "T04:00:00Z");
  BOOST_REQUIRE_MESSAGE(wait_for([&] {
                          json s = schedule("report");
                          return s.is_object() && !s["recent"].empty();
                        }),
                        get("/api/schedules/report").body);
  json run = schedule("report")["recent"][0];
  BOOST_TEST(run["session"] == "report-" + kDayCompact + "-040000");
  BOOST_TEST(run["outcome"] == "completed");
  BOOST_TEST(run["trigger"] == "schedule");
  // The sessions list follows the log by polling it: it may show the run a poll later.
  BOOST_TEST(reaches("report-" + kDayCompact + "-040000", "completed", 10));
  auto fired = stream("report", "schedule.fired");
  BOOST_REQUIRE(fired.size() == 1u);
  BOOST_TEST(fired[0]["data"]["nominal_us"].get<int64_t>() == utc_us(kYear, kMonth, kDayOfMonth, 4, 0));
  BOOST_TEST(fired[0]["data"]["session"] == "report-" + kDayCompact + "-040000");
  BOOST_TEST(stream("report", "schedule.run_ended").size() == 1u);
  // The spec's log lines (§14.3), their fields as JSON members too.
  BOOST_TEST(contains(logs(), "cron_start jobId=report sessionId=report-" + kDayCompact + "-040000"));
  BOOST_TEST(contains(logs(), "cron_end jobId=report sessionId=report-" + kDayCompact + "-040000 status=completed"));
  bool start_line = false, end_line = false;
  std::istringstream lines(logs());
  for (std::string text; std::getline(lines, text);) {
    json line = json::parse(text, nullptr, false);
    if (!line.is_object()) continue;
    if (line.value("event", "") == "cron_start" && line.value("jobId", "") == "report" &&
        line.value("sessionId", "") == "report-" + kDayCompact + "-040000" && line.value("schedule", "") == "0 4 * * *") {
      start_line = true;
    }
    if (line.value("event", "") == "cron_end" && line.value("status", "") == "completed" &&
        line.contains("durationMs") && line["durationMs"].is_number()) {
      end_line = true;
    }
  }
  BOOST_TEST(start_line);
  BOOST_TEST(end_line);
  // verify --all checks the schedule's stream as well as the session.
  kill_server(SIGTERM);
  std::string out;
  BOOST_TEST(cli("verify --all", &out) == 0, out);
  BOOST_TEST(contains(out, "schedule:report"), out);
}

BOOST_AUTO_TEST_CASE(fires_missed_while_the_host_was_down_follow_the_catchup_window) {
  if (!have_faketime()) {
    BOOST_TEST_MESSAGE("skipped: faketime is not installed");
    return;
  }
  start_server(kQuick, "", "serve.out", at(kDay + " 03:00:30"));
  BOOST_REQUIRE(post("/api/schedules", {{"name", "cu"}, {"cron", "*/10 * * * *"}, {"task", "t"}, {"catchup", "25m"}})
                    .status == 200);
  kill_server(SIGTERM);
  // The next start is an hour later: 03:10, 03:20, 03:30 are older than the
  // window; 03:40 runs late; 03:50 and 04:00 overlap it.
  std::string log = start_server(kQuick, "", "serve2.out", at(kDay + " 04:00:05"));
  BOOST_REQUIRE_MESSAGE(wait_for([&] { return status_of("cu-" + kDayCompact + "-034000") == "completed"; }), slurp(log));
  auto skipped = stream("cu", "schedule.skipped");
  BOOST_REQUIRE_EQUAL(skipped.size(), 2u);
  BOOST_TEST(skipped[0]["data"]["reason"] == "catchup_window");
  BOOST_TEST(skipped[0]["data"]["count"] == 3);
  BOOST_TEST(skipped[0]["data"]["nominal_us"].get<int64_t>() == utc_us(kYear, kMonth, kDayOfMonth, 3, 10));
  BOOST_TEST(skipped[0]["data"]["last_nominal_us"].get<int64_t>() == utc_us(kYear, kMonth, kDayOfMonth, 3, 30));
  BOOST_TEST(skipped[1]["data"]["reason"] == "overlap");
  BOOST_TEST(skipped[1]["data"]["count"] == 2);
  auto fired = stream("cu", "schedule.fired");
  BOOST_REQUIRE_EQUAL(fired.size(), 1u);
  BOOST_TEST(fired[0]["data"]["trigger"] == "catchup");
  BOOST_TEST(fired[0]["data"]["session"] == "cu-" + kDayCompact + "-034000");
}

BOOST_AUTO_TEST_CASE(a_host_killed_between_a_fire_and_its_session_starts_it_once_at_its_next_start) {
  if (!have_faketime()) {
    BOOST_TEST_MESSAGE("skipped: faketime is not installed");
    return;
  }
  std::string plan = file("crash.json", R"({"faults": [{"point": "schedule.fired", "action": "crash"}]})");
  std::string first = start_server(kQuick, "--faults '" + plan + "'", "serve.out", at(kDay + " 03:59:45"));
  BOOST_REQUIRE(post("/api/schedules", {{"name", "once"}, {"cron", "0 4 * * *"}, {"task", "t"}}).status == 200);
  BOOST_REQUIRE_MESSAGE(wait_for([&] { return gone(server); }, 20), slurp(first));
  server = 0;
  // The fire is durable; its session never started.
  BOOST_REQUIRE_EQUAL(stream("once", "schedule.fired").size(), 1u);
  BOOST_TEST(events("once-" + kDayCompact + "-040000").empty());
  std::string log = start_server(kQuick, "", "serve2.out", at(kDay + " 04:00:40"));
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "schedule once: starting once-" + kDayCompact + "-040000"); }), slurp(log));
  BOOST_REQUIRE(wait_for([&] { return status_of("once-" + kDayCompact + "-040000") == "completed"; }));
  BOOST_REQUIRE(wait_for([&] { return stream("once", "schedule.run_ended").size() == 1u; }));
  // One fire, one session, one run end for that nominal time.
  BOOST_TEST(stream("once", "schedule.fired").size() == 1u);
  BOOST_TEST(of_type("once-" + kDayCompact + "-040000", "session.started").size() == 1u);
  kill_server(SIGTERM);
  // And a third start does nothing more for it.
  start_server(kQuick, "", "serve3.out", at(kDay + " 04:02:00"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  BOOST_TEST(stream("once", "schedule.fired").size() == 1u);
  BOOST_TEST(of_type("once-" + kDayCompact + "-040000", "session.started").size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_host_killed_while_a_scheduled_run_goes_resumes_it_and_ends_the_run_once) {
  if (!have_faketime()) {
    BOOST_TEST_MESSAGE("skipped: faketime is not installed");
    return;
  }
  start_server(kSlow, "", "serve.out", at(kDay + " 03:59:45"));
  BOOST_REQUIRE(post("/api/schedules", {{"name", "slow"}, {"cron", "0 4 * * *"}, {"task", "t"}}).status == 200);
  BOOST_REQUIRE(wait_for([&] { return status_of("slow-" + kDayCompact + "-040000") == "running"; }));
  kill_server(SIGKILL);
  std::string log = start_server(kSlow, "", "serve2.out", at(kDay + " 04:00:30"));
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "resumed slow-" + kDayCompact + "-040000 (crashed)"); }), slurp(log));
  BOOST_REQUIRE(wait_for([&] { return stream("slow", "schedule.run_ended").size() == 1u; }));
  BOOST_TEST(stream("slow", "schedule.run_ended")[0]["data"]["outcome"] == "completed");
  BOOST_TEST(stream("slow", "schedule.fired").size() == 1u);
  // SIGTERM while a run goes: it is stopped (resumable), not ended; the next start goes on with it.
  BOOST_REQUIRE(post("/api/schedules/slow/trigger", json::object()).status == 200);
  std::string id = schedule("slow")["running"][0]["session"];
  std::string seen;
  BOOST_REQUIRE_MESSAGE(wait_for([&] { return (seen = status_of(id)) == "running"; }),
                        id + " was last seen as '" + seen + "'; the host's output:\n" + slurp(log));
  kill_server(SIGTERM);
  BOOST_TEST(stream("slow", "schedule.run_ended").size() == 1u);
  start_server(kSlow, "", "serve3.out", at(kDay + " 04:01:30"));
  BOOST_REQUIRE(wait_for([&] { return stream("slow", "schedule.run_ended").size() == 2u; }));
  BOOST_TEST(stream("slow", "schedule.run_ended")[1]["data"]["outcome"] == "completed");
  BOOST_TEST(stream("slow", "schedule.run_ended")[1]["data"]["session"] == id);
}

BOOST_AUTO_TEST_CASE(failed_runs_in_a_row_pause_the_schedule) {
  start_server(kFailing);
  BOOST_REQUIRE(post("/api/schedules", {{"name", "flaky"},
                                        {"cron", "0 0 1 1 *"},
                                        {"task", "t"},
                                        {"overlap", "allow"},
                                        {"pause_after_failures", 2}})
                    .status == 200);
  for (int i = 1; i <= 2; ++i) {
    Reply t = post("/api/schedules/flaky/trigger", json::object());
    BOOST_REQUIRE_MESSAGE(t.status == 200, t.body);
    BOOST_REQUIRE(wait_for([&] { return schedule("flaky")["consecutive_failures"] == i; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a trigger's id is to the second
  }
  BOOST_REQUIRE(wait_for([&] { return schedule("flaky")["paused"] == true; }));
  BOOST_TEST(contains(schedule("flaky")["pause_reason"].get<std::string>(), "2 runs in a row failed"));
  BOOST_TEST(stream("flaky", "schedule.paused")[0]["data"]["source"] == "schedule");
  BOOST_TEST(contains(logs(), "cron_error jobId=flaky"));
  // Resumed, the count starts over.
  BOOST_REQUIRE(post("/api/schedules/flaky/resume", json::object()).status == 200);
  BOOST_TEST(schedule("flaky")["consecutive_failures"] == 0);
  BOOST_TEST(schedule("flaky")["paused"] == false);
}

BOOST_AUTO_TEST_CASE(bad_definitions_are_refused_naming_the_field_and_write_nothing) {
  start_server(kQuick);
  auto refused = [&](const json& body, int status, const std::string& part) {
    Reply r = post("/api/schedules", body);
    BOOST_TEST(r.status == status, body.dump() + " -> " + r.body);
    BOOST_TEST(contains(r.message(), part), r.message());
  };
  refused({{"name", "x"}, {"cron", "0 24 * * *"}, {"task", "t"}}, 400, "cron: the cron expression's hour field '24'");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"tz", "Mars/Base"}}, 400, "tz: the time zone 'Mars/Base'");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"tz", "../../etc/passwd"}}, 400, "is not a zone name");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"colour", "red"}}, 400, "unknown field \"colour\"");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"catchup", "5s"}}, 400, "at least 10s");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"overlap", "queue"}}, 400, "overlap: must be skip");
  refused({{"name", "x"}, {"cron", "0 0 30 2 *"}, {"task", "t"}}, 400, "never fires");
  refused({{"name", "X Y"}, {"cron", "@daily"}, {"task", "t"}}, 400, "the schedule name 'X Y'");
  refused({{"name", "x"}, {"cron", "@daily"}}, 400, "task: is required");
  refused({{"name", "x"}, {"cron", "@daily"}, {"task", "t"}, {"session", {{"workspace", "/etc"}}}}, 400,
          "session.workspace");
  BOOST_TEST(get("/api/schedules").j["data"]["schedules"].empty());
  BOOST_TEST(events("schedule:x").empty());
  BOOST_REQUIRE(post("/api/schedules", {{"name", "x"}, {"cron", "@daily"}, {"task", "t"}}).status == 200);
  refused({{"name", "x"}, {"cron", "@hourly"}, {"task", "t"}}, 409, "exists already");
  BOOST_TEST(post("/api/schedules/nope/pause", json::object()).status == 404);
  BOOST_TEST(post("/api/schedules/x/explode", json::object()).status == 404);
  BOOST_TEST(post("/api/schedules/x/pause", {{"why", "r"}}).status == 400);
  BOOST_TEST(post("/api/schedules/x/backfill", {{"from", "yesterday"}, {"to", "2026-11-27"}}).status == 400);
  BOOST_TEST(events("schedule:x").size() == 1u);
  // A session id may not take a schedule's stream.
  Reply clash = post("/api/sessions", {{"task", "t"}, {"id", "schedule:x"}});
  BOOST_TEST(clash.status == 400, clash.body);
  // A read-only server of the same home lists schedules and changes none.
  ServeHost second;
  second.home = home;
  second.start_server(kQuick, "", "serve2.out");
  BOOST_TEST(second.get("/api/status").j["data"]["mode"] != "host");
  Reply listed = second.get("/api/schedules");
  BOOST_REQUIRE_EQUAL(listed.j["data"]["schedules"].size(), 1u);
  BOOST_TEST(listed.j["data"]["schedules"][0]["name"] == "x");
  BOOST_TEST(second.post("/api/schedules/x/pause", json::object()).status == 405);
}

BOOST_AUTO_TEST_CASE(config_json_defines_changes_and_removes_its_schedules) {
  std::ofstream(home + "/config.json") << R"({"schedules": {"nightly": {"cron": "0 3 * * *", "task": "sum up"}}})";
  std::string log = start_server(kQuick);
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "schedule nightly from the config: 0 3 * * *"); }), slurp(log));
  BOOST_TEST(schedule("nightly")["source"] == "config");
  kill_server(SIGTERM);
  log = start_server(kQuick, "", "serve2.out");  // unchanged: nothing written
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "1 schedule running"); }), slurp(log));
  BOOST_TEST(!contains(slurp(log), "nightly"), slurp(log));
  BOOST_TEST(stream("nightly", "schedule.defined").size() == 1u);
  kill_server(SIGTERM);
  std::ofstream(home + "/config.json") << R"({"schedules": {"nightly": {"cron": "0 5 * * *", "task": "sum up"}}})";
  log = start_server(kQuick, "", "serve3.out");
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "schedule nightly changed by the config: 0 5 * * *"); }), slurp(log));
  kill_server(SIGTERM);
  std::ofstream(home + "/config.json") << R"({"schedules": {}})";
  log = start_server(kQuick, "", "serve4.out");
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "schedule nightly removed: the config no longer has it"); }), slurp(log));
  BOOST_TEST(get("/api/schedules/nightly").status == 404);
  kill_server(SIGTERM);
  // A config schedule that does not check out stops the start, named.
  std::ofstream(home + "/config.json") << R"({"schedules": {"bad": {"cron": "61 * * * *", "task": "t"}}})";
  std::string out = dir.sub("bad.out");
  pid_t pid = spawn("serve --port 0 --scenario '" + file("s.json", kQuick) + "'", out);
  BOOST_REQUIRE(wait_for([&] { return gone(pid); }, 20));
  BOOST_TEST(contains(slurp(out), "config.json: schedules.bad.cron: the cron expression's minute field"), slurp(out));
}

BOOST_AUTO_TEST_CASE(the_cli_works_on_the_log_alone_and_through_a_running_server) {
  std::string out;
  BOOST_TEST(cli("schedule add daily --cron '0 6 * * *' --task 'morning report' --tz Europe/Berlin", &out) == 0, out);
  BOOST_TEST(contains(out, "schedule daily defined"), out);
  BOOST_TEST(contains(out, "no carapace serve hosts this home"), out);
  BOOST_TEST(cli("schedule add daily --cron '0 6 * * *' --task x", &out) == 1, out);
  BOOST_TEST(contains(out, "--replace"), out);
  BOOST_TEST(cli("schedule add bad --cron '* * *' --task x", &out) == 2, out);
  BOOST_TEST(contains(out, "--cron: the cron expression has 3 fields"), out);
  BOOST_TEST(cli("schedule trigger daily", &out) == 1, out);
  BOOST_TEST(contains(out, "serve` (with a provider or --scenario), then run this again"), out);
  BOOST_TEST(cli("schedule list --json", &out) == 0, out);
  json listed = json::parse(out);
  BOOST_TEST(listed["data"]["schedules"][0]["tz"] == "Europe/Berlin");
  BOOST_TEST(contains(listed["data"]["schedules"][0]["next_local"].get<std::string>(), " 06:00 +01:00"));
  // With a server hosting the home, the same commands go through its API.
  std::string log = start_server(kQuick);
  BOOST_TEST(wait_for([&] { return contains(slurp(log), "1 schedule running"); }), slurp(log));
  BOOST_TEST(cli("schedule trigger daily", &out) == 0, out);
  BOOST_TEST(contains(out, "schedule daily triggered: session daily-"), out);
  BOOST_REQUIRE(wait_for([&] { return !schedule("daily")["recent"].empty(); }));
  BOOST_TEST(cli("schedule pause daily --reason 'holidays'", &out) == 0, out);
  BOOST_TEST(schedule("daily")["paused"] == true);
  BOOST_TEST(cli("schedule show daily", &out) == 0, out);
  BOOST_TEST(contains(out, "paused: holidays"), out);
  BOOST_TEST(contains(out, "completed daily-"), out);
  BOOST_TEST(cli("schedule rm daily", &out) == 0, out);
  BOOST_TEST(get("/api/schedules").j["data"]["schedules"].empty());
}

BOOST_AUTO_TEST_SUITE_END()
