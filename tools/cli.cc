#include "tools/cli.h"

#include "actors/collector/export.h"
#include "base/text.h"

#include "runtime/home.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

namespace carapace::cli {

std::string Context::home() const {
  if (!home_flag.empty()) return home_flag;
  if (const char* env = std::getenv("CARAPACE_HOME"); env != nullptr && *env != '\0') return env;
  const char* user_home = std::getenv("HOME");
  return std::string(user_home != nullptr ? user_home : ".") + "/.carapace";
}

Status Context::prepare_home(bool create) const {
  Status s = carapace::prepare_home(home(), create);
  if (s.ok() && home_ready) {
    std::error_code ec;
    if (std::filesystem::is_directory(home(), ec)) {
      auto ready = std::move(home_ready);
      home_ready = nullptr;
      ready();
    }
  }
  return s;
}

std::unique_ptr<EventLog> Context::open_log(EventLog::Mode mode) const {
  std::unique_ptr<EventLog> log;
  Status s = prepare_home(/*create=*/mode == EventLog::Mode::kWriter);
  if (!s.ok()) {
    fail(s);
    return nullptr;
  }
  s = EventLog::open(EventLog::Options{.path = log_path(), .mode = mode}, &log);
  if (s.ok()) return log;
  if (s.is_not_found()) {
    fail(s,
         "nothing has been written to " + home() + " yet; run `carapace log synth --turns 5` or pass --home");
  } else if (s.is_busy()) {
    fail(s, "another carapace process is writing to " + home() + "; wait for it or pass another --home");
  } else {
    fail(s);
  }
  return nullptr;
}

namespace {

// A word a shell reads back as it is: quoted when it holds anything else.
std::string shell_word(const std::string& w) {
  bool plain = !w.empty();
  for (char c : w) {
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+:=~@%", c) != nullptr);
  }
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int report(const Context& ctx, const Status& status, const std::string& given_hint, int code) {
  std::string hint = given_hint;
  if (status.detail() == Status::Detail::kNoSpace) {
    hint = "the disk holding " + ctx.home() + " is full: free some space, then run the command again " +
           "(a session goes on from its last checkpoint with `carapace resume`); nothing committed was lost" +
           (given_hint.empty() ? "" : "\n  " + given_hint);
  }
  // Every error says where to look next: at least the command's own help.
  if (hint.empty() && !ctx.command_path.empty()) {
    hint = "`carapace " + ctx.command_path + " --help` " +
           (code == kExitUsage ? "lists the options" : "says what the command needs");
  }
  hint = ctx.with_home(hint);
  if (ctx.json) {
    nlohmann::json j{
        {"success", false},
        {"error",
         {{"code", code == kExitUsage ? std::string("usage") : std::string(code_name(status.code()))},
          {"message", ctx.with_home(status.message())}}}};
    j["error"]["hint"] = hint;
    print_redacted(ctx, j);
  } else {
    std::cerr << ctx.shown(ctx.with_home("carapace: " + status.to_string())) << "\n";
    if (!hint.empty()) std::cerr << "  " << ctx.shown(hint) << "\n";
  }
  return code;
}

}  // namespace

std::string Context::with_home(std::string_view text) const {
  if (home_flag.empty()) return std::string(text);
  const std::string insert = "--home " + shell_word(home_flag) + " ";
  std::string out;
  const std::string_view word = "carapace ";
  size_t at = 0;
  for (size_t hit; (hit = text.find(word, at)) != std::string_view::npos; at = hit + word.size()) {
    out.append(text.substr(at, hit + word.size() - at));
    const bool starts = hit == 0 || std::strchr(" `(\n", text[hit - 1]) != nullptr;
    const size_t next = hit + word.size();
    // A command follows (one of carapace's), not --home already or a sentence.
    size_t end = next;
    while (end < text.size() && std::islower(static_cast<unsigned char>(text[end]))) ++end;
    const std::string_view name = text.substr(next, end - next);
    const bool command = std::find(command_names.begin(), command_names.end(), name) != command_names.end();
    if (starts && command) out += insert;
  }
  out.append(text.substr(at));
  return out;
}

int Context::list_every_session(const EventLog& log, const std::string& refusal,
                                std::vector<SessionMeta>* out) const {
  std::vector<std::string> unreadable;
  if (Status s = log.list_sessions(out, &unreadable); !s.ok()) return fail(s);
  if (!unreadable.empty()) {
    return fail(Status::corruption("the session index has " + count(unreadable.size(), "unreadable entry")),
                "`carapace verify --all` names them; " + refusal);
  }
  return kExitOk;
}

int Context::fail(const Status& status, const std::string& given_hint) const {
  return report(*this, status, given_hint, kExitFailed);
}

int Context::usage(const Status& status, const std::string& given_hint) const {
  return report(*this, status, given_hint, kExitUsage);
}

void Context::print_success(const nlohmann::json& data, const std::string& summary) const {
  // Every --json answer passes the redactor (docs/redaction.md).
  print_redacted(*this, {{"success", true}, {"data", data}, {"summary", summary}});
}

void add_json_flag(CLI::App* cmd, Context& ctx) {
  cmd->add_flag("--json", ctx.json, "Print JSON: {\"success\", \"data\", \"summary\"}");
}

std::string Context::shown(std::string_view text) const {
  return terminal_safe(redactor()(std::string(text)));
}

const Redactor& Context::redactor() const {
  if (!redactor_) redactor_ = std::make_shared<Redactor>();
  return *redactor_;
}

bool our_reference(const std::string& key) { return export_reference_key(key); }

void redact_json(nlohmann::json& j, const Redactor& redactor) {
  if (j.is_string()) {
    std::string out;
    if (redactor.redact(j.get_ref<const std::string&>(), &out)) j = std::move(out);
  } else if (j.is_array()) {
    for (auto& v : j) redact_json(v, redactor);
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_string() && our_reference(it.key())) continue;
      redact_json(it.value(), redactor);
    }
  }
}

void print_redacted(const Context& ctx, nlohmann::json j) {
  redact_json(j, ctx.redactor());
  std::cout << json_terminal_safe(dump(j)) << "\n";
}

CLI::Validator whole_number_from(uint64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (digits && text.size() <= 19 && std::stoull(text) >= min) return "";
        return "\"" + text + "\" is not a whole number from " + std::to_string(min);
      },
      "INT>=" + std::to_string(min));
}

std::string dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string count(uint64_t n, const std::string& noun) {
  if (n == 1) return "1 " + noun;
  if (noun.size() > 1 && noun.ends_with("y") && std::string_view("aeiou").find(noun[noun.size() - 2]) ==
                                                    std::string_view::npos) {
    return std::to_string(n) + " " + noun.substr(0, noun.size() - 1) + "ies";  // bodies, retries
  }
  bool es = noun.ends_with("s") || noun.ends_with("sh") || noun.ends_with("ch") || noun.ends_with("x");
  return std::to_string(n) + " " + noun + (es ? "es" : "s");
}

std::string local_time(int64_t ts_us) {
  std::time_t secs = static_cast<std::time_t>(ts_us / 1000000);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace carapace::cli
