#include "base/status.h"

namespace carapace {

std::string_view code_name(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kCorruption:
      return "corruption";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kIOError:
      return "I/O error";
    case Status::Code::kInconsistent:
      return "inconsistent log";
    case Status::Code::kUnsupported:
      return "unsupported";
    case Status::Code::kBusy:
      return "busy";
    case Status::Code::kAborted:
      return "aborted";
    case Status::Code::kTimedOut:
      return "timed out";
    case Status::Code::kAlreadyFinished:
      return "already finished";
    case Status::Code::kNeedsResume:
      return "needs resume";
    case Status::Code::kAlreadyDecided:
      return "already decided";
    case Status::Code::kExpired:
      return "expired";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(code_name(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  Status out(code_, std::move(msg));
  out.detail_ = detail_;
  return out;
}

}  // namespace carapace
