// carapace bundle <id> -o FILE; carapace bundle import FILE [--as ID]
#include <cstdio>

#include "replay/bundle.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "tools/cli.h"

namespace carapace::cli {
namespace {

struct BundleArgs {
  std::string session;
  std::string output;
  std::string input;
  std::string as;
  bool with_bodies = false;
};

int run_bundle(Context& ctx, const BundleArgs& args) {
  if (args.session.empty()) {
    return ctx.usage(Status::invalid_argument("name the session to bundle"), "carapace bundle <id> -o run.bundle");
  }
  if (Status valid = keys::validate_session_id(args.session); !valid.ok()) return ctx.fail(valid);
  if (args.output.empty()) {
    return ctx.usage(Status::invalid_argument("say where the bundle goes"), "carapace bundle <id> -o run.bundle");
  }
  auto log = ctx.open_log(EventLog::Mode::kReader);
  if (!log) return kExitFailed;
  std::unique_ptr<BodyStore> bodies;
  if (args.with_bodies) {
    Status opened = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kReader, &bodies);
    if (!opened.ok() && !opened.is_not_found()) return ctx.fail(opened);
  }
  // No body store (no HTTP session ever ran here): every referenced body is missing.
  BundleWritten written;
  Status s = write_bundle(*log, args.session, args.output, args.with_bodies, bodies.get(), &written);
  if (s.is_not_found()) return ctx.fail(s, "`carapace sessions` lists the sessions there");
  if (!s.ok()) return ctx.fail(s);
  std::string summary = "wrote " + count(written.events, "event");
  if (args.with_bodies) summary += " and " + count(written.bodies, "body");
  summary += " of " + args.session + " to " + args.output + " (" + std::to_string(written.bytes) + " bytes)";
  if (written.missing_bodies > 0) {
    summary += "; " + count(written.missing_bodies, "referenced body") + " not in this home's body store";
  }
  if (ctx.json) {
    nlohmann::json data{{"session", args.session}, {"events", written.events}, {"file", args.output},
                        {"bytes", written.bytes}};
    if (args.with_bodies) {
      data["bodies"] = written.bodies;
      data["missing_bodies"] = written.missing_bodies;
    }
    ctx.print_success(data, summary);
  } else {
    std::printf("%s\n", summary.c_str());
  }
  return kExitOk;
}

int run_import(Context& ctx, const BundleArgs& args) {
  Bundle bundle;
  if (Status s = read_bundle(args.input, &bundle); !s.ok()) return ctx.fail(s);
  const std::string id = args.as.empty() ? bundle.session : args.as;
  if (Status valid = keys::validate_session_id(id); !valid.ok())
    return ctx.fail(valid, "pick another id with --as ID");
  // Refused before the home is opened: a refused import writes nothing.
  if (Status s = check_bundle(bundle, id); !s.ok()) {
    return ctx.fail(s, "`carapace verify` would reject this session; the bundle was damaged or forged");
  }
  auto log = ctx.open_log(EventLog::Mode::kWriter);
  if (!log) return kExitFailed;
  std::unique_ptr<BodyStore> bodies;
  if (!bundle.bodies.empty()) {
    if (Status s = BodyStore::open(ctx.home() + "/bodies", BodyStore::Mode::kWriter, &bodies); !s.ok()) {
      return ctx.fail(s);
    }
  }
  if (Status s = import_bundle(log.get(), bundle, args.as, bodies.get(), /*checked=*/true); !s.ok()) {
    return ctx.fail(s);
  }
  std::string summary = "imported " + id + " (" + count(bundle.events.size(), "event");
  if (!bundle.bodies.empty()) summary += ", " + count(bundle.bodies.size(), "body");
  summary += ") from " + args.input;
  if (ctx.json) {
    ctx.print_success({{"session", id}, {"events", bundle.events.size()}, {"bodies", bundle.bodies.size()}},
                      summary);
  } else {
    std::printf("%s\n", summary.c_str());
    std::fprintf(stderr,
                 "  its recorded configuration is kept as a record only: `carapace resume` and `fork` run it "
                 "with this home's (they list what differs; --trust-bundle-config uses the bundle's)\n");
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
  cmd->add_flag("--with-bodies", args->with_bodies,
                "Also carry the verbatim provider request and response bodies the session references");
  add_json_flag(cmd, ctx);
  cmd->callback([&ctx, args, cmd] {
    if (cmd->got_subcommand("import")) return;
    ctx.run = [&ctx, args] { return run_bundle(ctx, *args); };
  });
  auto* import =
      cmd->add_subcommand("import",
                          "Add a bundle's session to this home, refused unless it verifies (then log "
                          "show, resume, fork and replay work on it; its configuration is a record "
                          "only, see --trust-bundle-config)");
  import->add_option("file", args->input, "The bundle file")->required()->check(CLI::ExistingFile);
  import->add_option("--as", args->as, "Import under this id instead of the bundle's");
  add_json_flag(import, ctx);
  import->callback([&ctx, args] { ctx.run = [&ctx, args] { return run_import(ctx, *args); }; });
}

}  // namespace carapace::cli
