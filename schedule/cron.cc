#include "schedule/cron.h"

#include <absl/time/civil_time.h>
#include <absl/time/time.h>

#include <array>
#include <cctype>
#include <charconv>
#include <vector>

namespace carapace::schedule {

struct TimeZone::Impl {
  absl::TimeZone zone = absl::UTCTimeZone();
};

TimeZone::TimeZone() : name_("UTC"), impl_(std::make_unique<Impl>()) {}
TimeZone::~TimeZone() = default;
TimeZone::TimeZone(const TimeZone& other) : name_(other.name_), impl_(std::make_unique<Impl>(*other.impl_)) {}
TimeZone& TimeZone::operator=(const TimeZone& other) {
  if (this != &other) {
    name_ = other.name_;
    *impl_ = *other.impl_;
  }
  return *this;
}

Status TimeZone::load(std::string_view name, TimeZone* out) {
  if (name.empty() || name == "UTC") {
    *out = TimeZone();
    return Status();
  }
  auto bad = [&](const std::string& why) {
    return Status::invalid_argument("the time zone '" + std::string(name.substr(0, 64)) + "' " + why +
                                    "; use an IANA name such as Europe/Berlin or America/New_York, or UTC");
  };
  if (name.size() > 64) return bad("is longer than 64 characters");
  if (name.front() == '/' || name.find("..") != std::string_view::npos) return bad("is not a zone name");
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' || c == '+')) {
      return bad("has a character no zone name has");
    }
  }
  absl::TimeZone zone;
  if (!absl::LoadTimeZone(std::string(name), &zone)) return bad("is not in this system's time zone database");
  TimeZone loaded;
  loaded.name_ = std::string(name);
  loaded.impl_->zone = zone;
  *out = std::move(loaded);
  return Status();
}

std::string TimeZone::local_text(int64_t unix_us) const {
  absl::Time t = absl::FromUnixMicros(unix_us);
  return absl::FormatTime("%Y-%m-%d %H:%M %Ez", t, impl_->zone);
}

namespace {

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

struct FieldSpec {
  const char* name;
  int min;
  int max;
  bool month_names = false;
  bool day_names = false;
  bool question = false;  // '?' means '*'
};

constexpr std::array<FieldSpec, 5> kFields = {{{"minute", 0, 59},
                                               {"hour", 0, 23},
                                               {"day-of-month", 1, 31, false, false, true},
                                               {"month", 1, 12, true},
                                               {"day-of-week", 0, 7, false, true, true}}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status field_error(const FieldSpec& f, std::string_view text, const std::string& why) {
  return Status::invalid_argument("the cron expression's " + std::string(f.name) + " field '" +
                                  std::string(text.substr(0, 40)) + "': " + why);
}

// A value: a number, or a name where the field has names.
Status parse_value(const FieldSpec& f, std::string_view field_text, std::string_view s, int* out) {
  if (s.empty()) return field_error(f, field_text, "a value is missing");
  if (std::isdigit(static_cast<unsigned char>(s.front()))) {
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
      return field_error(f, field_text, "'" + std::string(s.substr(0, 12)) + "' is not a number");
    }
    if (v < f.min || v > f.max) {
      return field_error(f, field_text,
                         std::to_string(v) + " is out of " + std::to_string(f.min) + "-" + std::to_string(f.max));
    }
    *out = v;
    return Status();
  }
  std::string name = lower(s);
  if (f.month_names) {
    for (size_t i = 0; i < kMonthNames.size(); ++i) {
      if (name == kMonthNames[i]) {
        *out = static_cast<int>(i) + 1;
        return Status();
      }
    }
  }
  if (f.day_names) {
    for (size_t i = 0; i < kDayNames.size(); ++i) {
      if (name == kDayNames[i]) {
        *out = static_cast<int>(i);
        return Status();
      }
    }
  }
  std::string hint = f.month_names ? " (months: 1-12 or jan-dec)"
                     : f.day_names ? " (days: 0-7 or sun-sat)"
                                   : "";
  return field_error(f, field_text, "'" + std::string(s.substr(0, 12)) + "' is not a value" + hint);
}

// Sets the field's values in *bits (indexes min..max); *star when it starts with '*'.
Status parse_field(const FieldSpec& f, std::string_view text, std::vector<bool>* bits, bool* star) {
  bits->assign(static_cast<size_t>(f.max) + 1, false);
  *star = !text.empty() && (text.front() == '*' || (f.question && text.front() == '?'));
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.empty()) return field_error(f, text, "an empty item in the list");
    std::string_view range = item;
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      range = item.substr(0, slash);
      std::string_view st = item.substr(slash + 1);
      auto [end, ec] = std::from_chars(st.data(), st.data() + st.size(), step);
      if (st.empty() || ec != std::errc() || end != st.data() + st.size()) {
        return field_error(f, text, "the step '" + std::string(st.substr(0, 12)) + "' is not a number");
      }
      if (step < 1 || step > f.max - f.min + 1) {
        return field_error(f, text,
                           "the step " + std::to_string(step) + " is out of 1-" + std::to_string(f.max - f.min + 1));
      }
      stepped = true;
    }
    int lo = 0;
    int hi = 0;
    if (range == "*" || (f.question && range == "?")) {
      lo = f.min;
      hi = f.max;
      if (f.day_names) hi = 6;  // '*' in the day of week: 0-6 (7 is Sunday again)
    } else {
      size_t dash = range.find('-');
      if (dash == std::string_view::npos) {
        CARAPACE_RETURN_IF_ERROR(parse_value(f, text, range, &lo));
        hi = stepped ? f.max : lo;  // 5/15: 5 to the end (the day of week's 7 included: Sunday)
      } else {
        CARAPACE_RETURN_IF_ERROR(parse_value(f, text, range.substr(0, dash), &lo));
        CARAPACE_RETURN_IF_ERROR(parse_value(f, text, range.substr(dash + 1), &hi));
        if (lo > hi) {
          return field_error(f, text,
                             "the range " + std::string(range.substr(0, 12)) + " runs backwards (" +
                                 std::to_string(lo) + " > " + std::to_string(hi) + ")");
        }
      }
    }
    for (int v = lo; v <= hi; v += step) (*bits)[static_cast<size_t>(v)] = true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return Status();
}

std::string_view macro_fields(std::string_view macro) {
  std::string m = lower(macro);
  if (m == "@yearly" || m == "@annually") return "0 0 1 1 *";
  if (m == "@monthly") return "0 0 1 * *";
  if (m == "@weekly") return "0 0 * * 0";
  if (m == "@daily" || m == "@midnight") return "0 0 * * *";
  if (m == "@hourly") return "0 * * * *";
  return {};
}

}  // namespace

Status CronExpression::parse(std::string_view text, CronExpression* out) {
  if (text.size() > 256) return Status::invalid_argument("the cron expression is longer than 256 characters");
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) parts.push_back(text.substr(start, i - start));
  }
  CronExpression e;
  e.text_ = std::string(text);
  std::string fields;
  if (parts.size() == 1 && parts[0].front() == '@') {
    if (lower(parts[0]) == "@reboot") {
      return Status::invalid_argument("the cron expression @reboot names no time; a schedule fires at times");
    }
    std::string_view expanded = macro_fields(parts[0]);
    if (expanded.empty()) {
      return Status::invalid_argument("the cron expression '" + std::string(parts[0].substr(0, 24)) +
                                      "' is not a macro: @yearly, @annually, @monthly, @weekly, @daily, "
                                      "@midnight or @hourly");
    }
    fields = std::string(expanded);
    parts.clear();
    size_t p = 0;
    std::string_view fv = expanded;
    while (p < fv.size()) {
      size_t sp = fv.find(' ', p);
      parts.push_back(fv.substr(p, sp == std::string_view::npos ? std::string_view::npos : sp - p));
      if (sp == std::string_view::npos) break;
      p = sp + 1;
    }
  } else {
    if (parts.size() != 5) {
      return Status::invalid_argument(
          "the cron expression has " + std::to_string(parts.size()) +
          (parts.size() == 1 ? " field" : " fields") +
          "; it needs 5 (minute hour day-of-month month day-of-week, as in \"*/5 * * * *\") or a macro such as "
          "@hourly");
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k) fields += ' ';
      fields += parts[k];
    }
  }
  std::vector<bool> bits;
  bool star = false;
  for (size_t k = 0; k < 5; ++k) {
    CARAPACE_RETURN_IF_ERROR(parse_field(kFields[k], parts[k], &bits, &star));
    for (size_t v = 0; v < bits.size(); ++v) {
      if (!bits[v]) continue;
      switch (k) {
        case 0: e.minutes_.set(v); break;
        case 1: e.hours_.set(v); break;
        case 2: e.days_.set(v); break;
        case 3: e.months_.set(v); break;
        default: e.weekdays_.set(v % 7); break;
      }
    }
    if (k == 2) e.day_star_ = star;
    if (k == 4) e.weekday_star_ = star;
  }
  e.fields_ = std::move(fields);
  *out = std::move(e);
  return Status();
}

bool CronExpression::day_matches(int /*year*/, int month, int day, int weekday) const {
  if (!months_.test(static_cast<size_t>(month))) return false;
  bool dom = days_.test(static_cast<size_t>(day));
  bool dow = weekdays_.test(static_cast<size_t>(weekday));
  if (day_star_ || weekday_star_) return dom && dow;
  return dom || dow;
}

std::optional<int64_t> CronExpression::next_after(int64_t after_us, const TimeZone& zone) const {
  const absl::TimeZone& tz = zone.impl_->zone;
  const absl::Time after = absl::FromUnixMicros(after_us);
  const bool every_hour = hours_.all();
  // Local days from the one before `after`'s (a skipped time of the day
  // before can land after it) for 28 years: every weekday/date combination.
  absl::CivilDay day = absl::CivilDay(tz.At(after).cs) - 1;
  const absl::CivilDay last = day + 366 * 28 + 2;
  std::optional<absl::Time> best;
  std::optional<absl::CivilDay> best_day;
  for (; day <= last; ++day) {
    if (best_day && day > *best_day + 1) break;  // a later day fires later still
    const int weekday = static_cast<int>(absl::GetWeekday(day));  // Monday 0 .. Sunday 6
    const int cron_weekday = (weekday + 1) % 7;                     // Sunday 0 .. Saturday 6
    if (!day_matches(static_cast<int>(day.year()), day.month(), day.day(), cron_weekday)) continue;
    // Fires of one day only go out of order around a transition (hours at
    // most), so hours that end well before `after` are passed over, and the
    // search stops hours past the best fire found.
    bool done = false;
    for (int h = 0; h < 24 && !done; ++h) {
      if (!hours_.test(static_cast<size_t>(h))) continue;
      const absl::CivilSecond hour_start(day.year(), day.month(), day.day(), h, 0, 0);
      if (tz.At(hour_start).pre + absl::Hours(3) < after) continue;
      for (int m = 0; m < 60; ++m) {
        if (!minutes_.test(static_cast<size_t>(m))) continue;
        const auto info = tz.At(absl::CivilSecond(day.year(), day.month(), day.day(), h, m, 0));
        // UNIQUE: pre is the time; SKIPPED: pre lands as far past the gap;
        // REPEATED: pre is the first occurrence, post the second.
        auto consider = [&](absl::Time t) {
          if (t > after && (!best || t < *best)) {
            best = t;
            best_day = day;
          }
        };
        consider(info.pre);
        if (info.kind == absl::TimeZone::TimeInfo::REPEATED && every_hour) consider(info.post);
        if (best && info.pre > *best + absl::Hours(4)) {
          done = true;
          break;
        }
      }
    }
  }
  if (!best) return std::nullopt;
  return absl::ToUnixMicros(*best);
}

Status CronExpression::check_fires(const TimeZone& zone, int64_t from_us) const {
  if (next_after(from_us, zone)) return Status();
  return Status::invalid_argument("the cron expression '" + text_ +
                                  "' never fires (no such date in 28 years: check the day-of-month and month)");
}

std::string utc_text(int64_t unix_us) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(unix_us), absl::UTCTimeZone());
}

Status parse_time(std::string_view text, std::string_view what, int64_t* unix_us) {
  std::string s(text.substr(0, 64));
  absl::Time t;
  std::string err;
  if (absl::ParseTime("%Y-%m-%d", s, absl::UTCTimeZone(), &t, &err) ||
      absl::ParseTime("%Y-%m-%dT%H:%M%Ez", s, &t, &err) || absl::ParseTime("%Y-%m-%dT%H:%M:%E*S%Ez", s, &t, &err) ||
      absl::ParseTime("%Y-%m-%dT%H:%MZ", s, absl::UTCTimeZone(), &t, &err) ||
      absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", s, absl::UTCTimeZone(), &t, &err)) {
    *unix_us = absl::ToUnixMicros(t);
    return Status();
  }
  return Status::invalid_argument(std::string(what) + " '" + s +
                                  "' is not a time: use RFC 3339, as 2026-11-27T03:15:00Z or 2026-11-27");
}

}  // namespace carapace::schedule
