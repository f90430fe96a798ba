#include "replay/torture_compare.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "events/event_json.h"
#include "replay/event_diff.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

constexpr size_t kShown = 160;  // characters of a value shown
constexpr uintmax_t kLineCompareLimit = 1 << 20;  // files compared line by line up to this size

std::string cut(std::string s) {
  if (s.size() <= kShown) return s;
  s.resize(kShown);
  return s + "…";
}

// Fields that differ between a crash-free run and a resumed one whatever the
// agent does: where a checkpoint falls and what it hashes (the resumed log
// holds more events), and which attempt answered (a lost request is retried).
bool crash_bookkeeping(std::string_view type, std::string_view field) {
  if (type == "turn.committed") return field != "turn";
  if (type == "llm.responded") return field == "attempt";
  return false;
}

std::string tool_of(const Event& e) {
  if (const auto* c = get_if<ToolCompleted>(e)) return c->tool;
  if (const auto* r = get_if<ToolRequested>(e)) return r->tool;
  return "";
}

std::string meaning_of(const std::string& type, const std::string& tool, const std::string& mode) {
  const std::string named = tool.empty() ? "a tool" : "the tool `" + tool + "`";
  if (type == "tool.completed" || type == "workspace") {
    if (mode == "turn") {
      return "turn mode ran the calls of the turn a crash cut short again from its checkpoint: " + named +
             " is not idempotent (its second run saw what the first had done, e.g. an append or a counter); "
             "make the call idempotent, or resume in step mode, which never runs a call whose intent is "
             "durable again";
    }
    return named + " answered differently to the same call: its result depends on something outside the log "
                   "(the clock, randomness, a file a call cut short by the crash left half-written)";
  }
  if (type == "tool.requested") {
    return "the model asked for another call: the conversation it was sent differed before this point";
  }
  if (type == "llm.responded") {
    return "the model answered differently: a scripted provider answers in order, so a reply consumed by a "
           "request the crash lost, or an answer that was not recorded, moves every later one";
  }
  if (type == "user.message") return "a user message was lost, sent twice or sent out of order";
  if (type == "hook.decided") {
    return "a hook decided differently: its decision depends on something outside the log, or it saw "
           "different input";
  }
  if (type == "session.completed" || type == "session.failed") return "the session ended differently";
  if (type == "fault.injected") {
    return "the fault plan fired differently: its occurrences are counted per process, so a resumed "
           "process counts from zero again";
  }
  if (type == "context.trimmed") return "the context was trimmed differently: the conversation's size differed";
  return "the conversation differs from here on";
}

bool conversational(const Event& e) {
  if (const auto* m = get_if<UserMessage>(e)) return !m->follow_up;  // a follow-up counts when it is sent
  return std::holds_alternative<LlmResponded>(e.body) || std::holds_alternative<HookDecided>(e.body) ||
         std::holds_alternative<ToolRequested>(e.body) || std::holds_alternative<ToolCompleted>(e.body) ||
         std::holds_alternative<ContextTrimmed>(e.body) || std::holds_alternative<TurnCommitted>(e.body) ||
         std::holds_alternative<SessionCompleted>(e.body) || std::holds_alternative<SessionFailed>(e.body);
}

struct Entry {
  std::string kind;  // "file", "dir", "link", "other"
  std::string bytes;
  std::string link;
  uintmax_t size = 0;
  std::string path;  // absolute, for reading
};

std::map<std::string, Entry> walk(const std::string& root) {
  std::map<std::string, Entry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    Entry e;
    e.path = p.string();
    auto st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(st)) {
      e.kind = "link";
      e.link = fs::read_symlink(p, ec).string();
    } else if (fs::is_directory(st)) {
      e.kind = "dir";
    } else if (fs::is_regular_file(st)) {
      e.kind = "file";
      e.size = fs::file_size(p, ec);
    } else {
      e.kind = "other";
    }
    out[p.lexically_relative(root).string()] = std::move(e);  // never through a link
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string summary(const Entry& e) {
  if (e.kind == "file") return "a file of " + std::to_string(e.size) + " bytes";
  if (e.kind == "link") return "a symbolic link to " + e.link;
  if (e.kind == "dir") return "a directory";
  return "a special file";
}

}  // namespace

std::string RunDifference::describe() const {
  if (kind == "workspace") return "the workspace differs at " + field + ": " + actual + " here, " + expected +
                                  " in the crash-free run";
  if (kind == "length") {
    if (seq == 0) {
      return "this run ends before the crash-free run's seq " + std::to_string(reference_seq) + " " + type +
             " (" + expected + ")";
    }
    return "this run goes on past the crash-free run's end, from seq " + std::to_string(seq) + " " + type +
           " (" + actual + ")";
  }
  std::string head = "seq " + std::to_string(seq) + " " + type + " (crash-free run: seq " +
                     std::to_string(reference_seq) + "): ";
  if (field == "type") return head + "a " + actual + " where the crash-free run has a " + expected;
  return head + field + " is " + (actual.empty() ? "absent" : actual) + ", not " +
         (expected.empty() ? "absent" : expected);
}

std::vector<const Event*> conversation_events(const std::vector<Event>& events) {
  std::vector<std::pair<uint64_t, uint64_t>> discarded;
  for (const auto& e : events) {
    if (const auto* r = get_if<TurnRolledBack>(e)) discarded.emplace_back(r->from_seq, r->to_seq);
  }
  std::vector<const Event*> out;
  for (const auto& e : events) {
    bool gone = std::any_of(discarded.begin(), discarded.end(),
                            [&](const auto& r) { return e.seq >= r.first && e.seq <= r.second; });
    if (!gone && conversational(e)) out.push_back(&e);
  }
  return out;
}

std::vector<std::string> injected_faults(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    if (const auto* f = get_if<FaultInjected>(e)) {
      // The detail ends with the rule that fired, "(PLAN faults[N])": which
      // file and place held it is no part of the fault.
      std::string detail = f->detail;
      size_t open = detail.rfind(" (");
      if (open != std::string::npos && detail.size() > 2 && detail.compare(detail.size() - 2, 2, "])") == 0) {
        detail.resize(open);
      }
      out.push_back(f->point + " " + f->action + " " + detail);
    }
  }
  return out;
}

std::optional<RunDifference> first_difference(const std::vector<Event>& reference, const std::vector<Event>& run,
                                              const std::string& mode) {
  const auto a = conversation_events(reference);
  const auto b = conversation_events(run);
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const Event& x = *a[i];
    const Event& y = *b[i];
    for (const auto& d : diff_events(x, y)) {
      const std::string type(d.field == "type" ? y.type_name() : x.type_name());
      if (d.field != "type" && crash_bookkeeping(type, d.field)) continue;
      RunDifference r{.kind = "event",
                      .seq = y.seq,
                      .reference_seq = x.seq,
                      .type = type,
                      .field = d.field,
                      .expected = cut(d.expected),
                      .actual = cut(d.actual),
                      .tool = tool_of(y).empty() ? tool_of(x) : tool_of(y)};
      r.meaning = meaning_of(d.field == "type" ? std::string(x.type_name()) : type, r.tool, mode);
      return r;
    }
  }
  if (a.size() == b.size()) return std::nullopt;
  RunDifference r{.kind = "length"};
  if (a.size() > n) {
    const Event& x = *a[n];
    r.reference_seq = x.seq;
    r.type = std::string(x.type_name());
    r.expected = cut(describe_event(x, kShown));
    r.meaning = "this run stopped short: " + meaning_of(r.type, tool_of(x), mode);
  } else {
    const Event& y = *b[n];
    r.seq = y.seq;
    r.type = std::string(y.type_name());
    r.actual = cut(describe_event(y, kShown));
    r.meaning = "this run did more: " + meaning_of(r.type, tool_of(y), mode);
  }
  return r;
}

std::optional<RunDifference> first_workspace_difference(const std::string& reference_dir, const std::string& run_dir,
                                                        const std::string& mode) {
  const auto a = walk(reference_dir);
  const auto b = walk(run_dir);
  std::set<std::string> paths;
  for (const auto& [p, e] : a) paths.insert(p);
  for (const auto& [p, e] : b) paths.insert(p);
  for (const auto& p : paths) {
    auto x = a.find(p);
    auto y = b.find(p);
    RunDifference r{.kind = "workspace", .type = "workspace", .field = p};
    r.meaning = meaning_of("workspace", "", mode);
    if (x == a.end() || y == b.end()) {
      r.expected = x == a.end() ? "nothing" : summary(x->second);
      r.actual = y == b.end() ? "nothing" : summary(y->second);
      return r;
    }
    const Entry& ex = x->second;
    const Entry& ey = y->second;
    if (ex.kind != ey.kind || (ex.kind == "link" && ex.link != ey.link)) {
      r.expected = summary(ex);
      r.actual = summary(ey);
      return r;
    }
    if (ex.kind != "file") continue;
    if (ex.size > kLineCompareLimit || ey.size > kLineCompareLimit) {
      if (ex.size == ey.size && slurp(ex.path) == slurp(ey.path)) continue;
      r.expected = summary(ex);
      r.actual = summary(ey) + (ex.size == ey.size ? " (other bytes)" : "");
      return r;
    }
    const std::string bx = slurp(ex.path), by = slurp(ey.path);
    if (bx == by) continue;
    std::istringstream lx(bx), ly(by);
    std::string l1, l2;
    for (size_t line = 1;; ++line) {
      const bool g1 = static_cast<bool>(std::getline(lx, l1));
      const bool g2 = static_cast<bool>(std::getline(ly, l2));
      if (g1 && g2 && l1 == l2) continue;
      auto show = [&](bool got, const std::string& l, size_t size) {
        nlohmann::json text = got ? l : std::string();
        return std::string("a file of ") + std::to_string(size) + " bytes, line " + std::to_string(line) +
               (got ? " " + cut(text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) : " missing");
      };
      r.expected = show(g1, l1, bx.size());
      r.actual = show(g2, l2, by.size());
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace carapace
