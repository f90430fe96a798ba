#include "runtime/logging.h"

#include "base/lib_log.h"

#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>

#include "base/redactor.h"
#include "base/text.h"
#include "events/event_summary.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

std::string utc_day(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string utc_timestamp(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  char out[48];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(micros));
  return out;
}

// A log file's day, from its name (carapace-YYYY-MM-DD[.N].jsonl), or "".
std::string day_of(const std::string& name) {
  if (name.size() < 25 || name.rfind("carapace-", 0) != 0 || !name.ends_with(".jsonl")) return "";
  std::string day = name.substr(9, 10);
  for (size_t i = 0; i < day.size(); ++i) {
    bool digit = day[i] >= '0' && day[i] <= '9';
    if ((i == 4 || i == 7) ? day[i] != '-' : !digit) return "";
  }
  return day;
}

// Reports a logging failure once on stderr; logging never fails a turn.
void report_once(std::atomic<bool>& reported, const std::string& what) {
  if (!reported.exchange(true)) std::fprintf(stderr, "carapace: warning: %s; logging to the file stops\n", what.c_str());
}

// A line written as `event key=value key="a value" ...` (the agent spec's
// logged events, e.g. `cron_start jobId=nightly sessionId=...`) also gets
// its event and fields as JSON members: {"event": "cron_start", "jobId":
// "nightly", ...}; whole numbers as numbers. Any other line: nothing.
void add_event_fields(std::string_view text, nlohmann::json* line) {
  size_t i = 0;
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (i < text.size() && word_char(text[i])) ++i;
  if (i == 0 || i >= text.size() || text[i] != ' ') return;
  nlohmann::json fields = nlohmann::json::object();
  fields["event"] = std::string(text.substr(0, i));
  while (i < text.size()) {
    if (text[i] != ' ') return;
    ++i;
    size_t k = i;
    while (i < text.size() && word_char(text[i])) ++i;
    if (i == k || i >= text.size() || text[i] != '=') return;
    std::string key(text.substr(k, i - k));
    ++i;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      size_t end = text.find('"', i + 1);
      if (end == std::string_view::npos) return;
      value = std::string(text.substr(i + 1, end - i - 1));
      i = end + 1;
      fields[key] = value;
      continue;
    }
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    value = std::string(text.substr(i, end - i));
    i = end;
    const bool number = !value.empty() && value.size() < 16 &&
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (number) {
      fields[key] = std::stoll(value);
    } else {
      fields[key] = value;
    }
  }
  if (fields.size() < 2) return;
  for (auto& [key, value] : fields.items()) {
    if (!line->contains(key)) (*line)[key] = value;
  }
}

class JsonLinesSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  JsonLinesSink(std::string dir, uint64_t max_bytes, uint32_t retention_days, std::shared_ptr<const Redactor> r)
      : dir_(std::move(dir)), max_bytes_(max_bytes), retention_days_(retention_days), redactor_(std::move(r)) {}
  ~JsonLinesSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (broken_) return;
    const std::string day = utc_day(msg.time);
    if (fd_ < 0 || day != day_ || size_ >= max_bytes_) {
      if (!open_file(day)) return;
    }
    std::string text = (*redactor_)(std::string(msg.payload.data(), msg.payload.size()));
    nlohmann::json line{{"ts", utc_timestamp(msg.time)},
                        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                                              spdlog::level::to_string_view(msg.level).size())},
                        {"msg", text},
                        {"pid", static_cast<int64_t>(::getpid())},
                        {"thread", msg.thread_id}};
    add_event_fields(text, &line);
    std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    // One write per line (O_APPEND): a crash loses at most the line being written.
    ssize_t n = ::write(fd_, out.data(), out.size());
    if (n != static_cast<ssize_t>(out.size())) {
      broken_ = true;
      report_once(reported_, "cannot write the log file in " + dir_ + ": " + std::strerror(errno));
      return;
    }
    size_ += out.size();
  }

  void flush_() override {}

 private:
  bool open_file(const std::string& day) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    index_ = day == day_ ? index_ + 1 : 0;
    day_ = day;
    for (;; ++index_) {
      std::string name = "carapace-" + day + (index_ == 0 ? "" : "." + std::to_string(index_)) + ".jsonl";
      std::string path = dir_ + "/" + name;
      fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd_ < 0) {
        broken_ = true;
        report_once(reported_, "cannot open the log file " + path + ": " + std::strerror(errno));
        return false;
      }
      struct stat st {};
      if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        broken_ = true;
        report_once(reported_, "the log file " + path + " is not a regular file");
        return false;
      }
      size_ = static_cast<uint64_t>(st.st_size);
      if (size_ < max_bytes_) break;
      ::close(fd_);
      fd_ = -1;
    }
    prune(day);
    return true;
  }

  // Removes the files of days older than the retention.
  void prune(const std::string& today) {
    if (retention_days_ == 0) return;
    std::tm tm{};
    if (::strptime(today.c_str(), "%Y-%m-%d", &tm) == nullptr) return;
    std::time_t t = ::timegm(&tm) - static_cast<std::time_t>(retention_days_) * 86400;
    const std::string oldest = utc_day(std::chrono::system_clock::from_time_t(t));
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      std::string name = entry.path().filename().string();
      std::string day = day_of(name);
      if (!day.empty() && day < oldest) fs::remove(entry.path(), ec);
    }
  }

  const std::string dir_;
  const uint64_t max_bytes_;
  const uint32_t retention_days_;
  std::shared_ptr<const Redactor> redactor_;
  int fd_ = -1;
  std::string day_;
  int index_ = 0;
  uint64_t size_ = 0;
  bool broken_ = false;
  std::atomic<bool> reported_{false};
};

spdlog::level::level_enum level_of(const std::string& name) {
  if (name == "warning") return spdlog::level::warn;
  return spdlog::level::from_str(name);
}

}  // namespace

bool valid_log_level(const std::string& level) {
  for (const char* l : {"trace", "debug", "info", "warn", "warning", "error", "off"}) {
    if (level == l) return true;
  }
  return false;
}

Status configure_logging(const LogOptions& options) {
  for (const std::string* l : {&options.stderr_level, &options.file_level}) {
    if (!valid_log_level(*l)) {
      return Status::invalid_argument("log level \"" + *l + "\" is not one of trace, debug, info, warn, error, off");
    }
  }
  std::shared_ptr<const Redactor> redactor = options.redactor ? options.redactor : std::make_shared<Redactor>();
  auto console = make_safe_stderr_sink(redactor);
  console->set_level(level_of(options.stderr_level));
  std::vector<spdlog::sink_ptr> sinks = {console};
  spdlog::level::level_enum lowest = console->level();
  if (!options.dir.empty()) {
    std::error_code ec;
    fs::create_directories(options.dir, ec);
    if (ec) return Status::io_error("cannot create the log directory " + options.dir + ": " + ec.message());
    fs::permissions(options.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    auto file = std::make_shared<JsonLinesSink>(options.dir, options.max_file_bytes, options.retention_days,
                                                redactor);
    file->set_level(level_of(options.file_level));
    lowest = std::min(lowest, file->level());
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>("carapace", sinks.begin(), sinks.end());
  logger->set_level(lowest);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  set_logger(logger);  // the library's own lines too
  return Status();
}

void log_session_event(const std::string& id, const Event& e) {
  auto line = [&] { return "session " + id + ": " + std::string(e.type_name()) + " " + event_summary(e); };
  const auto& b = e.body;
  if (std::holds_alternative<SessionStarted>(b) || std::holds_alternative<SessionResumed>(b) ||
      std::holds_alternative<TurnCommitted>(b) || std::holds_alternative<ContextTrimmed>(b) ||
      std::holds_alternative<FaultInjected>(b) || std::holds_alternative<SessionCompleted>(b)) {
    lib_log().info("{}", line());
    return;
  }
  if (const auto* f = get_if<LlmFailed>(e)) {
    if (f->will_retry) {
      lib_log().info("{}", line());
    } else {
      lib_log().warn("{}", line());
    }
    return;
  }
  if (get_if<SessionFailed>(e) != nullptr) {
    lib_log().warn("{}", line());
    return;
  }
  if (lib_log().should_log(spdlog::level::debug)) lib_log().debug("{}", line());
}

}  // namespace carapace
