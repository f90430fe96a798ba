#include "base/lib_log.h"

#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "base/redactor.h"
#include "base/text.h"

namespace carapace {
namespace {

class SafeStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit SafeStderrSink(std::shared_ptr<const Redactor> redactor) : redactor_(std::move(redactor)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    std::string line = terminal_safe((*redactor_)(std::string(buf.data(), buf.size())));
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  std::shared_ptr<const Redactor> redactor_;
};

// Hands each line to the program's callback, redacted and with its terminal
// controls shown, as the stderr sink writes it.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CallbackSink(LogSink callback) : sink_(std::move(callback)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    LogLevel level = LogLevel::kOff;
    switch (msg.level) {
      case spdlog::level::trace: level = LogLevel::kTrace; break;
      case spdlog::level::debug: level = LogLevel::kDebug; break;
      case spdlog::level::info: level = LogLevel::kInfo; break;
      case spdlog::level::warn: level = LogLevel::kWarn; break;
      default: level = LogLevel::kError; break;
    }
    std::string line = terminal_safe(redactor_(std::string(msg.payload.data(), msg.payload.size())));
    try {
      sink_(level, line);
    } catch (...) {
      // A sink that throws loses its line, never the caller's work.
    }
  }
  void flush_() override {}

 private:
  LogSink sink_;
  Redactor redactor_;
};

spdlog::level::level_enum level_of(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: break;
  }
  return spdlog::level::off;
}

std::shared_ptr<spdlog::logger> default_logger() {
  auto logger = std::make_shared<spdlog::logger>("carapace", make_safe_stderr_sink(std::make_shared<Redactor>()));
  logger->set_level(spdlog::level::warn);
  logger->set_pattern("carapace: %l: %v");
  return logger;
}

// Loggers are kept for the life of the process: a thread may still be
// writing to the one just replaced.
std::mutex keep_mu;
std::vector<std::shared_ptr<spdlog::logger>>& kept() {
  static auto* all = new std::vector<std::shared_ptr<spdlog::logger>>();
  return *all;
}
std::atomic<spdlog::logger*> current{nullptr};

void install(std::shared_ptr<spdlog::logger> logger) {
  std::lock_guard lock(keep_mu);
  if (!logger) logger = default_logger();
  kept().push_back(logger);
  current.store(logger.get(), std::memory_order_release);
}

}  // namespace

std::shared_ptr<spdlog::sinks::sink> make_safe_stderr_sink(std::shared_ptr<const Redactor> redactor) {
  return std::make_shared<SafeStderrSink>(std::move(redactor));
}

spdlog::logger& lib_log() {
  spdlog::logger* l = current.load(std::memory_order_acquire);
  if (l != nullptr) return *l;
  std::lock_guard lock(keep_mu);
  l = current.load(std::memory_order_acquire);
  if (l == nullptr) {
    auto logger = default_logger();
    kept().push_back(logger);
    l = logger.get();
    current.store(l, std::memory_order_release);
  }
  return *l;
}

void set_log_sink(LogSink sink, LogLevel min_level) {
  if (!sink) return install(nullptr);
  auto logger = std::make_shared<spdlog::logger>("carapace", std::make_shared<CallbackSink>(std::move(sink)));
  logger->set_level(level_of(min_level));
  install(std::move(logger));
}

void set_logger(std::shared_ptr<spdlog::logger> logger) { install(std::move(logger)); }

}  // namespace carapace
