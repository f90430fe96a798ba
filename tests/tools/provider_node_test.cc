// Provider nodes (docs/scale-out.md), for real: `carapace node --role
// provider` processes holding the API key, a session host (`carapace run`)
// whose environment has none, and a model server on 127.0.0.1 that checks
// the key. A node killed mid-stream: the attempt is retried on the other
// node, recorded as a transport failure naming the lost node.
#define BOOST_TEST_MODULE provider_node_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "storage/body_store.h"
#include "tests/support/fake_model.h"
#include "tests/support/llm_wire.h"
#include "tests/support/mock_llm_server.h"
#include "tests/support/node_cluster.h"

using namespace carapace;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::contains;
using testing::NodeProcess;

namespace {

const std::string kKey = "sk-canary-0f3a9c1e7b5d4e2a8c6b";

struct Fixture : testing::NodeCluster {
  testing::MockLlmServer server;
  std::string host_home = dir.sub("host-home");

  Fixture() : NodeCluster({"host", "p1", "p2"}) {
    std::filesystem::create_directories(host_home);
    std::filesystem::create_directories(dir.sub("work"));
  }

  json provider_section() const {
    return {{"name", "openai"}, {"model", "gpt-4o-mini"}, {"base_url", server.url() + "/v1"}, {"max_tokens", 512}};
  }

  // A provider node's config: the provider; its key comes from its environment.
  NodeProcess& start_provider(const std::string& name, json provider) {
    const std::string config = file(name + ".json", json{{"provider", provider}}.dump());
    return start_node(name, "--role provider --config '" + config + "'", "OPENAI_API_KEY=" + kKey);
  }

  std::string host_config(const std::vector<const NodeProcess*>& providers) {
    json list = json::array();
    for (const auto* n : providers) {
      list.push_back({{"name", n->name}, {"role", "provider"}, {"address", "127.0.0.1:" + std::to_string(n->port)}});
    }
    return file("host.json",
                json{{"provider", provider_section()},
                     {"retry", {{"base_delay_ms", 50}, {"max_delay_ms", 200}}},
                     {"workspace", dir.sub("work")},
                     {"nodes", list},
                     {"node_options",
                      {{"tls", dir.sub("tls-host")}, {"heartbeat_ms", 200}, {"connection_timeout_ms", 1000}}}}
                    .dump());
  }

  // Every byte the host has written, in its home and the workspace.
  std::string everything_on_the_host() const {
    std::string all;
    for (const auto& root : {host_home, dir.sub("work")}) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
        if (e.is_regular_file()) all += testing::CliRunner::slurp(e.path().string());
      }
    }
    return all;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(provider_nodes, Fixture)

BOOST_AUTO_TEST_CASE(model_calls_run_on_the_node_with_its_key_which_never_reaches_the_host) {
  server.set_handler([](const testing::MockRequest& r, size_t) {
    if (r.header("Authorization") != "Bearer " + kKey) return testing::MockReply{.status = 401, .body = "{}"};
    return testing::FakeModel{.format = "openai"}.reply(r);
  });
  NodeProcess& p1 = start_provider("p1", provider_section());
  auto run = cli(host_home, "run 'Note the plan' --session s1 --config '" + host_config({&p1}) + "'");
  BOOST_TEST(run.code == 0, run.out << run.err);
  BOOST_TEST(contains(run.out, "Done: "), run.out);
  const auto requests = server.requests();
  BOOST_TEST(requests.size() == 3u);  // every model call, through the node

  // The bodies the host recorded are the ones the node sent, byte for byte.
  auto show = cli(host_home, "log show s1 --json");
  BOOST_REQUIRE(show.code == 0);
  std::vector<std::string> refs;
  const json shown = json::parse(show.out);
  for (const auto& e : shown["data"]["events"]) {
    if (e["type"] == "llm.requested") refs.push_back(e["data"]["body_ref"].get<std::string>());
  }
  BOOST_REQUIRE(refs.size() == requests.size());
  std::unique_ptr<BodyStore> store;
  BOOST_REQUIRE(BodyStore::open(host_home + "/bodies", BodyStore::Mode::kReader, &store).ok());
  for (size_t i = 0; i < refs.size(); ++i) {
    std::string body;
    BOOST_REQUIRE(store->get(refs[i], &body).ok());
    BOOST_TEST(body == requests[i].body, "attempt " << i << " was recorded other than sent");
  }

  // The key: in the node's environment and the server's ears only.
  BOOST_TEST(!contains(run.out + run.err + show.out, kKey));
  BOOST_TEST(!contains(everything_on_the_host(), kKey));
  BOOST_TEST(!contains(testing::CliRunner::slurp(p1.log), kKey));

  // A replay needs no node.
  stop(p1, SIGKILL);
  auto replayed = cli(host_home, "replay s1");
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  BOOST_TEST(contains(replayed.out, "identical"), replayed.out);
}

BOOST_AUTO_TEST_CASE(a_node_killed_mid_stream_is_retried_on_the_other_node) {
  server.set_handler([](const testing::MockRequest& r, size_t index) {
    testing::MockReply reply = testing::FakeModel{.format = "openai"}.reply(r);
    if (index == 0) {  // half the stream, then silence until the test kills the node
      reply.stall_after = static_cast<long>(reply.body.size() / 2);
      reply.stall_ms = 60'000;
    }
    return reply;
  });
  NodeProcess& p1 = start_provider("p1", provider_section());
  NodeProcess& p2 = start_provider("p2", provider_section());
  const std::string config = host_config({&p1, &p2});
  const std::string out = dir.sub("run.out");
  const std::string cmd = "env -u OPENAI_API_KEY '" + std::string(CARAPACE_BIN) + "' --home '" + host_home +
                          "' run 'Note the plan' --session s1 --config '" + config + "' >'" + out + "' 2>&1";
  std::thread host([&] { std::system(cmd.c_str()); });
  const bool stalled = testing::MockLlmServer::wait_for([&] { return server.stalls() >= 1; }, 30s);
  BOOST_TEST(stalled);
  const auto killed = std::chrono::steady_clock::now();
  stop(p1, SIGKILL);  // the first attempt went to p1: the first of two idle nodes
  host.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  const std::string said = testing::CliRunner::slurp(out);
  BOOST_TEST(contains(said, "Done: "), said);
  BOOST_TEST(ms < 20s, ms.count() << " ms after the kill");

  auto show = cli(host_home, "log show s1 --json");
  BOOST_REQUIRE(show.code == 0);
  int failed = 0;
  const json shown = json::parse(show.out);
  for (const auto& e : shown["data"]["events"]) {
    if (e["type"] != "llm.failed") continue;
    ++failed;
    const std::string error = e["data"]["error"];
    BOOST_TEST(contains(error, "the provider node p1 (127.0.0.1:" + std::to_string(p1.port) + ") was lost"), error);
    BOOST_TEST(e["data"]["http_status"] == 0);
    BOOST_TEST(e["data"]["will_retry"] == true);
  }
  BOOST_TEST(failed == 1);
  BOOST_TEST(server.request_count() == 4u);  // the lost attempt, then three through p2
  // p1's broken link left p2's alone (CAF's TLS module needs
  // actors/node/openssl_error_queue for that).
  BOOST_TEST(!contains(said, "provider node p2"), said);
  BOOST_TEST(!contains(said + testing::CliRunner::slurp(p2.log), kKey));
}

BOOST_AUTO_TEST_CASE(an_attempt_a_node_that_is_up_never_answers_fails_at_its_deadline) {
  server.set_handler([](const testing::MockRequest& r, size_t) { return testing::FakeModel{.format = "openai"}.reply(r); });
  NodeProcess& p1 = start_node("p1", "--role provider --test-mutation silent --config '" +
                                         file("p1.json", json{{"provider", provider_section()}}.dump()) + "'");
  json cfg = json::parse(testing::CliRunner::slurp(host_config({&p1})));
  // The deadline: the provider's bound on an attempt (1 s), its connection time-out (1 s), 10 s for the trip.
  cfg["provider"]["max_stream_ms"] = 1000;
  cfg["provider"]["first_byte_timeout_ms"] = 1000;
  cfg["provider"]["connect_timeout_ms"] = 1000;
  cfg["retry"]["max_retries"] = 0;
  const auto start = std::chrono::steady_clock::now();
  auto run = cli(host_home, "run 'Note the plan' --session s1 --config '" + file("host3.json", cfg.dump()) + "'");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  BOOST_TEST(run.code != 0);
  BOOST_TEST(contains(run.out + run.err, "the provider node p1 gave no answer within 12000 ms"), run.out << run.err);
  BOOST_TEST(ms >= 12s, ms.count() << " ms");
  BOOST_TEST(ms < 25s, ms.count() << " ms");
  BOOST_TEST(server.request_count() == 0u);  // the silent node never called the model
}

BOOST_AUTO_TEST_CASE(a_reply_over_the_hosts_bounds_is_refused) {
  server.set_handler([](const testing::MockRequest&, size_t) {
    testing::WireAnswer a{.input = 10, .output = 10};
    a.text_pieces = {std::string(3000, 'x'), "y"};  // within the node's bounds, not the host's
    return testing::MockReply{.headers = {"Content-Type: text/event-stream"}, .body = testing::openai_stream(a)};
  });
  NodeProcess& p1 = start_provider("p1", provider_section());
  json cfg = json::parse(testing::CliRunner::slurp(host_config({&p1})));
  cfg["provider"]["max_response_bytes"] = 1024;
  cfg["retry"]["max_retries"] = 0;
  auto run = cli(host_home, "run 'Say a lot' --session s1 --config '" + file("host4.json", cfg.dump()) + "'");
  BOOST_TEST(run.code != 0);
  BOOST_TEST(contains(run.out + run.err, "the provider node p1 sent a reply of 3001 bytes"), run.out << run.err);
}

BOOST_AUTO_TEST_CASE(a_node_that_renders_requests_otherwise_is_refused_and_nothing_is_sent) {
  server.set_handler([](const testing::MockRequest& r, size_t) { return testing::FakeModel{.format = "openai"}.reply(r); });
  json other = provider_section();
  other["max_tokens"] = 4096;
  NodeProcess& p1 = start_provider("p1", other);
  json cfg = json::parse(testing::CliRunner::slurp(host_config({&p1})));
  cfg["retry"]["max_retries"] = 1;
  auto run = cli(host_home, "run 'Note the plan' --session s1 --config '" + file("host2.json", cfg.dump()) + "'");
  BOOST_TEST(run.code != 0);
  BOOST_TEST(contains(run.out + run.err, "no provider node is up: p1"), run.out << run.err);
  BOOST_TEST(contains(run.out + run.err, "renders requests differently"), run.out << run.err);
  BOOST_TEST(server.request_count() == 0u);
}

BOOST_AUTO_TEST_CASE(a_provider_node_without_a_key_or_with_a_scripted_provider_does_not_start) {
  const std::string scripted = file("scripted.json", R"({"provider": {"name": "scripted"}})");
  auto r = cli(dir.sub("home-x"), "node --role provider --listen 127.0.0.1:0 --tls '" + dir.sub("tls-p1") +
                                      "' --config '" + scripted + "'");
  BOOST_TEST(r.code != 0);
  BOOST_TEST(contains(r.err, "a provider node serves an openai or anthropic provider"), r.err);
  const std::string remote = file("remote.json", R"({"provider": {"name": "openai", "base_url": "https://api.example.com/v1"}})");
  r = cli(dir.sub("home-x"), "node --role provider --listen 127.0.0.1:0 --tls '" + dir.sub("tls-p1") + "' --config '" +
                                 remote + "'");
  BOOST_TEST(r.code != 0);
  BOOST_TEST(contains(r.err, "set the environment variable OPENAI_API_KEY"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
