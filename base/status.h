// Status: the outcome of an operation that can fail, as a value.
//
// Storage, recovery and replay code return a Status instead of throwing, in the
// manner of LevelDB: a success carries nothing, a failure carries a code and a
// message that names what was wrong (the session, the seq, the key path). The
// class is a small value type; copying it is cheap and it is safe to pass
// between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace carapace {

class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kNotFound,         // the session, seq or file does not exist
    kCorruption,       // stored bytes fail a checksum or do not decode
    kInvalidArgument,  // the caller asked for something malformed
    kIOError,          // the storage layer failed
    kInconsistent,     // events decode but break the fold's rules
    kUnsupported,      // written by a newer format this build does not know
    kBusy,             // another writer owns the resource
    kAborted,          // an earlier failure stopped this operation
    kTimedOut,         // the wait ran out before the thing waited for happened
    kAlreadyFinished,  // the session completed or failed: nothing to resume
    kNeedsResume,      // the session did not finish (it crashed or was stopped): resume it first
    kAlreadyDecided,   // an approval request has its decision: the first answer stands
    kExpired,          // an approval request expired: its on_expiry decided it
  };

  // A finer reason within a code, for callers that act on it (verify's
  // report, the CLI's hints); never parsed out of the message.
  enum class Detail : uint8_t {
    kNone = 0,
    kChecksumMismatch,  // corruption: a record's or frame's CRC disagrees
    kStateHashMismatch, // inconsistent: a checkpoint's state hash disagrees with the fold
    kLockHeld,          // busy: another process holds the database's lock
    kNoSpace,           // I/O error: the file system is full
  };

  Status() = default;

  static Status ok_status() { return Status(); }
  static Status not_found(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status invalid_argument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
  static Status io_error(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status inconsistent(std::string msg) { return {Code::kInconsistent, std::move(msg)}; }
  static Status unsupported(std::string msg) { return {Code::kUnsupported, std::move(msg)}; }
  static Status busy(std::string msg) { return {Code::kBusy, std::move(msg)}; }
  static Status aborted(std::string msg) { return {Code::kAborted, std::move(msg)}; }
  static Status timed_out(std::string msg) { return {Code::kTimedOut, std::move(msg)}; }
  static Status already_finished(std::string msg) { return {Code::kAlreadyFinished, std::move(msg)}; }
  static Status needs_resume(std::string msg) { return {Code::kNeedsResume, std::move(msg)}; }
  static Status already_decided(std::string msg) { return {Code::kAlreadyDecided, std::move(msg)}; }
  static Status expired(std::string msg) { return {Code::kExpired, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_corruption() const { return code_ == Code::kCorruption; }
  bool is_invalid_argument() const { return code_ == Code::kInvalidArgument; }
  bool is_io_error() const { return code_ == Code::kIOError; }
  bool is_inconsistent() const { return code_ == Code::kInconsistent; }
  bool is_unsupported() const { return code_ == Code::kUnsupported; }
  bool is_busy() const { return code_ == Code::kBusy; }
  bool is_aborted() const { return code_ == Code::kAborted; }
  bool is_timed_out() const { return code_ == Code::kTimedOut; }
  bool is_already_finished() const { return code_ == Code::kAlreadyFinished; }
  bool is_needs_resume() const { return code_ == Code::kNeedsResume; }
  bool is_already_decided() const { return code_ == Code::kAlreadyDecided; }
  bool is_expired() const { return code_ == Code::kExpired; }

  Code code() const { return code_; }
  Detail detail() const { return detail_; }
  const std::string& message() const { return message_; }

  // A copy carrying `detail`.
  Status with_detail(Detail detail) const {
    Status s = *this;
    s.detail_ = detail;
    return s;
  }

  // "OK", or "<code name>: <message>".
  std::string to_string() const;

  // Returns a copy whose message is prefixed with context ("session s1: ...").
  Status with_context(std::string_view context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  Code code_ = Code::kOk;
  Detail detail_ = Detail::kNone;
  std::string message_;
};

std::string_view code_name(Status::Code code);

}  // namespace carapace

// Returns early from the enclosing function if `expr` yields a failed Status.
#define CARAPACE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::carapace::Status carapace_status_ = (expr);        \
    if (!carapace_status_.ok()) return carapace_status_; \
  } while (0)
