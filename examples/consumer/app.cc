// A program outside the Carapace tree that embeds it: only <carapace/...>
// headers, the carapace::carapace target (see CMakeLists.txt).
//
//   app <home-dir> <scenario.json>
//
// Registers a C++ tool ("multiply") and a C++ hook that refuses a zero, runs
// one session on the scripted provider (the scenario plays the model), prints
// its events as they are appended, reads them back, replays the run offline
// (identical, or where it differs), and prints the answer.
// Exit status 0 if the session completed.
#include <carapace/runtime.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

int fail(const carapace::Status& s) {
  std::fprintf(stderr, "app: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: app <home-dir> <scenario.json>\n");
    return 2;
  }

  std::printf("carapace %s (headers %s)\n", carapace::version(), CARAPACE_VERSION_STRING);
  // The library's log lines (warnings and errors, by default on stderr) go
  // where the program says; never to stdout on their own.
  carapace::set_log_sink(
      [](carapace::LogLevel, std::string_view line) {
        std::printf("library log: %.*s\n", static_cast<int>(line.size()), line.data());
      },
      carapace::LogLevel::kWarn);

  // The runtime: its data directory (the event log) and its configuration.
  carapace::Runtime::Options options;
  options.home = argv[1];
  options.config.provider.name = "scripted";
  options.config.provider.scenario = argv[2];
  options.config.tools_enabled = {};  // no built-in tools: only the one registered below
  std::unique_ptr<carapace::Runtime> runtime;
  if (carapace::Status s = carapace::Runtime::open(options, &runtime); !s.ok()) return fail(s);

  // A tool: what the model sees (name, description, JSON schema) and a
  // function of the arguments. An error result goes back to the model.
  carapace::Status s = runtime->register_tool(carapace::ToolDefinition{
      .spec = {.name = "multiply",
               .description = "Multiplies two integers a and b.",
               .schema = carapace::JsonText{R"({"type":"object","properties":{"a":{"type":"integer"},)"
                                            R"("b":{"type":"integer"}},"required":["a","b"]})"},
               .idempotent = true},
      .blocking = false,  // quick: runs on the tool actor, not a thread of its own
      .run = [](const nlohmann::json& args, const carapace::ToolContext&) {
        if (!args.contains("a") || !args.contains("b"))
          return carapace::ToolResult::error("a and b are required");
        return carapace::ToolResult{.output = std::to_string(args["a"].get<long>() * args["b"].get<long>())};
      }});
  if (!s.ok()) return fail(s);

  // A hook: consulted before each call of a tool its matcher names; its
  // decision is recorded in the log.
  s = runtime->register_hook(carapace::HookDefinition{
      .name = "no-zero",
      .event = carapace::HookEvent::kPreToolUse,
      .matcher = "^multiply$",
      .function = [](const carapace::HookInput& in) {
        auto args = nlohmann::json::parse(in.args.text, nullptr, false);
        bool zero = args.is_object() && (args.value("a", 1) == 0 || args.value("b", 1) == 0);
        return carapace::HookDecision{.decision = zero ? carapace::Decision::kDeny : carapace::Decision::kAllow,
                                      .reason = zero ? "a zero is not allowed" : ""};
      },
      .timeout_ms = 1000,     // abandoned (and, being fail-closed, denying) past a second
      .fail_closed = true});  // a hook that throws or hangs denies the call
  if (!s.ok()) return fail(s);

  // A session: its events arrive on an actor thread as they are appended.
  std::string id;
  s = runtime->start_session(
      carapace::SessionOptions{.task = "Multiply 6 by 7, then 5 by 0.",
                               .on_event =
                                   [](const carapace::Event& e) {
                                     std::printf("  %3llu %s\n", static_cast<unsigned long long>(e.seq),
                                                 std::string(e.type_name()).c_str());
                                   }},
      &id);
  if (!s.ok()) return fail(s);
  carapace::SessionOutcome outcome;
  if (s = runtime->wait(id, std::chrono::minutes(1), &outcome); !s.ok()) return fail(s);

  // The session's events, read back from its log.
  std::vector<carapace::Event> events;
  if (s = runtime->read_events(id, 1, &events); !s.ok()) return fail(s);
  for (const carapace::Event& e : events) {
    if (const auto* hook = carapace::get_if<carapace::HookDecided>(e))
      std::printf("hook %s: %s %s\n", hook->hook_name.c_str(), hook->decision.c_str(), hook->reason.c_str());
  }
  // The recorded run replayed offline with this program's tool and hook:
  // identical, or the first event where it differs.
  carapace::ReplayReport replayed;
  if (s = runtime->replay(id, 0, &replayed); !s.ok()) return fail(s);
  std::printf("session %s: replay %s after %llu events\n", id.c_str(),
              replayed.identical() ? "identical" : "diverged", static_cast<unsigned long long>(replayed.events));
  std::printf("session %s: %s after %zu events\nanswer: %s\n", id.c_str(),
              std::string(carapace::status_name(outcome.status)).c_str(), events.size(),
              outcome.final_answer.c_str());
  return outcome.status == carapace::SessionStatus::kCompleted ? 0 : 1;
}
