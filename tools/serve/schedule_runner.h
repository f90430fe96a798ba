// ScheduleRunner: runs the home's schedules inside `carapace serve`, the
// home's one writer (docs/schedules.md). A thread of its own wakes when a
// fire is due (and every second while runs are open): it asks the planner
// (schedule/planner.h) what is due, appends that to the schedule's stream
// durably, then starts each fire's session through the SessionHost, under
// the id the schedule and the nominal time give. A fire whose record is
// durable but whose session never started (the host was killed between the
// two) is started at the next start, under the same id; a session that
// exists is never started twice. Open runs are watched until their run
// ends (completed, failed, stopped: schedule.run_ended); a run parked on a
// person still counts as going.
//
// It answers /api/schedules (GET: every schedule, or one with its recent
// runs; POST: define, pause, resume, trigger, backfill, remove), pushes
// {"type": "schedule"} to the page on every change, and writes the
// cron_start / cron_end / cron_error log lines of the agent spec (§14.3).
//
// Thread-safe: the server calls it from its worker threads.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/fault_injection.h"
#include "runtime/runtime.h"
#include "schedule/cron.h"
#include "schedule/schedule_state.h"
#include "tools/serve/home_view.h"

namespace carapace::web {

class SessionHost;

struct RunnerOptions {
  std::string who;  // recorded as who changed a schedule from this server ("user@host (pid N)")
  std::shared_ptr<FaultInjector> faults;  // asked at schedule.fired; null: none
  std::chrono::milliseconds poll{1000};   // how often open runs are looked at
  size_t max_backfill = 100;              // due times one backfill may run
};

class ScheduleRunner {
 public:
  ScheduleRunner(Runtime* runtime, SessionHost* host, RunnerOptions options);
  ~ScheduleRunner();

  ScheduleRunner(const ScheduleRunner&) = delete;
  ScheduleRunner& operator=(const ScheduleRunner&) = delete;

  // Loads every schedule of the home and applies config.json's "schedules"
  // (`config`: that object, or null): before the server takes requests.
  // One line per thing done goes to *report. Errors: a config schedule that
  // does not check out (named), a damaged stream.
  Status load(const nlohmann::json* config, std::vector<std::string>* report);
  // Then, once the sessions a crash cut off are resumed: starts the fires a
  // crash left without their session, and the thread.
  void start(std::vector<std::string>* report);
  // Ends the thread (the sessions it started run on, the runtime's).
  void stop();

  void set_publisher(std::function<void(LiveMessage)> publish);

  // GET /api/schedules, /api/schedules/NAME.
  ApiReply get(std::string_view path);
  // POST /api/schedules ({"name", definition..., "replace"?}),
  // /api/schedules/NAME/{pause,resume,trigger,backfill,remove}.
  ApiReply post(std::string_view path, const nlohmann::json& body);

  // Runs one round now (tests; the thread does this on its own).
  void tick();

 private:
  struct Entry {
    schedule::ScheduleState state;
    schedule::CronExpression cron;
    schedule::TimeZone zone;
    std::optional<int64_t> wake_at_us;
  };

  Status load_locked(const std::string& name);
  Status append_locked(Entry& e, std::vector<EventBody> bodies, int64_t now_us);
  void tick_locked(int64_t now_us);
  void watch_runs_locked(Entry& e, int64_t now_us);
  void start_fire_locked(Entry& e, const ScheduleFired& fire);
  Status define_locked(ScheduleDefined d, bool replace, const std::string& source, int64_t now_us);
  nlohmann::json describe_locked(const Entry& e, int64_t now_us, bool full) const;
  void publish(const std::string& name, const std::string& what);
  void loop();

  ApiReply define_api(const nlohmann::json& body);
  ApiReply act_api(const std::string& name, const std::string& action, const nlohmann::json& body);

  Runtime* runtime_;
  SessionHost* host_;
  RunnerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> schedules_;
  bool stopping_ = false;
  bool poke_ = false;
  std::thread thread_;
  std::mutex publish_mu_;
  std::function<void(LiveMessage)> publish_;
};

// The "schedules" object of the config file at `path` (null if it has
// none), read bounded; errors name the file.
Status read_config_schedules(const std::string& path, nlohmann::json* out);

}  // namespace carapace::web
