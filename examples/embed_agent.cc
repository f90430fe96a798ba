// embed_agent: Carapace inside a C++ program.
//
//   embed_agent <home-dir> <scenario.json>
//
// Registers a C++ tool ("add") and a C++ hook that refuses negative numbers,
// runs one session on the scripted provider, prints its events as they are
// appended, and prints the final answer. Exit status 0 if the session
// completed. Every event stays in <home-dir>: `carapace --home <home-dir>
// log show <id>` shows them again.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "events/event_summary.h"
#include "runtime/runtime.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: embed_agent <home-dir> <scenario.json>\n");
    return 2;
  }
  carapace::Runtime::Options options;
  options.home = argv[1];
  options.config.provider.scenario = argv[2];
  options.config.tools_enabled = {};  // only the tools registered below
  std::unique_ptr<carapace::Runtime> runtime;
  carapace::Status s = carapace::Runtime::open(options, &runtime);
  if (!s.ok()) {
    std::fprintf(stderr, "embed_agent: %s\n", s.to_string().c_str());
    return 1;
  }

  // A tool is a JSON schema and a function; quick ones need not block.
  s = runtime->register_tool(carapace::ToolDefinition{
      .spec = {.name = "add",
               .description = "Adds two integers a and b.",
               .schema = carapace::JsonText{R"({"type":"object","properties":{"a":{"type":"integer"},)"
                                            R"("b":{"type":"integer"}},"required":["a","b"]})"},
               .idempotent = true},
      .blocking = false,
      .run = [](const nlohmann::json& args, const carapace::ToolContext&) {
        if (!args.contains("a") || !args.contains("b"))
          return carapace::ToolResult{.output = "a and b are required", .is_error = true};
        return carapace::ToolResult{.output = std::to_string(args["a"].get<long>() + args["b"].get<long>())};
      }});
  if (!s.ok()) return std::fprintf(stderr, "embed_agent: %s\n", s.to_string().c_str()), 1;

  // A hook sees each call before it runs and may deny it, change its
  // arguments, or let it through.
  s = runtime->register_hook(carapace::HookDefinition{
      .name = "no-negatives",
      .event = carapace::HookEvent::kPreToolUse,
      .matcher = "^add$",
      .function = [](const carapace::HookInput& in) {
        auto args = nlohmann::json::parse(in.args.text);
        bool negative = args.value("a", 0) < 0 || args.value("b", 0) < 0;
        return carapace::HookDecision{
            .decision = negative ? carapace::Decision::kDeny : carapace::Decision::kAllow,
            .reason = negative ? "negative numbers are not allowed" : ""};
      }});
  if (!s.ok()) return std::fprintf(stderr, "embed_agent: %s\n", s.to_string().c_str()), 1;

  std::string id;
  s = runtime->start_session(
      carapace::SessionOptions{.task = "Add 2 and 3, then try -1 and 1.",
                               .on_event =
                                   [](const carapace::Event& e) {
                                     std::printf("  %3llu %-17s %s\n", static_cast<unsigned long long>(e.seq),
                                                 std::string(e.type_name()).c_str(),
                                                 carapace::event_summary(e).c_str());
                                   }},
      &id);
  if (!s.ok()) return std::fprintf(stderr, "embed_agent: %s\n", s.to_string().c_str()), 1;
  carapace::SessionOutcome outcome;
  s = runtime->wait(id, std::chrono::minutes(1), &outcome);
  if (!s.ok()) return std::fprintf(stderr, "embed_agent: %s\n", s.to_string().c_str()), 1;
  std::printf("session %s: %s\nanswer: %s\n", id.c_str(),
              std::string(carapace::status_name(outcome.status)).c_str(), outcome.final_answer.c_str());
  return outcome.status == carapace::SessionStatus::kCompleted ? 0 : 1;
}
