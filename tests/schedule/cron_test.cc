// Cron expressions: the grammar, the errors that name the field, Vixie's
// day rule, and local time across DST changes (schedule/cron.h). The
// differential test against npm's cron-parser is cron_differential_test.cc.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "schedule/cron.h"
#include "tests/support/printing.h"

using namespace carapace;
using namespace carapace::schedule;

namespace {

int64_t at(const std::string& rfc3339) {
  int64_t us = 0;
  CHECK_OK(parse_time(rfc3339, "time", &us));
  return us;
}

// The next `n` fires after `start`, in UTC text.
std::vector<std::string> fires(const std::string& expr, const std::string& start, int n, const std::string& tz = "") {
  CronExpression e;
  CHECK_OK(CronExpression::parse(expr, &e));
  TimeZone zone;
  CHECK_OK(TimeZone::load(tz, &zone));
  std::vector<std::string> out;
  int64_t t = at(start);
  for (int i = 0; i < n; ++i) {
    auto next = e.next_after(t, zone);
    if (!next) break;
    out.push_back(utc_text(*next));
    t = *next;
  }
  return out;
}

std::string error_of(const std::string& expr) {
  CronExpression e;
  Status s = CronExpression::parse(expr, &e);
  BOOST_REQUIRE_MESSAGE(!s.ok(), expr + " parsed");
  BOOST_CHECK(s.is_invalid_argument());
  return s.message();
}

using V = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(cron)

BOOST_AUTO_TEST_CASE(steps_ranges_lists_and_names) {
  BOOST_TEST(fires("*/15 * * * *", "2026-01-01T00:07:00Z", 3) ==
             (V{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z"}));
  BOOST_TEST(fires("5/20 1-2 * * *", "2026-01-01T00:00:00Z", 4) ==
             (V{"2026-01-01T01:05:00Z", "2026-01-01T01:25:00Z", "2026-01-01T01:45:00Z", "2026-01-01T02:05:00Z"}));
  BOOST_TEST(fires("0 9 * * mon-fri", "2026-01-02T10:00:00Z", 2) ==  // Friday after 9: Monday, Tuesday
             (V{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"}));
  BOOST_TEST(fires("0 0 1 jan,JUL *", "2026-02-01T00:00:00Z", 2) ==
             (V{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}));
  BOOST_TEST(fires("0 0 * * 7", "2026-01-01T00:00:00Z", 1) == (V{"2026-01-04T00:00:00Z"}));  // 7 is Sunday
  BOOST_TEST(fires("0 0 * * 5-7", "2026-01-01T00:00:00Z", 4) ==
             (V{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}));
  // A stepped weekday runs to 7, Sunday: 5/1 is Friday, Saturday, Sunday.
  BOOST_TEST(fires("0 0 * * 5/1", "2026-01-01T00:00:00Z", 4) ==
             (V{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}));
  BOOST_TEST(fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 2) == (V{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}));
  BOOST_TEST(fires("0 12 ? * sun", "2026-01-01T00:00:00Z", 1) == (V{"2026-01-04T12:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(macros_stand_for_their_fields) {
  BOOST_TEST(fires("@hourly", "2026-01-01T00:00:00Z", 2) == (V{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}));
  BOOST_TEST(fires("@daily", "2026-01-01T00:00:00Z", 1) == (V{"2026-01-02T00:00:00Z"}));
  BOOST_TEST(fires("@midnight", "2026-01-01T00:00:00Z", 1) == (V{"2026-01-02T00:00:00Z"}));
  BOOST_TEST(fires("@weekly", "2026-01-01T00:00:00Z", 1) == (V{"2026-01-04T00:00:00Z"}));
  BOOST_TEST(fires("@monthly", "2026-01-01T00:00:00Z", 1) == (V{"2026-02-01T00:00:00Z"}));
  BOOST_TEST(fires("@yearly", "2026-01-01T00:00:00Z", 1) == (V{"2027-01-01T00:00:00Z"}));
  BOOST_TEST(fires("@annually", "2026-01-01T00:00:00Z", 1) == (V{"2027-01-01T00:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(both_day_fields_restricted_match_either_as_vixie_cron_does) {
  // The 13th and every Friday.
  BOOST_TEST(fires("0 0 13 * fri", "2026-02-01T00:00:00Z", 4) ==
             (V{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z"}));
  // A day field that starts with '*' (a step too) makes it "and": odd days that are Mondays.
  BOOST_TEST(fires("0 0 */2 * 1", "2026-01-01T00:00:00Z", 3) ==
             (V{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z"}));
  BOOST_TEST(fires("0 0 1-31/2 * 1", "2026-01-01T00:00:00Z", 3) ==
             (V{"2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(errors_name_the_field_and_what_is_wrong) {
  BOOST_TEST(error_of("0 24 * * *").find("hour field '24': 24 is out of 0-23") != std::string::npos);
  BOOST_TEST(error_of("60 * * * *").find("minute field") != std::string::npos);
  BOOST_TEST(error_of("* * 0 * *").find("day-of-month field '0': 0 is out of 1-31") != std::string::npos);
  BOOST_TEST(error_of("* * * 13 *").find("month field") != std::string::npos);
  BOOST_TEST(error_of("* * * * 8").find("day-of-week field") != std::string::npos);
  BOOST_TEST(error_of("* * * * moon").find("'moon' is not a value (days: 0-7 or sun-sat)") != std::string::npos);
  BOOST_TEST(error_of("*/0 * * * *").find("the step 0 is out of 1-60") != std::string::npos);
  BOOST_TEST(error_of("10-5 * * * *").find("runs backwards") != std::string::npos);
  BOOST_TEST(error_of("1,,2 * * * *").find("an empty item") != std::string::npos);
  BOOST_TEST(error_of("* * * *").find("has 4 fields; it needs 5") != std::string::npos);
  BOOST_TEST(error_of("0 0 * * * *").find("has 6 fields") != std::string::npos);
  BOOST_TEST(error_of("@reboot").find("names no time") != std::string::npos);
  BOOST_TEST(error_of("@often").find("is not a macro") != std::string::npos);
  BOOST_TEST(error_of("").find("has 0 fields") != std::string::npos);
  BOOST_TEST(error_of("*/x * * * *").find("the step 'x' is not a number") != std::string::npos);
  BOOST_TEST(error_of("1x * * * *").find("'1x' is not a number") != std::string::npos);
  BOOST_TEST(error_of(std::string(300, '*')).find("longer than 256") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_expression_that_never_fires_is_an_error) {
  CronExpression e;
  CHECK_OK(CronExpression::parse("0 0 30 2 *", &e));
  TimeZone utc;
  BOOST_TEST(!e.next_after(at("2026-01-01T00:00:00Z"), utc).has_value());
  Status s = e.check_fires(utc, at("2026-01-01T00:00:00Z"));
  BOOST_TEST(s.message().find("never fires") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_zones_are_refused_by_name_without_reading_files) {
  TimeZone z;
  BOOST_TEST(TimeZone::load("Mars/Olympus_Mons", &z).message().find("'Mars/Olympus_Mons' is not in this system") !=
             std::string::npos);
  BOOST_TEST(TimeZone::load("../../etc/passwd", &z).message().find("is not a zone name") != std::string::npos);
  BOOST_TEST(TimeZone::load("/etc/localtime", &z).message().find("is not a zone name") != std::string::npos);
  BOOST_TEST(TimeZone::load("Europe/Ber lin", &z).message().find("a character no zone name has") != std::string::npos);
  CHECK_OK(TimeZone::load("UTC", &z));
  CHECK_OK(TimeZone::load("Asia/Kolkata", &z));
  BOOST_TEST(fires("30 9 * * *", "2026-01-01T00:00:00Z", 1, "Asia/Kolkata") == (V{"2026-01-01T04:00:00Z"}));
}

// New York springs forward on 2026-03-08 at 02:00 (EST -5 -> EDT -4).
BOOST_AUTO_TEST_CASE(a_time_a_spring_forward_skips_fires_as_far_past_the_gap) {
  const std::string ny = "America/New_York";
  // 02:30 does not exist that day: it fires at 03:30 EDT (07:30Z), once.
  BOOST_TEST(fires("30 2 * * *", "2026-03-07T00:00:00Z", 3, ny) ==
             (V{"2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"}));
  // Every 30 minutes: 01:30 EST, then 03:00 EDT — nothing twice.
  BOOST_TEST(fires("*/30 * * * *", "2026-03-08T06:00:00Z", 4, ny) ==
             (V{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:00:00Z"}));
  // 03:00 exists that day and fires (cron-parser 5.4.0 misses it).
  BOOST_TEST(fires("0 3 * * *", "2026-03-08T05:45:00Z", 2, ny) == (V{"2026-03-08T07:00:00Z", "2026-03-09T07:00:00Z"}));
  // Santiago springs forward at midnight (2026-09-06 00:00 -> 01:00): midnight runs at 01:00.
  BOOST_TEST(fires("0 0 * * *", "2026-09-05T00:00:00Z", 3, "America/Santiago") ==
             (V{"2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}));
}

// New York falls back on 2026-11-01 at 02:00 EDT -> 01:00 EST: 01:xx happens twice.
BOOST_AUTO_TEST_CASE(the_repeated_hour_of_a_fall_back_runs_twice_only_for_every_hour) {
  const std::string ny = "America/New_York";
  BOOST_TEST(fires("30 1 * * *", "2026-10-31T00:00:00Z", 3, ny) ==
             (V{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
  BOOST_TEST(fires("0 * * * *", "2026-11-01T04:45:00Z", 4, ny) ==
             (V{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}));
  BOOST_TEST(fires("0 1-2 * * *", "2026-11-01T04:45:00Z", 3, ny) ==
             (V{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-02T06:00:00Z"}));
  // A fixed date in the repeated hour fires once, then next year.
  BOOST_TEST(fires("0 1 1 11 *", "2026-11-01T04:00:00Z", 2, ny) ==
             (V{"2026-11-01T05:00:00Z", "2027-11-01T05:00:00Z"}));
  // Europe/Berlin: 02:30 on the last Sunday of October comes twice; a daily job runs once.
  BOOST_TEST(fires("30 2 * * *", "2026-10-24T00:00:00Z", 3, "Europe/Berlin") ==
             (V{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
}

BOOST_AUTO_TEST_CASE(times_parse_as_rfc3339_or_a_date) {
  BOOST_TEST(at("2026-11-27") == at("2026-11-27T00:00:00Z"));
  BOOST_TEST(at("2026-11-27T04:15:00+01:00") == at("2026-11-27T03:15:00Z"));
  int64_t us = 0;
  BOOST_TEST(parse_time("yesterday", "--from", &us).message().find("--from 'yesterday' is not a time") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
