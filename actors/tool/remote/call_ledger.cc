#include "actors/tool/remote/call_ledger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

namespace carapace {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string random_id() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return std::string(buf, 32);
}

nlohmann::json outcome_json(const ToolOutcome& o) {
  return {{"output", o.output},           {"is_error", o.is_error},       {"timed_out", o.timed_out},
          {"truncated", o.truncated},     {"original_bytes", o.original_bytes}, {"duration_ms", o.duration_ms},
          {"interrupted", o.interrupted}};
}

ToolOutcome outcome_from(const nlohmann::json& j, const std::string& call_id) {
  return ToolOutcome{.call_id = call_id,
                     .output = j.value("output", ""),
                     .is_error = j.value("is_error", false),
                     .timed_out = j.value("timed_out", false),
                     .truncated = j.value("truncated", false),
                     .original_bytes = j.value("original_bytes", uint64_t{0}),
                     .duration_ms = j.value("duration_ms", uint64_t{0}),
                     .interrupted = j.value("interrupted", false)};
}

}  // namespace

std::string CallLedger::key(const std::string& session_id, const std::string& call_id) {
  return session_id + '\n' + call_id;
}

Status CallLedger::open(const std::string& dir, std::unique_ptr<CallLedger>* out) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::io_error(dir + ": cannot create the call ledger's directory: " + errno_text());
  }
  std::unique_ptr<CallLedger> ledger(new CallLedger());
  ledger->path_ = dir + "/calls.jsonl";
  std::string text;
  {
    std::ifstream in(ledger->path_, std::ios::binary);
    if (in) text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (text.size() > kMaxLedgerBytes + (16u << 20)) {
    return Status::invalid_argument(ledger->path_ + ": " + std::to_string(text.size()) +
                                    " bytes, more than a ledger can hold; move it away to start a new node");
  }
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;  // a torn last line: the crash came while writing it
    Status s = ledger->apply(text.substr(start, nl - start), true);
    if (!s.ok()) {
      return Status::corruption(ledger->path_ + ": line at byte " + std::to_string(start) + ": " + s.message());
    }
    start = nl + 1;
  }
  ledger->fd_.reset(::open(ledger->path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!ledger->fd_) return Status::io_error(ledger->path_ + ": cannot open: " + errno_text());
  if (start < text.size() && ::ftruncate(ledger->fd_.get(), static_cast<off_t>(start)) != 0) {
    return Status::io_error(ledger->path_ + ": cannot cut its torn last line: " + errno_text());
  }
  ledger->bytes_ = start;
  if (ledger->id_.empty()) {
    ledger->id_ = random_id();
    CARAPACE_RETURN_IF_ERROR(ledger->append(nlohmann::json{{"ledger", ledger->id_}}.dump()));
    // The file's name in its directory is durable too.
    UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d || ::fsync(d.get()) != 0) return Status::io_error(dir + ": cannot sync: " + errno_text());
  }
  *out = std::move(ledger);
  return Status();
}

Status CallLedger::apply(const std::string& line, bool replaying) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return Status::corruption("not a JSON object");
  if (j.contains("ledger")) {
    if (!j["ledger"].is_string()) return Status::corruption("the ledger id is not a string");
    if (replaying && id_.empty()) id_ = j["ledger"].get<std::string>();
    return Status();
  }
  if (!j.contains("session") || !j["session"].is_string() || !j.contains("call") || !j["call"].is_string() ||
      !j.contains("event") || !j["event"].is_string()) {
    return Status::corruption("a line without session, call and event");
  }
  const std::string k = key(j["session"].get<std::string>(), j["call"].get<std::string>());
  const std::string event = j["event"].get<std::string>();
  Entry& e = entries_[k];
  if (event == "start") {
    e.state = State::kStarted;
    e.tool = j.value("tool", "");
    ++e.starts;
  } else if (event == "done") {
    if (!j.contains("outcome") || !j["outcome"].is_object()) return Status::corruption("a done line without outcome");
    e.state = State::kDone;
    e.outcome = outcome_from(j["outcome"], j["call"].get<std::string>());
    e.outcome_kept = true;
    kept_.push_back(k);
    while (kept_.size() > kKeptOutcomes) {
      auto old = entries_.find(kept_.front());
      if (old != entries_.end() && old->first != k) {
        old->second.outcome_kept = false;
        old->second.outcome = ToolOutcome{};
      }
      kept_.pop_front();
    }
  } else {
    return Status::corruption("unknown event '" + event + "'");
  }
  return Status();
}

Status CallLedger::append(const std::string& line, bool durable) {
  if (bytes_ + line.size() + 1 > kMaxLedgerBytes) {
    return Status::unsupported(path_ + " is full (" + std::to_string(bytes_) +
                               " bytes): start the node with a new home; this one keeps its record");
  }
  std::string buf = line + '\n';
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::write(fd_.get(), buf.data() + done, buf.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::io_error(path_ + ": write failed: " + errno_text());
    done += static_cast<size_t>(n);
  }
  if (durable && ::fdatasync(fd_.get()) != 0) return Status::io_error(path_ + ": sync failed: " + errno_text());
  bytes_ += buf.size();
  return Status();
}

CallLedger::Entry CallLedger::find(const std::string& session_id, const std::string& call_id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key(session_id, call_id));
  return it == entries_.end() ? Entry{} : it->second;
}

Status CallLedger::begin(const std::string& session_id, const std::string& call_id, const std::string& tool,
                         uint32_t attempt, bool durable) {
  std::lock_guard lock(mu_);
  const std::string line =
      nlohmann::json{{"session", session_id}, {"call", call_id}, {"event", "start"}, {"tool", tool}, {"attempt", attempt}}
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  CARAPACE_RETURN_IF_ERROR(append(line, durable));
  return apply(line, false);
}

Status CallLedger::finish(const std::string& session_id, const std::string& call_id, const ToolOutcome& outcome,
                          bool durable) {
  std::lock_guard lock(mu_);
  const std::string line = nlohmann::json{{"session", session_id},
                                          {"call", call_id},
                                          {"event", "done"},
                                          {"outcome", outcome_json(outcome)}}
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  CARAPACE_RETURN_IF_ERROR(append(line, durable));
  return apply(line, false);
}

uint64_t CallLedger::calls() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace carapace
