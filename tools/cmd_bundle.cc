// carapace bundle <id> -o FILE; carapace bundle import FILE [--as ID]
#include <cstdio>

#include "replay/bundle.h"
#include "storage/keys.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct BundleArgs {
  std::string session;
  std::string output;
  std::string input;
  std::string as;
};

int run_bundle(Context& ctx, const BundleArgs& args) {
  if (args.session.empty()) {
    return ctx.fail(Status::invalid_argument("name the session to bundle"), "carapace bundle <id> -o run.bundle");
  }
  if (Status valid = keys::validate_session_id(args.session); !valid.ok()) return ctx.fail(valid);
  if (args.output.empty()) {
    return ctx.fail(Status::invalid_argument("say where the bundle goes"), "carapace bundle <id> -o run.bundle");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  Status s = write_bundle(*log, args.session, args.output);
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (!s.ok()) return ctx.fail(s);
  uint64_t last = 0;
  (void)log->last_seq(args.session, &last);
  std::string summary = "wrote " + count(last, "event") + " of " + args.session + " to " + args.output;
  if (ctx.json) {
    ctx.print_success({{"session", args.session}, {"events", last}, {"file", args.output}}, summary);
  } else {
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

int run_import(Context& ctx, const BundleArgs& args) {
  Bundle bundle;
  if (Status s = read_bundle(args.input, &bundle); !s.ok()) return ctx.fail(s);
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;
  const std::string id = args.as.empty() ? bundle.session : args.as;
  if (Status s = import_bundle(log.get(), bundle, args.as); !s.ok()) return ctx.fail(s);
  std::string summary = "imported " + id + " (" + count(bundle.events.size(), "event") + ") from " + args.input;
  if (ctx.json) {
    ctx.print_success({{"session", id}, {"events", bundle.events.size()}}, summary);
  } else {
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

}  // namespace

void register_bundle_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BundleArgs>();
  auto* cmd = app.add_subcommand(
      "bundle",
      "Write a session to one self-contained file (events, its config and scenario; no credentials), to replay "
      "or import elsewhere");
  cmd->add_option("session", args->session, "Session id");
  cmd->add_option("-o,--output", args->output, "The bundle file to write");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args, cmd] {
    if (cmd->got_subcommand("import")) return;
    ctx.run = [&ctx, args] { return run_bundle(ctx, *args); };
  });
  auto* import = cmd->add_subcommand("import", "Add a bundle's session to this home (then verify, log show, "
                                               "resume, fork and replay work on it)");
  import->add_option("file", args->input, "The bundle file")->required()->check(CLI::ExistingFile);
  import->add_option("--as", args->as, "Import under this id instead of the bundle's");
  add_json_flag(import, ctx);
  import->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_import(ctx, *args); }; });
}

}  // namespace carapace::cli
