// The planner and the schedule fold: what is due, skipped, caught up,
// buffered and paused, at any clock (schedule/planner.h).
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <vector>

#include "schedule/planner.h"
#include "schedule/schedule_spec.h"
#include "tests/support/printing.h"

using namespace carapace;
using namespace carapace::schedule;

namespace {

constexpr int64_t kMin = 60'000'000;

int64_t at(const std::string& rfc3339) {
  int64_t us = 0;
  CHECK_OK(parse_time(rfc3339, "time", &us));
  return us;
}

// A schedule's stream, written the way the runner writes it.
struct Stream {
  ScheduleState state;
  CronExpression cron;
  TimeZone zone;

  Stream(const std::string& cron_text, const std::string& extra_json, int64_t defined_at) {
    nlohmann::json j = nlohmann::json::parse(extra_json);
    j["cron"] = cron_text;
    j["task"] = "report";
    ScheduleDefined d;
    CHECK_OK(definition_from_json("nightly", j, "test", defined_at, &d));
    CHECK_OK(CronExpression::parse(d.cron, &cron));
    CHECK_OK(TimeZone::load(d.tz, &zone));
    state.name = "nightly";
    append({d}, defined_at);
  }

  void append(std::vector<EventBody> bodies, int64_t now) {
    for (auto& b : bodies) {
      Event e{.seq = state.last_seq + 1, .ts_us = now, .body = std::move(b)};
      CHECK_OK(apply_schedule_event(state, e));
    }
  }

  // Plans at `now` and records what it said.
  Plan tick(int64_t now) {
    Plan p = plan_due(state, cron, zone, now);
    append(p.events, now);
    return p;
  }

  void end(const std::string& session, const std::string& outcome, int64_t now) {
    append({ScheduleRunEnded{.session = session, .outcome = outcome}}, now);
  }
};

std::vector<std::string> kinds(const Plan& p) {
  std::vector<std::string> out;
  for (const auto& b : p.events) {
    if (const auto* f = std::get_if<ScheduleFired>(&b)) out.push_back("fired " + f->trigger + " " + f->session);
    if (const auto* k = std::get_if<ScheduleSkipped>(&b)) {
      out.push_back("skipped " + k->reason + " x" + std::to_string(k->count));
    }
    if (std::get_if<SchedulePaused>(&b)) out.push_back("paused");
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(planner)

BOOST_AUTO_TEST_CASE(a_due_time_fires_once_with_an_id_from_the_schedule_and_the_time) {
  Stream s("*/5 * * * *", "{}", at("2026-11-27T03:01:00Z"));
  Plan early = s.tick(at("2026-11-27T03:04:59Z"));
  BOOST_TEST(early.events.empty());
  BOOST_TEST(*early.wake_at_us == at("2026-11-27T03:05:00Z"));
  Plan p = s.tick(at("2026-11-27T03:05:00.2Z"));
  BOOST_TEST(kinds(p) == (V{"fired schedule nightly-20261127-030500"}));
  // The same clock again: nothing more (the due time is handled).
  BOOST_TEST(s.tick(at("2026-11-27T03:05:01Z")).events.empty());
  BOOST_TEST(s.state.open.size() == 1u);
}

BOOST_AUTO_TEST_CASE(overlap_skip_skips_while_a_run_goes_and_counts_in_one_event) {
  Stream s("* * * * *", "{}", at("2026-11-27T03:00:30Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:01:00Z"))) == (V{"fired schedule nightly-20261127-030100"}));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:04:00Z"))) == (V{"skipped overlap x3"}));
  s.end("nightly-20261127-030100", "completed", at("2026-11-27T03:04:10Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:05:00Z"))) == (V{"fired schedule nightly-20261127-030500"}));
  BOOST_TEST(s.state.skipped == 3u);
}

BOOST_AUTO_TEST_CASE(buffer_one_defers_one_due_time_to_the_end_of_the_run) {
  Stream s("* * * * *", R"({"overlap": "buffer_one"})", at("2026-11-27T03:00:30Z"));
  s.tick(at("2026-11-27T03:01:00Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:03:00Z"))) == (V{"skipped buffered x1", "skipped overlap x1"}));
  BOOST_TEST(s.state.buffered_nominal_us == at("2026-11-27T03:02:00Z"));
  s.end("nightly-20261127-030100", "completed", at("2026-11-27T03:03:20Z"));
  Plan p = s.tick(at("2026-11-27T03:03:21Z"));
  BOOST_TEST(kinds(p) == (V{"fired buffered nightly-20261127-030200"}));
  BOOST_TEST(s.state.buffered_nominal_us == 0);
}

BOOST_AUTO_TEST_CASE(allow_fires_every_due_time) {
  Stream s("* * * * *", R"({"overlap": "allow"})", at("2026-11-27T03:00:30Z"));
  s.tick(at("2026-11-27T03:01:00Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:02:00Z"))) == (V{"fired schedule nightly-20261127-030200"}));
  BOOST_TEST(s.state.open.size() == 2u);
}

BOOST_AUTO_TEST_CASE(fires_missed_while_down_run_within_the_catchup_window_and_skip_past_it) {
  // Every 10 minutes, a 25-minute catch-up window; the host was down from 03:01 to 04:00.
  Stream s("*/10 * * * *", R"({"catchup": "25m"})", at("2026-11-27T03:01:00Z"));
  Plan p = s.tick(at("2026-11-27T04:00:05Z"));
  // 03:10, 03:20, 03:30 are older than 25 minutes: skipped. 03:40 catches up
  // (more than 10 s late); 03:50 overlaps it.
  BOOST_TEST(kinds(p) == (V{"skipped catchup_window x3", "fired catchup nightly-20261127-034000", "skipped overlap x2"}));
  // 03:50, and 04:00 (5 s ago), overlap the catch-up run.
  BOOST_TEST(s.state.handled_through_us == at("2026-11-27T04:00:00Z"));
}

BOOST_AUTO_TEST_CASE(jitter_is_deterministic_bounded_and_delays_the_fire) {
  Stream s("0 * * * *", R"({"jitter": "10m"})", at("2026-11-27T03:00:30Z"));
  const uint64_t j = jitter_for("nightly", at("2026-11-27T04:00:00Z"), 600'000);
  BOOST_TEST(j == jitter_for("nightly", at("2026-11-27T04:00:00Z"), 600'000));
  BOOST_TEST(j <= 600'000u);
  Plan early = s.tick(at("2026-11-27T04:00:00Z"));
  if (j > 0) {
    BOOST_TEST(early.events.empty());
    BOOST_TEST(*early.wake_at_us == at("2026-11-27T04:00:00Z") + static_cast<int64_t>(j) * 1000);
  }
  Plan p = s.tick(at("2026-11-27T04:00:00Z") + static_cast<int64_t>(j) * 1000);
  for (auto& b : p.events) early.events.push_back(b);
  BOOST_TEST(kinds(early) == (V{"fired schedule nightly-20261127-040000"}));
  // Different hours get different delays (not all the same).
  std::set<uint64_t> seen;
  for (int h = 0; h < 24; ++h) seen.insert(jitter_for("nightly", at("2026-11-27T00:00:00Z") + h * 60 * kMin, 600'000));
  BOOST_TEST(seen.size() > 12u);
}

BOOST_AUTO_TEST_CASE(it_pauses_itself_after_n_failures_in_a_row_and_resume_looks_forward) {
  Stream s("* * * * *", R"({"pause_after_failures": 2})", at("2026-11-27T03:00:30Z"));
  s.tick(at("2026-11-27T03:01:00Z"));
  s.end("nightly-20261127-030100", "failed", at("2026-11-27T03:01:30Z"));
  s.tick(at("2026-11-27T03:02:00Z"));
  s.end("nightly-20261127-030200", "failed", at("2026-11-27T03:02:30Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:03:00Z"))) == (V{"paused"}));
  BOOST_TEST(s.state.paused);
  BOOST_TEST(s.tick(at("2026-11-27T03:30:00Z")).events.empty());
  s.append({ScheduleResumed{.source = "cli"}}, at("2026-11-27T03:30:10Z"));
  BOOST_TEST(s.state.consecutive_failures == 0u);
  // Nothing from the paused half hour; 03:31 is the next.
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:31:00Z"))) == (V{"fired schedule nightly-20261127-033100"}));
}

BOOST_AUTO_TEST_CASE(a_success_resets_the_failure_count) {
  Stream s("* * * * *", R"({"pause_after_failures": 2})", at("2026-11-27T03:00:30Z"));
  s.tick(at("2026-11-27T03:01:00Z"));
  s.end("nightly-20261127-030100", "failed", at("2026-11-27T03:01:30Z"));
  s.tick(at("2026-11-27T03:02:00Z"));
  s.end("nightly-20261127-030200", "completed", at("2026-11-27T03:02:30Z"));
  s.tick(at("2026-11-27T03:03:00Z"));
  s.end("nightly-20261127-030300", "failed", at("2026-11-27T03:03:30Z"));
  BOOST_TEST(kinds(s.tick(at("2026-11-27T03:04:00Z"))) == (V{"fired schedule nightly-20261127-030400"}));
}

BOOST_AUTO_TEST_CASE(a_trigger_and_a_backfill_follow_their_rules) {
  Stream s("0 * * * *", "{}", at("2026-11-27T00:30:00Z"));
  ScheduleFired f;
  CHECK_OK(plan_trigger(s.state, at("2026-11-27T03:15:07.5Z"), "me", &f));
  BOOST_TEST(f.session == "nightly-20261127-031507-trigger");
  s.append({f}, at("2026-11-27T03:15:07.5Z"));
  BOOST_TEST(plan_trigger(s.state, at("2026-11-27T03:16:00Z"), "me", &f).is_busy());
  Plan b;
  auto exists = [](const std::string& id) { return id == "nightly-20261127-020000"; };
  CHECK_OK(plan_backfill(s.state, s.cron, s.zone, at("2026-11-27T01:00:00Z"), at("2026-11-27T03:00:00Z"),
                         at("2026-11-27T03:16:00Z"), "me", exists, 10, &b));
  BOOST_TEST(kinds(b) == (V{"fired backfill nightly-20261127-010000", "skipped exists x1",
                            "fired backfill nightly-20261127-030000"}));
  BOOST_TEST(plan_backfill(s.state, s.cron, s.zone, at("2026-11-20T00:00:00Z"), at("2026-11-27T00:00:00Z"),
                           at("2026-11-27T03:16:00Z"), "me", exists, 10, &b)
                 .message()
                 .find("more than 10 due times") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_fold_refuses_what_does_not_belong) {
  ScheduleState s;
  s.name = "nightly";
  Status st = apply_schedule_event(s, Event{.seq = 1, .body = ScheduleFired{.session = "x"}});
  BOOST_TEST(st.message().find("comes before the schedule's schedule.defined") != std::string::npos);
  Stream ok("* * * * *", "{}", at("2026-11-27T03:00:30Z"));
  st = apply_schedule_event(ok.state, Event{.seq = 2, .body = UserMessage{}});
  BOOST_TEST(st.message().find("a session's event in a schedule's stream") != std::string::npos);
  st = apply_schedule_event(ok.state, Event{.seq = 2, .body = ScheduleRunEnded{.session = "nope"}});
  BOOST_TEST(st.message().find("which is not open") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(definitions_are_checked_field_by_field) {
  ScheduleDefined d;
  auto err = [&](const std::string& json) {
    Status s = definition_from_json("n", nlohmann::json::parse(json), "schedules.n", at("2026-11-27T00:00:00Z"), &d);
    BOOST_REQUIRE(!s.ok());
    return s.message();
  };
  BOOST_TEST(err(R"({"task": "x"})") == "schedules.n.cron: is required");
  BOOST_TEST(err(R"({"cron": "0 25 * * *", "task": "x"})").find("schedules.n.cron: the cron expression's hour field") == 0u);
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "tz": "Nowhere/City"})").find("schedules.n.tz: the time zone") == 0u);
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "overlap": "queue"})").find("schedules.n.overlap: must be skip") == 0u);
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "jitter": "soon"})").find("schedules.n.jitter: must be a duration") == 0u);
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "session": {"model": 3}})") == "schedules.n.session.model: must be a string");
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "session": {"workspace": "../x"}})").find("session.workspace") != std::string::npos);
  BOOST_TEST(err(R"({"cron": "@daily", "task": "x", "color": "red"})").find("unknown field \"color\"") != std::string::npos);
  CHECK_OK(definition_from_json("n", nlohmann::json::parse(R"({"cron": "@daily", "task": "x", "overlap": "buffer-one", "tz": "UTC"})"),
                                "s", at("2026-11-27T00:00:00Z"), &d));
  BOOST_TEST(d.overlap == "buffer_one");
  BOOST_TEST(d.tz == "");
  BOOST_TEST(d.catchup_ms == kDefaultCatchupMs);
}

BOOST_AUTO_TEST_SUITE_END()
