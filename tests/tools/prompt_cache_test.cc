// Prompt-cache observability end to end, for both providers: sessions of
// the real `carapace` binary against a loopback server whose cache-token
// counts come from a prefix check on the bytes it received
// (tests/support/prompt_cache_sim.h). Breakpoints and the cache key sent,
// the tokens parsed and priced, the hit ratio in `trace stats`, the regions
// in `trace span`, and the busts, lapses and misses `trace analyze` and
// `trace diff --request` name.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "tests/support/cli_home.h"
#include "tests/support/fake_model.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/prompt_cache_sim.h"

using namespace carapace;
using nlohmann::json;
namespace bdata = boost::unit_test::data;

namespace {

using testing::contains;
using testing::CacheUsage;

struct CacheFixture : testing::CliHome {
  std::string ws = dir.sub("ws");
  testing::MockLlmServer server;
  std::mutex mu;
  std::vector<CacheUsage> usages;  // what the server reported, per request

  CacheFixture() { std::filesystem::create_directories(ws); }

  // The server answers as FakeModel does, with the simulated cache's counts.
  void serve(const std::string& format, std::shared_ptr<testing::PromptCacheSim> sim,
             const std::string& shell_command = "cat note.txt") {
    server.set_handler([this, format, sim, shell_command](const testing::MockRequest& r, size_t) {
      testing::FakeModel model{.format = format, .shell_command = shell_command};
      testing::WireAnswer a = model.answer(testing::read_conversation(format, r.body));
      CacheUsage u = sim->usage_for(r.body);
      a.input = u.input;
      a.cache_read = u.cache_read;
      a.cache_write = u.cache_write;
      {
        std::lock_guard lock(mu);
        usages.push_back(u);
      }
      return testing::MockReply{.headers = {"Content-Type: text/event-stream"},
                                .body = format == "openai" ? openai_stream(a) : anthropic_stream(a)};
    });
  }

  // A config for `format` with a long stable system prompt (past the 1,024
  // tokens providers cache at least), the given cache settings and hooks.
  std::string config(const std::string& format, const json& cache, const json& hooks = json::array()) {
    std::string instructions;
    for (int i = 0; instructions.size() < 6000; ++i) {
      instructions += "Rule " + std::to_string(i) + ": keep every note short, plain and true. ";
    }
    json provider = {{"name", format}, {"model", "model-x"}, {"base_url", server.url()}};
    if (!cache.is_null()) provider["cache"] = cache;
    json c = {{"provider", provider},
              {"session", {{"instructions", instructions}}},
              {"hooks", hooks},
              {"prices",
               {{"model-x",
                 {{"input_per_mtok", 3.0}, {"output_per_mtok", 15.0}, {"cache_read_per_mtok", 0.3},
                  {"cache_write_per_mtok", 3.75}}}}}};
    return file("config.json", c.dump(2));
  }

  void run_session(const std::string& cfg, const std::string& id) {
    testing::CliResult r = run("run 'remember apples' --config " + cfg + " --session " + id + " --workspace " + ws);
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
  }

  // The seqs of the session's model requests, in order.
  std::vector<uint64_t> llm_seqs(const std::string& id) {
    json show = run_json("trace show " + id);
    std::vector<uint64_t> out;
    for (const auto& s : show["data"]["spans"]) {
      if (s["kind"] == "llm") out.push_back(s["open_seq"].get<uint64_t>());
    }
    return out;
  }

  size_t requests_size(size_t i) { return server.requests().at(i).body.size(); }

  json findings(const std::string& id, const std::string& extra = "") {
    json j = run_json("trace analyze " + id + extra);
    json out = json::array();
    for (const auto& f : j["data"]["sessions"][0]["findings"]) {
      std::string p = f["pattern"];
      if (p == "cache_bust" || p == "ttl_lapse" || p == "provider_miss" || p == "cache_off") out.push_back(f);
    }
    return out;
  }
};

const std::vector<std::string> kFormats = {"anthropic", "openai"};

json cache_settings(const std::string& format) {
  return format == "anthropic" ? json{{"tools", true}, {"system", true}, {"last_messages", 2}}
                               : json{{"prompt_cache_key", "carapace-test"}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(prompt_cache)

BOOST_DATA_TEST_CASE_F(CacheFixture, breakpoints_are_sent_hits_are_counted_priced_and_nothing_is_flagged,
                       bdata::make(kFormats), format) {
  serve(format, std::make_shared<testing::PromptCacheSim>(format));
  run_session(config(format, cache_settings(format)), "c");
  auto requests = server.requests();
  BOOST_REQUIRE(requests.size() == 3u);
  for (const auto& r : requests) {
    json b = json::parse(r.body);
    if (format == "anthropic") {
      BOOST_TEST(b["system"][0]["cache_control"] == json({{"type", "ephemeral"}}));
      BOOST_TEST(b["tools"].back().contains("cache_control"));
      BOOST_TEST(!b["tools"][0].contains("cache_control"));
      size_t marked = 0;
      for (const auto& m : b["messages"]) marked += m["content"].back().contains("cache_control") ? 1 : 0;
      BOOST_TEST(marked == std::min<size_t>(2, b["messages"].size()));
      BOOST_TEST(b["messages"].back()["content"].back().contains("cache_control"));
    } else {
      BOOST_TEST(b["prompt_cache_key"] == "carapace-test");
    }
  }
  // The server's prefix check: every request after the first read the cache.
  BOOST_REQUIRE(usages.size() == 3u);
  BOOST_TEST(usages[0].cache_read == 0u);
  BOOST_TEST(usages[1].cache_read > 1024u);
  BOOST_TEST(usages[2].cache_read > usages[1].cache_read);
  if (format == "anthropic") BOOST_TEST(usages[0].cache_write > 1024u);

  // Recorded as the server counted them, priced at the cached prices.
  uint64_t in = 0, read = 0, write = 0;
  for (const auto& u : usages) {
    in += u.input;
    read += u.cache_read;
    write += u.cache_write;
  }
  json stats = run_json("trace stats c");
  const json& t = stats["data"]["totals"];
  BOOST_TEST(t["tokens_in"] == in);
  BOOST_TEST(t["cache_read"] == read);
  BOOST_TEST(t["cache_write"] == write);
  BOOST_TEST(t["cache_hit_ratio"].get<double>() ==
                 static_cast<double>(read) / static_cast<double>(in + read + write),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(t["cache_hit_ratio"].get<double>() > 0.3);
  const double output = static_cast<double>(t["tokens_out"].get<uint64_t>());
  BOOST_TEST(t["cost_usd"].get<double>() ==
                 (in * 3.0 + output * 15.0 + read * 0.3 + write * 3.75) / 1e6,
             boost::test_tools::tolerance(1e-9));
  testing::CliResult text = run("trace stats c --group-by model");
  BOOST_TEST_MESSAGE("$ carapace trace stats c --group-by model\n" << text.out);  // docs/trace.md's example
  BOOST_TEST(contains(text.out, "% of input from cache"), text.out);
  json by_model = run_json("trace stats --since 1h --group-by model");
  BOOST_TEST(by_model["data"]["groups"][0]["key"] == "model-x");
  BOOST_TEST(by_model["data"]["groups"][0]["cache_hit_ratio"] == t["cache_hit_ratio"]);

  // The regions of the second request, from the bytes sent.
  auto seqs = llm_seqs("c");
  BOOST_REQUIRE(seqs.size() == 3u);
  json span = run_json("trace span c " + std::to_string(seqs[1]));
  const json& cache = span["data"]["cache"];
  BOOST_TEST(cache["format"] == format);
  std::vector<std::string> names;
  for (const auto& r : cache["regions"]) names.push_back(r["name"]);
  BOOST_REQUIRE(names.size() >= 4u);
  BOOST_TEST(names[0] == "tools");
  BOOST_TEST(names[1] == "system");
  BOOST_TEST(cache["cacheable_regions"] == names.size());  // the last message carries a breakpoint / automatic
  if (format == "anthropic") {
    BOOST_TEST(cache["regions"][0]["breakpoint"] == true);
    BOOST_TEST(cache["ttl"] == "5m");
  } else {
    BOOST_TEST(cache["prompt_cache_key"] == "carapace-test");
  }
  testing::CliResult shown = run("trace span c " + std::to_string(seqs[1]));
  BOOST_TEST(contains(shown.out, "cache regions (" + format + "): cacheable through messages["), shown.out);
  BOOST_TEST_MESSAGE("$ carapace trace span c " << seqs[1] << "\n" << shown.out.substr(0, shown.out.find("request body")));

  // The OTLP export carries each request's prefix fingerprint.
  json otlp = json::parse(run("trace export c --format otlp").out);
  std::vector<std::string> exported;
  for (const auto& sp : otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
    for (const auto& a : sp["attributes"]) {
      if (a["key"] == "carapace.cache_prefix_fingerprint") exported.push_back(a["value"]["stringValue"]);
    }
  }
  BOOST_REQUIRE(exported.size() == 3u);
  const bool exported_it =
      std::find(exported.begin(), exported.end(), cache["prefix_fingerprint"].get<std::string>()) != exported.end();
  BOOST_TEST(exported_it);

  // So does the collector's live OTLP stream (here: a store folded again from the log).
  testing::MockLlmServer receiver;
  receiver.set_handler([](const testing::MockRequest&, size_t) {
    return testing::MockReply{.headers = {"Content-Type: application/json"}, .body = "{}", .chunked = false};
  });
  std::filesystem::remove_all(home() + "/traces");
  testing::CliResult streamed = run("collector --once --otlp-endpoint " + receiver.url());
  BOOST_TEST(streamed.code == 0, streamed.err);
  std::string received;
  for (const auto& r : receiver.requests()) received += r.body;
  BOOST_TEST(contains(received, "\"carapace.cache_prefix_fingerprint\""), received.substr(0, 300));
  BOOST_TEST(contains(received, cache["prefix_fingerprint"].get<std::string>()));

  // A conversation that only grows, read from the cache each time: clean.
  BOOST_TEST(findings("c").empty(), findings("c").dump());
}

BOOST_DATA_TEST_CASE_F(CacheFixture, a_timestamp_a_hook_puts_in_the_system_prompt_is_named_with_its_bytes,
                       bdata::make(kFormats), format) {
  serve(format, std::make_shared<testing::PromptCacheSim>(format));
  json hook = {{"name", "clock"},
               {"event", "TurnStart"},
               {"command",
                {"/bin/sh", "-c",
                 "printf '{\"decision\":\"system_message\",\"message\":\"The time is %s.\"}' \"$(date +%s%N)\""}}};
  run_session(config(format, cache_settings(format), json::array({hook})), "t");
  BOOST_REQUIRE(usages.size() == 3u);
  // The server saw no prefix past the tools that it had seen before.
  for (const auto& u : usages) BOOST_TEST(u.cache_read < 1024u);

  auto seqs = llm_seqs("t");
  BOOST_REQUIRE(seqs.size() == 3u);
  json fs = findings("t");
  BOOST_REQUIRE_MESSAGE(fs.size() == 2u, fs.dump(2));
  for (size_t i = 0; i < 2; ++i) {
    BOOST_TEST(fs[i]["pattern"] == "cache_bust");
    BOOST_TEST(fs[i]["detail"]["region"] == "system");
    BOOST_TEST(fs[i]["seqs"] == json({seqs[i], seqs[i + 1]}));
    BOOST_TEST(contains(fs[i]["detail"]["after"], "The time is "), fs[i].dump());
  }
  // The offsets are those of the first differing byte in the bodies sent.
  auto requests = server.requests();
  size_t a = fs[0]["detail"]["offset_before"], b = fs[0]["detail"]["offset_after"];
  BOOST_TEST(requests[0].body.substr(a - 12, 12) == requests[1].body.substr(b - 12, 12));
  BOOST_TEST(requests[0].body[a] != requests[1].body[b]);
  BOOST_TEST(contains(requests[0].body.substr(0, a), "The time is "));

  // Bodies are read up to a budget: with room for one, no pair to compare, and it says so.
  testing::CliResult budget = run("trace analyze t --cache-max-bytes " + std::to_string(requests_size(0) + 1));
  BOOST_TEST(!contains(budget.out, "cache_bust"), budget.out);
  BOOST_TEST(contains(budget.err, "t: the cache patterns cover the first 1 of 3 model requests"), budget.err);
  json cut = run_json("trace analyze t --cache-max-bytes " + std::to_string(requests_size(0) + 1));
  BOOST_TEST(cut["data"]["sessions"][0]["cache_bodies_read"] == json({{"read", 1}, {"model_requests", 3}}));

  testing::CliResult text = run("trace analyze t");
  BOOST_TEST_MESSAGE("$ carapace trace analyze t\n" << text.out);
  BOOST_TEST(contains(text.out, "cache_bust"), text.out);
  BOOST_TEST(contains(text.out, "region system changed at byte " + std::to_string(b)), text.out);
  BOOST_TEST(contains(text.out, "trace diff --request t@" + std::to_string(seqs[0]) + " " + std::to_string(seqs[1])),
             text.out);

  json diff = run_json("trace diff --request t@" + std::to_string(seqs[0]) + " " + std::to_string(seqs[1]));
  BOOST_TEST(diff["data"]["first_difference"]["region"] == "system");
  BOOST_TEST(diff["data"]["first_difference"]["offset_b"] == b);
  BOOST_TEST(diff["data"]["regions"][0]["state"] == "same");     // tools
  BOOST_TEST(diff["data"]["regions"][1]["state"] == "changed");  // system
  testing::CliResult whole = run("trace diff --request t@" + std::to_string(seqs[0]) + " t@" + std::to_string(seqs[1]));
  BOOST_TEST(whole.code == 0, whole.err);
  BOOST_TEST_MESSAGE("$ carapace trace diff --request t@" << seqs[0] << " t@" << seqs[1] << "\n" << whole.out);
  BOOST_TEST(contains(whole.out, "the requests part in region system: byte"), whole.out);
  BOOST_TEST(contains(whole.out, "- A from there: "), whole.out);
  BOOST_TEST(contains(whole.out, "+ B from there: "), whole.out);
  // Named wrong: a clear error.
  testing::CliResult bad = run("trace diff --request t@x 3");
  BOOST_TEST(bad.code == 2, bad.out + bad.err);
  BOOST_TEST(contains(bad.err, "SESSION@SEQ"), bad.err);
  testing::CliResult missing = run("trace diff --request t@1 2");
  BOOST_TEST(missing.code == 1, missing.out + missing.err);
  BOOST_TEST(contains(missing.err, "t@1: no model request at seq 1"), missing.err);
}

BOOST_DATA_TEST_CASE_F(CacheFixture, a_gap_past_the_lifetime_is_a_lapse_and_within_it_a_provider_miss,
                       bdata::make(kFormats), format) {
  // The server's cache lives 1 s; the shell call between the second and the
  // third request takes 1.5 s.
  serve(format, std::make_shared<testing::PromptCacheSim>(format, std::chrono::milliseconds(1000)),
        "sleep 1.5; cat note.txt");
  run_session(config(format, cache_settings(format)), "l");
  BOOST_REQUIRE(usages.size() == 3u);
  BOOST_TEST(usages[1].cache_read > 0u);
  BOOST_TEST(usages[2].cache_read == 0u);
  auto seqs = llm_seqs("l");
  json lapse = findings("l", " --cache-ttl 1s");
  BOOST_REQUIRE_MESSAGE(lapse.size() == 1u, lapse.dump(2));
  BOOST_TEST(lapse[0]["pattern"] == "ttl_lapse");
  BOOST_TEST(lapse[0]["seqs"] == json({seqs[1], seqs[2]}));
  BOOST_TEST(lapse[0]["detail"]["gap_ms"].get<int64_t>() >= 1500);
  // With the default lifetime of 5 minutes, the provider should have hit.
  json miss = findings("l");
  BOOST_REQUIRE_MESSAGE(miss.size() == 1u, miss.dump(2));
  BOOST_TEST(miss[0]["pattern"] == "provider_miss");
  BOOST_TEST(run("trace analyze l --cache-ttl soon").code == 2);
}

BOOST_AUTO_TEST_CASE(anthropic_without_breakpoints_is_reported_and_bad_cache_settings_are_refused) {
  CacheFixture f;
  f.serve("anthropic", std::make_shared<testing::PromptCacheSim>("anthropic"));
  f.run_session(f.config("anthropic", nullptr), "off");
  for (const auto& u : f.usages) BOOST_TEST(u.cache_read == 0u);
  json fs = f.findings("off");
  BOOST_REQUIRE_MESSAGE(fs.size() == 1u, fs.dump(2));
  BOOST_TEST(fs[0]["pattern"] == "cache_off");

  struct Bad {
    std::string format;
    json cache;
    std::string says;
  };
  for (const Bad& bad : {Bad{"anthropic", {{"tools", true}, {"system", true}, {"last_messages", 3}},
                             "provider.cache: asks for 5 cache breakpoints"},
                         Bad{"anthropic", {{"last_messages", 5}}, "provider.cache.last_messages: must be a whole number from 0 to 4"},
                         Bad{"anthropic", {{"prompt_cache_key", "k"}}, "provider.cache.prompt_cache_key: is OpenAI's"},
                         Bad{"openai", {{"system", true}}, "are Anthropic's cache breakpoints"},
                         Bad{"anthropic", {{"ttl", "10m"}}, "provider.cache.ttl: must be \"5m\" or \"1h\""},
                         Bad{"anthropic", {{"tools", "yes"}}, "provider.cache.tools: must be true or false"}}) {
    testing::CliResult r = f.run("run 'x' --config " + f.config(bad.format, bad.cache) + " --workspace " + f.ws);
    BOOST_TEST(r.code != 0);
    BOOST_TEST(contains(r.err, bad.says), r.err);
  }
  BOOST_TEST(f.server.requests().size() == 3u);  // the refused runs sent nothing
}

BOOST_AUTO_TEST_SUITE_END()
