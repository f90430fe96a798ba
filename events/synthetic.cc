#include "events/synthetic.h"

#include <array>
#include <string_view>

namespace carapace {
namespace {

constexpr std::array<std::string_view, 24> kWords = {
    "the",    "module",  "returns", "error",  "config", "build", "test",    "file",
    "parser", "handler", "request", "cache",  "index",  "value", "session", "commit",
    "retry",  "timeout", "buffer",  "schema", "field",  "check", "result",  "output"};

constexpr std::array<std::string_view, 4> kTools = {"read_file", "shell", "list_dir", "write_file"};
constexpr std::string_view kModel = "synthetic-1";
constexpr uint64_t kSystemPromptChars = 2400;

// Prices of the synthetic model, dollars per token.
constexpr double kInputPrice = 3.0 / 1e6;
constexpr double kOutputPrice = 15.0 / 1e6;

}  // namespace

SyntheticSession::SyntheticSession(SyntheticOptions options) : options_(options), rng_(options.seed) {}

uint64_t SyntheticSession::rand(uint64_t bound) { return bound == 0 ? 0 : rng_() % bound; }

std::string SyntheticSession::words(size_t approx_chars) {
  std::string out;
  out.reserve(approx_chars + 16);
  while (out.size() < approx_chars) {
    if (!out.empty()) out += rand(12) == 0 ? ".\n" : " ";
    out += kWords[rand(kWords.size())];
  }
  return out;
}

void SyntheticSession::add_message(uint64_t chars) {
  context_.back().messages += 1;
  context_.back().chars += chars;
  context_chars_ += chars;
}

uint64_t SyntheticSession::context_messages() const {
  uint64_t n = 0;
  for (const auto& g : context_) n += g.messages;
  return n;
}

ToolCall SyntheticSession::make_call() {
  std::string tool(kTools[rand(kTools.size())]);
  std::string word(kWords[rand(kWords.size())]);
  std::string file = "src/" + word + "_" + std::to_string(rand(100)) + ".cc";
  std::string args;
  if (tool == "read_file")
    args = R"({"path":")" + file + R"("})";
  else if (tool == "shell")
    args = R"({"command":"grep -rn )" + word + R"( src/"})";
  else if (tool == "list_dir")
    args = R"({"path":"src"})";
  else
    args = R"({"path":")" + file + R"(","content":")" + words(120) + R"("})";
  return ToolCall{"call_" + std::to_string(++call_counter_), tool, JsonText{args}};
}

ToolCompleted SyntheticSession::run_call(const ToolCall& call) {
  ToolCompleted done{.call_id = call.id, .tool = call.name, .duration_ms = 2 + rand(40)};
  if (call.name == "write_file") {
    done.output = "wrote " + std::to_string(120 + rand(80)) + " bytes to the file";
  } else if (call.name == "shell" && rand(15) == 0) {
    done.output = "exit status 1\ngrep: no match";
    done.is_error = true;
  } else {
    uint64_t size = options_.tool_output_bytes / 2 + rand(options_.tool_output_bytes + 1);
    while (done.output.size() < size) {
      if (call.name == "list_dir") {
        done.output += std::string(kWords[rand(kWords.size())]) + "_" + std::to_string(rand(100)) + ".cc\n";
      } else {
        done.output += std::to_string(rand(900) + 1) + ": " + words(30 + rand(50)) + "\n";
      }
    }
  }
  done.kept_bytes = done.output.size();
  done.original_bytes = done.output.size();
  return done;
}

void SyntheticSession::step_start(SyntheticStep* step) {
  std::string task = "Find out why the " + words(40) + " fails, then fix it.";
  context_.push_back({});
  add_message(task.size());
  step->events.emplace_back(SessionStarted{.agent_id = "synth",
                                           .provider = "scripted",
                                           .model = std::string(kModel),
                                           .config_digest = "synthetic",
                                           .rng_seed = options_.seed,
                                           .workspace = "workspace"});
  step->events.emplace_back(UserMessage{std::move(task)});
  step->checkpoint = true;
  phase_ = Phase::kOpenTurn;
}

void SyntheticSession::step_open_turn(SyntheticStep* step) {
  ++turn_;
  attempt_ = 1;
  context_.push_back({});
  step->events.emplace_back(TurnStarted{turn_});
  step->events.emplace_back(PromptAssembled{
      .turn = turn_,
      .segments = {{"identity", "config", 420}, {"tools", "registry", 1784}, {"session", "task", 196}},
      .digest = digest128("synthetic system prompt " + std::to_string(options_.seed)),
      .total_chars = kSystemPromptChars});
  step->events.emplace_back(
      LlmRequested{.turn = turn_,
                   .attempt = 1,
                   .model = std::string(kModel),
                   .request_digest = digest128("request " + std::to_string(turn_) + "/1"),
                   .message_count = context_messages()});
  phase_ = Phase::kCallModel;
}

void SyntheticSession::step_call_model(SyntheticStep* step) {
  auto threshold = static_cast<uint64_t>(options_.failure_rate * 1000.0);
  if (attempt_ == 1 && rand(1000) < threshold) {
    uint64_t delay = 500 + rand(500);  // base 1000 ms with jitter in [0.5, 1.0]
    step->events.emplace_back(LlmFailed{.turn = turn_,
                                        .attempt = attempt_,
                                        .http_status = 429,
                                        .error = "rate limited",
                                        .category = ErrorCategory::kTransient,
                                        .will_retry = true,
                                        .retry_delay_ms = delay,
                                        .latency_ms = 40 + rand(60)});
    ++attempt_;
    step->events.emplace_back(LlmRequested{
        .turn = turn_,
        .attempt = attempt_,
        .model = std::string(kModel),
        .request_digest = digest128("request " + std::to_string(turn_) + "/" + std::to_string(attempt_)),
        .message_count = context_messages()});
    return;
  }
  LlmResponded r{.turn = turn_, .attempt = attempt_};
  bool last = turn_ >= options_.turns;
  if (last) {
    r.text = "Fixed: the " + words(60) + ". All tests pass now.";
    r.finish_reason = "stop";
    phase_ = Phase::kFinish;
  } else {
    r.text = "Next I will check the " + words(30) + ".";
    for (uint32_t i = 0; i < options_.tool_calls_per_turn; ++i) r.tool_calls.push_back(make_call());
    r.finish_reason = r.tool_calls.empty() ? "stop" : "tool_calls";
    phase_ = r.tool_calls.empty() ? Phase::kCommit : Phase::kRunTools;
  }
  uint64_t out_chars = r.text.size();
  for (const auto& c : r.tool_calls) out_chars += c.args.text.size();
  r.usage.input = (kSystemPromptChars + context_chars_) / 4;
  r.usage.cache_read = r.usage.input / 2;
  r.usage.output = out_chars / 4 + 1;
  r.cost_usd =
      static_cast<double>(r.usage.input) * kInputPrice + static_cast<double>(r.usage.output) * kOutputPrice;
  r.latency_ms = 300 + rand(1500);
  add_message(out_chars);
  calls_ = r.tool_calls;
  call_index_ = 0;
  call_requested_ = false;
  step->events.emplace_back(std::move(r));
}

void SyntheticSession::step_run_tool(SyntheticStep* step) {
  const ToolCall& call = calls_[call_index_];
  if (!call_requested_) {
    step->events.emplace_back(HookDecided{
        .hook_event = "PreToolUse", .hook_name = "policy", .decision = "allow", .tool_call_id = call.id});
    step->events.emplace_back(ToolRequested{call.id, call.name, call.args});
    call_requested_ = true;
    return;
  }
  ToolCompleted done = run_call(call);
  add_message(done.output.size());
  step->events.emplace_back(std::move(done));
  call_requested_ = false;
  if (++call_index_ == calls_.size()) phase_ = Phase::kCommit;
}

void SyntheticSession::step_commit(SyntheticStep* step) {
  step->checkpoint = true;
  phase_ = Phase::kOpenTurn;
  if (options_.context_budget_chars == 0 || context_chars_ <= options_.context_budget_chars) return;
  // Drop the oldest turns (never the task) until three quarters of the budget remain.
  ContextTrimmed trim{.first_index = context_.front().messages, .chars_before = context_chars_};
  while (context_.size() > 2 && context_chars_ > options_.context_budget_chars * 3 / 4) {
    ContextGroup g = context_[1];
    context_.erase(context_.begin() + 1);
    trim.messages_removed += g.messages;
    context_chars_ -= g.chars;
  }
  trim.chars_after = context_chars_;
  if (trim.messages_removed > 0) step->events.emplace_back(trim);
}

bool SyntheticSession::next(SyntheticStep* step) {
  step->events.clear();
  step->checkpoint = false;
  switch (phase_) {
    case Phase::kStart:
      step_start(step);
      return true;
    case Phase::kOpenTurn:
      step_open_turn(step);
      return true;
    case Phase::kCallModel:
      step_call_model(step);
      return true;
    case Phase::kRunTools:
      step_run_tool(step);
      return true;
    case Phase::kCommit:
      step_commit(step);
      return true;
    case Phase::kFinish:
      step->events.emplace_back(
          SessionCompleted{.final_answer = "All tests pass now.", .stop_reason = "final_answer"});
      step->checkpoint = true;
      phase_ = Phase::kDone;
      return true;
    case Phase::kDone:
      return false;
  }
  return false;
}

}  // namespace carapace
