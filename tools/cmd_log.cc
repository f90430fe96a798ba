// carapace log synth | show
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "events/event_json.h"
#include "events/event_summary.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "storage/synthetic_writer.h"
#include "tools/trace_load.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct SynthArgs {
  std::string session;
  uint64_t sessions = 1;
  std::string spread;  // sessions dated back over this window
  uint64_t turns = 0;
  uint32_t tool_calls = 2;
  uint64_t seed = 1;
  uint64_t snapshot_every = 100;
  uint64_t context_budget = 400'000;
  uint32_t output_bytes = 600;
};

int run_synth(Context& ctx, const SynthArgs& args) {
  // One session: the id given or a new one. Several: that id (or a new
  // one) with -1, -2, ... appended, written by this one process.
  const std::string base = args.session.empty() ? keys::generate_session_id("synth") : args.session;
  auto id_of = [&](uint64_t k) { return args.sessions == 1 ? base : base + "-" + std::to_string(k + 1); };
  for (uint64_t k : {uint64_t{0}, args.sessions - 1}) {
    Status valid = keys::validate_session_id(id_of(k));
    if (!valid.ok()) return ctx.fail(valid);
  }
  int64_t spread_us = 0;
  if (!args.spread.empty() && !parse_since(args.spread, &spread_us)) {
    return ctx.usage(Status::invalid_argument("--spread '" + args.spread + "' is not a duration"),
                     "e.g. --spread 30d");
  }
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;

  SyntheticOptions options{.turns = args.turns,
                           .tool_calls_per_turn = args.tool_calls,
                           .seed = args.seed,
                           .context_budget_chars = args.context_budget,
                           .tool_output_bytes = args.output_bytes};
  JournalOptions journal{.snapshot_every_turns = args.snapshot_every};  // its clock changes per session with --spread
  const bool show_progress = !ctx.json && isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  auto last_print = start;
  SyntheticWriteStats stats;  // of all the sessions
  for (uint64_t k = 0; k < args.sessions; ++k) {
    const std::string id = id_of(k);
    if (spread_us > 0) {
      // Session k of N starts (N - k) / N of the window ago, and its clock runs from there.
      const int64_t now = system_clock_us();
      const int64_t begins =
          now - static_cast<int64_t>(static_cast<double>(spread_us) * static_cast<double>(args.sessions - k) /
                                     static_cast<double>(args.sessions));
      journal.clock = [begins, now] { return begins + (system_clock_us() - now); };
    }
    SyntheticWriteStats one;
    Status s = write_synthetic_session(log.get(), id, options, journal, &one, [&](const SyntheticWriteStats& st) {
      auto now = std::chrono::steady_clock::now();
      if (show_progress && now - last_print > std::chrono::milliseconds(200)) {
        last_print = now;
        std::fprintf(stderr, "\r  writing %s (session %llu/%llu): turn %llu/%llu, %llu events", id.c_str(),
                     static_cast<unsigned long long>(k + 1), static_cast<unsigned long long>(args.sessions),
                     static_cast<unsigned long long>(st.turns), static_cast<unsigned long long>(args.turns),
                     static_cast<unsigned long long>(stats.events + st.events));
      }
    });
    if (!s.ok()) {
      if (show_progress) std::fprintf(stderr, "\r\033[K");
      return ctx.fail(s, "the events written before the failure are intact; `carapace verify " + id +
                             "` checks them" + (k > 0 ? " (and the " + count(k, "session") + " before it are whole)" : ""));
    }
    stats.events += one.events;
    stats.turns += one.turns;
    stats.checkpoints += one.checkpoints;
  }
  if (show_progress) std::fprintf(stderr, "\r\033[K");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string what = args.sessions == 1 ? "session " + base : count(args.sessions, "session") + " " + id_of(0) +
                                                                        " to " + id_of(args.sessions - 1);
  std::string summary = "wrote " + what + ": " + count(stats.events, "event") + ", " + count(stats.turns, "turn") +
                        ", " + count(stats.checkpoints, "checkpoint");
  if (ctx.json) {
    nlohmann::json data = {{"session", id_of(0)},
                           {"sessions", args.sessions},
                           {"events", stats.events},
                           {"turns", stats.turns},
                           {"checkpoints", stats.checkpoints},
                           {"elapsed_ms", ms},
                           {"home", ctx.home()}};
    ctx.print_success(data, summary);
  } else {
    char elapsed[32];
    std::snprintf(elapsed, sizeof elapsed, " in %.0f ms", ms);
    std::cout << summary << elapsed << "\n"
              << "  look at it:  " << ctx.shown(ctx.with_home("carapace log show " + id_of(0))) << "\n";
  }
  return kExitOk;
}

struct ShowArgs {
  std::string session;
  uint64_t from = 1;
  uint64_t to = UINT64_MAX;
  std::string type;
  bool bodies = false;
};

// The body an event references (llm.requested, llm.responded, llm.failed), or "".
// Reads referenced bodies from the home's body store (opened on first use).
class BodyReader {
 public:
  explicit BodyReader(std::string path) : path_(std::move(path)) {}

  // The body, or why there is none (*found false).
  std::string get(const std::string& ref, bool* found) {
    *found = false;
    if (!opened_) {
      opened_ = true;
      open_status_ = BodyStore::open(path_, BodyStore::Mode::kReader, &store_);
    }
    if (!open_status_.ok()) return open_status_.message();
    std::string body;
    Status s = store_->get(ref, &body);
    if (!s.ok()) return s.message();
    *found = true;
    return body;
  }

 private:
  std::string path_;
  bool opened_ = false;
  Status open_status_;
  std::unique_ptr<BodyStore> store_;
};

// A body under its event line, each of its lines indented.
void print_body(const std::string& ref, BodyReader& reader, const Context& ctx) {
  bool found = false;
  std::string body = reader.get(ref, &found);
  const size_t bytes = body.size();
  body = ctx.shown(body);
  if (!found) {
    std::printf("        (body %s: %s)\n", ref.c_str(), body.c_str());
    return;
  }
  std::printf("        body %s, %zu bytes:\n", ref.c_str(), bytes);
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::printf("        | %.*s\n", static_cast<int>(end - at), body.data() + at);
    at = end + 1;
  }
}

std::string offset(int64_t ts_us, int64_t base_us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%.3fs", static_cast<double>(ts_us - base_us) / 1e6);
  return buf;
}

int run_show(Context& ctx, const ShowArgs& args) {
  Status valid = keys::validate_session_id(args.session);
  if (!valid.ok()) return ctx.fail(valid);
  if (!args.type.empty() && !event_type_from_name(args.type)) {
    return ctx.usage(Status::invalid_argument("--type '" + args.type + "' is not an event type"),
                    "types look like llm.responded or tool.completed");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  uint64_t last = 0;
  Status s = log->last_seq(args.session, &last);
  if (s.ok() && last == 0) {
    return ctx.fail(Status::not_found("no session '" + args.session + "' in " + ctx.home()),
                    "`carapace sessions` lists the sessions there");
  }
  if (!s.ok()) return ctx.fail(s);
  if (args.from > last || args.to < args.from) {
    ctx.fail(Status::invalid_argument(
                 args.from > last
                     ? "--from " + std::to_string(args.from) + " is past the last event of session " +
                           args.session + ", seq " + std::to_string(last)
                     : "--to " + std::to_string(args.to) + " is before --from " + std::to_string(args.from)),
             "seqs of " + args.session + " run from 1 to " + std::to_string(last));
    return kExitUsage;
  }

  nlohmann::json events = nlohmann::json::array();
  BodyReader bodies(ctx.home() + "/bodies");
  int64_t base_us = 0;
  uint64_t shown = 0;
  Status problem;
  // Seqs run 1, 2, 3...: a missing record is reported where it would be and
  // fails the command once the rest is shown.
  nlohmann::json gaps = nlohmann::json::array();
  std::string first_gap;
  uint64_t expected = 1;
  auto cursor = log->cursor(args.session, 1);
  for (; cursor->valid() && cursor->seq() <= args.to; cursor->next()) {
    if (cursor->seq() != expected) {
      uint64_t from = expected, to = cursor->seq() - 1;
      std::string what = from == to ? "seq " + std::to_string(from) + " is missing"
                                     : "seq " + std::to_string(from) + " to " + std::to_string(to) + " are missing";
      if (first_gap.empty()) first_gap = what;
      gaps.push_back({{"from", from}, {"to", to}});
      if (!ctx.json && to >= args.from) std::printf("     -  %10s  %-18s %s\n", "", "(gap)", what.c_str());
    }
    expected = cursor->seq() + 1;
    Event e;
    Status decoded = cursor->event(&e);
    if (!decoded.ok()) {
      problem = decoded;
      break;
    }
    if (base_us == 0) base_us = e.ts_us;
    if (e.seq < args.from || (!args.type.empty() && e.type_name() != args.type)) continue;
    ++shown;
    std::string ref = args.bodies ? body_ref_of(e) : "";
    if (ctx.json) {
      events.push_back(event_to_json(e));
      if (!ref.empty()) {
        bool found = false;
        std::string body = bodies.get(ref, &found);
        events.back()[found ? "body" : "body_error"] = body;
      }
      redact_json(events.back(), ctx.redactor());
    } else {
      std::printf("%6llu  %10s  %-18s %s\n", static_cast<unsigned long long>(e.seq),
                  offset(e.ts_us, base_us).c_str(), std::string(e.type_name()).c_str(),
                  ctx.shown(event_summary(e)).c_str());
      if (!ref.empty()) print_body(ref, bodies, ctx);
    }
  }
  if (problem.ok()) problem = cursor->status();
  std::string summary = count(shown, "event") + " of session " + args.session;
  SessionMeta meta;
  const uint64_t imported = log->get_meta(args.session, &meta).ok() ? meta.imported_seq : 0;
  if (problem.ok() && !gaps.empty()) {
    problem = Status::corruption("session " + args.session + ": " + first_gap +
                                 (gaps.size() > 1 ? " (and " + std::to_string(gaps.size() - 1) + " more gaps)" : ""));
    if (ctx.json) {
      print_redacted(ctx, {{"success", false},
                         {"data", {{"session", args.session}, {"events", events}, {"gaps", gaps}}},
                         {"error", {{"code", "corruption"}, {"message", problem.message()}}}});
      return kExitFailed;
    }
    std::fflush(stdout);
    return ctx.fail(problem, "every record shown is intact; `carapace verify " + args.session +
                                 "` reports the damage, `carapace repair` cannot bring back a record that is gone");
  }
  if (!problem.ok()) {
    if (!ctx.json) std::fflush(stdout);
    return ctx.fail(problem, "the events above it are intact; `carapace verify " + args.session +
                                 "` reports every damaged record");
  }
  if (ctx.json) {
    ctx.print_success({{"session", args.session}, {"events", events}, {"imported_seq", imported}}, summary);
  } else if (base_us != 0) {
    std::printf(
        "%s, started %s%s\n", summary.c_str(), local_time(base_us).c_str(),
        imported > 0 ? ("; seq 1 to " + std::to_string(imported) + " imported from a bundle").c_str() : "");
  }
  return kExitOk;
}

}  // namespace

void register_log_commands(CLI::App& app, Context& ctx) {
  auto* log = app.add_subcommand("log", "Write and read session event logs");
  log->require_subcommand(1);

  auto synth_args = std::make_shared<SynthArgs>();
  auto* synth = log->add_subcommand(
      "synth",
      "Write a realistic synthetic session (a testing and benchmarking aid: no model, no tools run)");
  synth->add_option("--session", synth_args->session, "Session id (default: synth-<time>-<random>)");
  synth->add_option("--sessions", synth_args->sessions,
                    "Write this many sessions, <id>-1 to <id>-N, in one process (a home with many sessions)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{10'000'000}));
  synth->add_option("--spread", synth_args->spread,
                    "Date the sessions back evenly over this window, the newest now: 90m, 24h, 30d (default: now)");
  synth->add_option("--turns", synth_args->turns, "Turns to write")
      ->required()
      ->check(CLI::Range(1, 10'000'000));
  synth->add_option("--tool-calls", synth_args->tool_calls, "Tool calls per turn")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  synth->add_option("--seed", synth_args->seed, "Seed of the generator")->capture_default_str();
  synth
      ->add_option("--snapshot-every", synth_args->snapshot_every,
                   "A snapshot at most every K turns, as session.snapshot_every_turns (0: never)")
      ->capture_default_str();
  synth
      ->add_option("--context-budget", synth_args->context_budget,
                   "Trim the oldest turns past this many characters (0: never)")
      ->capture_default_str();
  synth->add_option("--output-bytes", synth_args->output_bytes, "Typical tool output size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  add_json_flag(synth, ctx);
  synth->callback(
      [&ctx, synth_args] { ctx.run = [&ctx, synth_args] { return run_synth(ctx, *synth_args); }; });

  auto show_args = std::make_shared<ShowArgs>();
  auto* show = log->add_subcommand("show", "Print a session's events in order, one line each");
  show->add_option("session", show_args->session, "Session id")->required();
  show->add_option("--from", show_args->from, "First seq to show")
      ->capture_default_str()
      ->check(whole_number_from(1));
  show->add_option("--to", show_args->to, "Last seq to show")->check(whole_number_from(1));
  show->add_option("--type", show_args->type, "Only events of this type (e.g. tool.completed)");
  show->add_flag("--bodies", show_args->bodies,
                 "Print the verbatim provider request and response bodies the events reference");
  add_json_flag(show, ctx);
  show->callback([&ctx, show_args] { ctx.run = [&ctx, show_args] { return run_show(ctx, *show_args); }; });
}

}  // namespace carapace::cli
