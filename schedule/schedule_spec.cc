#include "schedule/schedule_spec.h"

#include <cctype>
#include <set>

#include "base/duration.h"

namespace carapace::schedule {

using nlohmann::json;

std::string duration_text(uint64_t ms) {
  if (ms == 0) return "0";
  if (ms % 86'400'000 == 0) return std::to_string(ms / 86'400'000) + "d";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

namespace {

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  Status text(const char* name, std::string* out, size_t limit, bool required = false) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) {
      return required ? error(name, "is required") : Status();
    }
    if (!it->is_string()) return error(name, "must be a string");
    const auto& s = it->get_ref<const std::string&>();
    if (required && s.empty()) return error(name, "must not be empty");
    if (s.size() > limit) return error(name, "is " + std::to_string(s.size()) + " bytes, over " + std::to_string(limit));
    *out = s;
    return Status();
  }

  Status number(const char* name, uint64_t* out, uint64_t most) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) return Status();
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return error(name, "must be a whole number from 0 to " + std::to_string(most));
    }
    uint64_t v = it->get<uint64_t>();
    if (v > most) return error(name, "must be a whole number from 0 to " + std::to_string(most));
    *out = v;
    return Status();
  }

  Status duration(const char* name, uint64_t* out, uint64_t most) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) return Status();
    uint64_t ms = 0;
    if (it->is_number_unsigned()) {
      ms = it->get<uint64_t>();
    } else if (!it->is_string() || !parse_duration_ms(it->get_ref<const std::string&>(), &ms)) {
      return error(name, "must be a duration such as \"90s\", \"30m\", \"24h\", \"7d\" (or milliseconds), got " +
                             it->dump().substr(0, 40));
    }
    if (ms > most) return error(name, "must be at most " + duration_text(most));
    *out = ms;
    return Status();
  }

  Status boolean(const char* name, bool* out) {
    known_.insert(name);
    auto it = j_.find(name);
    if (it == j_.end() || it->is_null()) return Status();
    if (!it->is_boolean()) return error(name, "must be true or false");
    *out = it->get<bool>();
    return Status();
  }

  const json* object(const char* name) {
    known_.insert(name);
    auto it = j_.find(name);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  Status no_other_fields() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (known_.count(it.key())) continue;
      std::string names;
      for (const auto& k : known_) names += (names.empty() ? "" : ", ") + k;
      return Status::invalid_argument(where_ + ": unknown field \"" + it.key().substr(0, 64) +
                                      "\": the fields are " + names);
    }
    return Status();
  }

  Status error(const std::string& name, const std::string& what) const {
    return Status::invalid_argument(where_ + "." + name + ": " + what);
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> known_;
};

}  // namespace

Status definition_from_json(std::string_view name, const json& j, std::string_view where, int64_t now_us,
                            ScheduleDefined* out) {
  const std::string at = std::string(where);
  if (!j.is_object()) return Status::invalid_argument(at + ": a schedule is a JSON object with \"cron\" and \"task\"");
  ScheduleDefined d;
  d.name = std::string(name);
  d.overlap = "skip";
  d.catchup_ms = kDefaultCatchupMs;
  Reader r(j, at);
  CARAPACE_RETURN_IF_ERROR(r.text("cron", &d.cron, 256, true));
  CARAPACE_RETURN_IF_ERROR(r.text("task", &d.task, kMaxTaskBytes, true));
  CARAPACE_RETURN_IF_ERROR(r.text("tz", &d.tz, 64));
  CARAPACE_RETURN_IF_ERROR(r.text("overlap", &d.overlap, 32));
  CARAPACE_RETURN_IF_ERROR(r.duration("catchup", &d.catchup_ms, 366ull * 86'400'000));
  if (d.catchup_ms < 10'000) {
    return r.error("catchup", "must be at least 10s: a fire always comes a little after its time");
  }
  CARAPACE_RETURN_IF_ERROR(r.duration("jitter", &d.jitter_ms, 86'400'000));
  CARAPACE_RETURN_IF_ERROR(r.number("pause_after_failures", &d.pause_after_failures, 1000));
  CARAPACE_RETURN_IF_ERROR(r.boolean("paused", &d.paused));
  json session = json::object();
  if (const json* s = r.object("session")) {
    if (!s->is_object()) return r.error("session", "must be an object");
    Reader sr(*s, at + ".session");
    std::string model, workspace, instructions;
    uint64_t max_turns = 0;
    CARAPACE_RETURN_IF_ERROR(sr.text("model", &model, 1024));
    CARAPACE_RETURN_IF_ERROR(sr.number("max_turns", &max_turns, 100'000));
    CARAPACE_RETURN_IF_ERROR(sr.text("workspace", &workspace, 512));
    CARAPACE_RETURN_IF_ERROR(sr.text("instructions", &instructions, kMaxTaskBytes));
    CARAPACE_RETURN_IF_ERROR(sr.no_other_fields());
    if (!workspace.empty() && (workspace.front() == '/' || workspace.find("..") != std::string::npos)) {
      return sr.error("workspace", "must be a relative path under the server's workspace root, without '..'");
    }
    if (!model.empty()) session["model"] = model;
    if (max_turns) session["max_turns"] = max_turns;
    if (!workspace.empty()) session["workspace"] = workspace;
    if (!instructions.empty()) session["instructions"] = instructions;
  }
  CARAPACE_RETURN_IF_ERROR(r.no_other_fields());
  if (d.tz == "UTC") d.tz.clear();
  if (d.overlap == "buffer-one") d.overlap = "buffer_one";
  if (d.overlap != "skip" && d.overlap != "buffer_one" && d.overlap != "allow") {
    return r.error("overlap", "must be skip, buffer_one or allow, got \"" + d.overlap.substr(0, 32) + "\"");
  }
  TimeZone zone;
  Status tz = TimeZone::load(d.tz, &zone);
  if (!tz.ok()) return r.error("tz", tz.message());
  CronExpression cron;
  Status c = CronExpression::parse(d.cron, &cron);
  if (!c.ok()) return r.error("cron", c.message());
  c = cron.check_fires(zone, now_us);
  if (!c.ok()) return r.error("cron", c.message());
  d.session = JsonText{session.dump()};
  *out = std::move(d);
  return Status();
}

json definition_to_json(const ScheduleDefined& d) {
  json j = {{"cron", d.cron},
            {"task", d.task},
            {"tz", d.tz.empty() ? "UTC" : d.tz},
            {"overlap", d.overlap},
            {"catchup", duration_text(d.catchup_ms)},
            {"jitter", duration_text(d.jitter_ms)},
            {"pause_after_failures", d.pause_after_failures}};
  json session = json::parse(d.session.text.empty() ? "{}" : d.session.text, nullptr, false);
  j["session"] = session.is_discarded() ? json::object() : session;
  return j;
}

bool same_definition(const ScheduleDefined& a, const ScheduleDefined& b) {
  return a.name == b.name && a.cron == b.cron && a.tz == b.tz && a.overlap == b.overlap &&
         a.catchup_ms == b.catchup_ms && a.jitter_ms == b.jitter_ms &&
         a.pause_after_failures == b.pause_after_failures && a.task == b.task && a.session == b.session;
}

}  // namespace carapace::schedule
