// Cron expressions: when a schedule fires (docs/schedules.md).
//
// Five fields, as Vixie cron (Debian's cron) reads them:
//
//   minute 0-59 | hour 0-23 | day of month 1-31 | month 1-12 or jan-dec | day of week 0-7 or sun-sat (0 and 7: Sunday)
//
// Each field is a list of items separated by commas; an item is `*`, a value,
// or a range `a-b`, optionally stepped (`*/15`, `1-30/2`, `5/15` = 5-59/15).
// Names and macros are case-insensitive; names may end ranges (`mon-fri`);
// `?` is `*` in the day fields. The macros @yearly (@annually), @monthly, @weekly, @daily
// (@midnight) and @hourly stand for their five fields.
//
// Days: when both day fields are restricted (neither starts with `*`), a day
// matches when either does (`0 0 1,15 * mon`: the 1st, the 15th and every
// Monday); when one starts with `*` (`*/2` too, as in Vixie cron), both must.
//
// Time zones: the fields are read as local time in the zone. A local time
// that a spring-forward gap skips fires as far after the gap's start as it
// was meant to be (02:30 in a 02:00->03:00 gap fires at 03:30); in the
// repeated hour of a fall-back, an expression whose hour field is every hour
// fires in both, any other only in the first.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace carapace::schedule {

// An IANA time zone from the system's tz database (Debian's tzdata).
class TimeZone {
 public:
  TimeZone();  // UTC
  ~TimeZone();
  TimeZone(const TimeZone&);
  TimeZone& operator=(const TimeZone&);

  // "" and "UTC" are UTC; otherwise a name like "Europe/Berlin". Errors name
  // the zone; a name with "..", a leading '/', or characters no zone name
  // has is refused without touching the file system.
  static Status load(std::string_view name, TimeZone* out);

  const std::string& name() const { return name_; }

  // The local wall-clock minute of `unix_us`, as yyyy-mm-dd hh:mm, with the offset ("+01:00").
  std::string local_text(int64_t unix_us) const;

 private:
  friend class CronExpression;
  struct Impl;
  std::string name_;
  std::unique_ptr<Impl> impl_;
};

class CronExpression {
 public:
  // Parses `text`. Errors name the field and what is wrong in it
  // ("the hour field: 24 is out of 0-23").
  static Status parse(std::string_view text, CronExpression* out);

  // The first fire strictly after `after_us` (microseconds since the Unix
  // epoch), on a whole minute; nullopt when there is none in the next 28 years
  // (an expression such as `0 0 30 2 *` never fires).
  std::optional<int64_t> next_after(int64_t after_us, const TimeZone& zone) const;

  const std::string& text() const { return text_; }
  // The five fields the text stands for (a macro's expansion).
  const std::string& fields() const { return fields_; }

  // Whether the expression fires at least once; invalid_argument otherwise.
  Status check_fires(const TimeZone& zone, int64_t from_us) const;

 private:
  bool day_matches(int year, int month, int day, int weekday) const;

  std::string text_;
  std::string fields_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1-31
  std::bitset<13> months_;   // 1-12
  std::bitset<7> weekdays_;  // 0 Sunday .. 6
  bool day_star_ = false;      // the day-of-month field starts with '*'
  bool weekday_star_ = false;  // the day-of-week field starts with '*'
};

// The UTC time of `unix_us` as 2026-11-27T03:15:00Z (seconds precision).
std::string utc_text(int64_t unix_us);

// Parses an RFC 3339 time ("2026-11-27T03:15:00Z", "2026-11-27T04:15:00+01:00",
// or a date "2026-11-27", midnight UTC) into microseconds; errors name `what`.
Status parse_time(std::string_view text, std::string_view what, int64_t* unix_us);

}  // namespace carapace::schedule
