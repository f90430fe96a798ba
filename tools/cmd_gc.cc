// carapace gc: applies the retention policy to a home's provider bodies and
// spans (storage/retention.h). Events are never pruned.
#include <cstdio>
#include <filesystem>
#include <map>

#include "runtime/home.h"
#include "storage/body_store.h"
#include "storage/retention.h"
#include "storage/trace_store.h"
#include "actors/collector/trace_view.h"
#include "tools/cli.h"
#include "tools/cli_run.h"
#include "tools/trace_load.h"

namespace carapace::cli {
namespace {

struct GcArgs {
  std::string config;
  std::string max_age;
  std::string max_body_bytes;
  bool dry_run = false;
};

// "1500", "500K", "200M", "2G" (powers of 1024) → bytes; false on anything else.
bool parse_bytes(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': mult = 1ull << 10; break;
    case 'M': mult = 1ull << 20; break;
    case 'G': mult = 1ull << 30; break;
    case 'T': mult = 1ull << 40; break;
    default: break;
  }
  if (mult != 1) digits.pop_back();
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(digits) * mult;
  return true;
}

uint64_t directory_bytes(const std::string& path) {
  std::error_code ec;
  uint64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

int run_gc(Context& ctx, const GcArgs& args) {
  Config config;
  if (int rc = load_cli_config(ctx, args.config, &config); rc != kExitOk) return rc;
  RetentionPolicy policy{.max_age_us = static_cast<int64_t>(config.retention_max_age_days) * 86400 * 1'000'000,
                         .max_body_bytes = config.retention_max_body_bytes};
  if (!args.max_age.empty()) {
    if (args.max_age == "0") {
      policy.max_age_us = 0;
    } else if (!parse_since(args.max_age, &policy.max_age_us)) {
      return ctx.usage(Status::invalid_argument("--max-age '" + args.max_age + "' is not a duration"),
                      "write it as a number and a unit: 30d, 12h, 90m, 45s (0: no age limit)");
    }
  }
  if (!args.max_body_bytes.empty() && !parse_bytes(args.max_body_bytes, &policy.max_body_bytes)) {
    return ctx.usage(Status::invalid_argument("--max-body-bytes '" + args.max_body_bytes + "' is not a size"),
                    "write it in bytes, or with K, M, G or T (powers of 1024): 500M, 2G (0: no size limit)");
  }

  // The log's writer lock: no process can be about to reference a body or
  // grow a session while gc decides.
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;
  std::vector<SessionMeta> sessions;
  if (int rc = ctx.list_every_session(*log, "gc removes nothing while it cannot tell what the log references",
                                      &sessions);
      rc != kExitOk) {
    return rc;
  }
  RetentionInputs in{.now_us = now_us()};
  std::map<std::string, int64_t> updated;
  const bool progress_lines = !ctx.json && sessions.size() >= 200;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const SessionMeta& meta = sessions[i];
    updated[meta.id] = std::max(meta.updated_us, meta.created_us);
    std::vector<Event> events;
    Status read = log->read(meta.id, 1, UINT64_MAX, &events);
    if (!read.ok()) {
      return ctx.fail(read.with_context("reading session " + meta.id),
                      "`carapace verify " + meta.id + "` lists the damage; gc removes nothing until it can read "
                      "every session");
    }
    for (const Event& e : events) {
      const std::string& ref = body_ref_of(e);
      if (ref.empty()) continue;
      int64_t& last = in.last_referenced_us.try_emplace(ref, e.ts_us).first->second;
      last = std::max(last, e.ts_us);
    }
    if (progress_lines && (i + 1) % 200 == 0) {
      std::fprintf(stderr, "gc: read %zu of %zu sessions\n", i + 1, sessions.size());
    }
  }

  const std::string bodies_path = ctx.home() + "/bodies", traces_path = ctx.home() + "/traces";
  std::unique_ptr<BodyStore> bodies;
  std::error_code ec;
  if (std::filesystem::exists(bodies_path + "/CURRENT", ec)) {
    if (Status s = BodyStore::open(bodies_path, BodyStore::Mode::kWriter, &bodies); !s.ok()) return ctx.fail(s);
    std::vector<std::pair<std::string, uint64_t>> listed;
    if (Status s = bodies->list(&listed); !s.ok()) return ctx.fail(s);
    for (auto& [ref, bytes] : listed) in.bodies.push_back(StoredBody{.ref = ref, .bytes = bytes});
  }
  std::unique_ptr<TraceStore> traces;
  if (std::filesystem::exists(traces_path + "/CURRENT", ec)) {
    Status s = TraceStore::open(traces_path, TraceStore::Mode::kWriter, &traces);
    if (s.is_busy()) return ctx.fail(s, "a `carapace collector` holds the trace store: stop it, then run gc again");
    if (!s.ok()) return ctx.fail(s);
    std::vector<std::pair<std::string, TraceProgress>> progress;
    if (Status p = traces->all_progress(&progress); !p.ok()) return ctx.fail(p);
    for (const auto& [id, p] : progress) {
      bool stored = false;
      auto first_answers = [&](std::string_view) {
        stored = true;
        return false;
      };
      if (Status v = traces->scan_spans(id, first_answers); !v.ok()) {
        return ctx.fail(v);
      }
      if (!stored) continue;  // nothing stored (or pruned before)
      auto it = updated.find(id);
      in.session_updated_us[id] = std::max(p.updated_us, it == updated.end() ? 0 : it->second);
    }
  }

  RetentionPlan plan = plan_retention(policy, in);
  const uint64_t disk_before = directory_bytes(bodies_path) + directory_bytes(traces_path);
  uint64_t spans_removed = 0;
  if (!args.dry_run) {
    std::vector<std::string> refs;
    for (const auto& b : plan.bodies) refs.push_back(b.ref);
    if (bodies) {
      if (Status s = bodies->remove(refs); !s.ok()) return ctx.fail(s.with_context("removing bodies"));
    }
    if (traces) {
      if (Status s = traces->remove_spans(plan.span_sessions, &spans_removed); !s.ok()) {
        return ctx.fail(s.with_context("removing spans"));
      }
    }
  }
  bodies.reset();
  traces.reset();
  const uint64_t disk_after = directory_bytes(bodies_path) + directory_bytes(traces_path);

  const std::string verb = args.dry_run ? "would remove " : "removed ";
  std::string summary = verb + count(plan.bodies.size(), "body") + " (" + format_bytes(plan.body_bytes_removed) +
                        (plan.unreferenced ? ", " + std::to_string(plan.unreferenced) + " referenced by no event" : "") +
                        "), kept " + count(in.bodies.size() - plan.bodies.size(), "body") + " (" +
                        format_bytes(plan.body_bytes_kept) + "); " + verb + "the spans of " +
                        count(plan.span_sessions.size(), "session") +
                        (args.dry_run ? "" : " (" + count(spans_removed, "span") + ")") + "; events are never pruned";
  if (ctx.json) {
    nlohmann::json removed = nlohmann::json::array();
    for (const auto& b : plan.bodies) removed.push_back({{"ref", b.ref}, {"bytes", b.bytes}});
    ctx.print_success({{"dry_run", args.dry_run},
                       {"policy", {{"max_age_us", policy.max_age_us}, {"max_body_bytes", policy.max_body_bytes}}},
                       {"bodies_removed", removed},
                       {"body_bytes_removed", plan.body_bytes_removed},
                       {"body_bytes_kept", plan.body_bytes_kept},
                       {"bodies_unreferenced", plan.unreferenced},
                       {"span_sessions", plan.span_sessions},
                       {"spans_removed", spans_removed},
                       {"disk_bytes_before", disk_before},
                       {"disk_bytes_after", disk_after}},
                      summary);
  } else {
    std::printf("%s\n", summary.c_str());
    if (!args.dry_run) {
      std::printf("bodies and traces on disk: %s before, %s after\n", format_bytes(disk_before).c_str(),
                  format_bytes(disk_after).c_str());
    }
  }
  return kExitOk;
}

}  // namespace

void register_gc_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<GcArgs>();
  auto* cmd = app.add_subcommand(
      "gc", "Apply the retention policy: remove old provider bodies and spans (never events); needs the home to itself");
  cmd->add_option("--max-age", args->max_age,
                  "Remove bodies last referenced, and spans of sessions last updated, longer ago than this (30d, "
                  "12h; 0: no limit; default: retention.max_age_days, 30)");
  cmd->add_option("--max-body-bytes", args->max_body_bytes,
                  "Then remove the bodies referenced longest ago until the rest fit (500M, 2G; default: "
                  "retention.max_body_bytes, no limit)");
  cmd->add_flag("--dry-run", args->dry_run, "Say what would be removed; remove nothing");
  cmd->add_option("--config", args->config, "Config file (default: $CARAPACE_HOME/config.json if it exists)");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_gc(ctx, *args); }; });
}

}  // namespace carapace::cli
