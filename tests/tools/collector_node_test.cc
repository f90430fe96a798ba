// Collector nodes (docs/scale-out.md), for real: `carapace node --role
// collector` processes with mutual TLS, session hosts (`carapace run`,
// `resume`) that send them their sessions' events, and the trace commands
// run on the collector's home. A node down costs the run nothing and
// catches up later; a session id that another host's log already holds is
// refused. The node's actor is also driven in process, shipment by
// shipment, for what a host never sends.
#define BOOST_TEST_MODULE collector_node_test
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include <caf/all.hpp>

#include <filesystem>

#include "actors/collector/remote/collector_node.h"
#include "storage/event_log.h"
#include "tests/support/node_cluster.h"

using namespace carapace;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::contains;
using testing::NodeProcess;

namespace {

std::string shell_then_done(const std::string& command) {
  return json{{"replies",
               {{{"tool_calls", {{{"name", "shell"}, {"args", {{"command", command}}}}}}},
                {{"text", "done"}},
                {{"text", "done again"}}}}}
      .dump();
}

struct Fixture : testing::NodeCluster {
  std::string host_home = dir.sub("host-home");

  Fixture() : NodeCluster({"host", "other", "c1"}) {
    for (const auto& d : {host_home, dir.sub("work")}) {
      std::filesystem::create_directories(d);
      ::chmod(d.c_str(), 0700);
    }
  }

  // A host's config: a scripted session that runs `command` in the shell,
  // its events sent to the collector node at `port`.
  std::string host_config(uint16_t port, const std::string& command = "echo hello", const std::string& tls = "host") {
    return file("host-" + tls + ".json",
                json{{"provider", {{"name", "scripted"}, {"scenario", file("scenario.json", shell_then_done(command))}}},
                     {"session", {{"workspace", dir.sub("work")}}},
                     {"nodes", {{{"name", "c1"}, {"role", "collector"}, {"address", "127.0.0.1:" + std::to_string(port)}}}},
                     {"node_options",
                      {{"tls", dir.sub("tls-" + tls)}, {"heartbeat_ms", 200}, {"connection_timeout_ms", 1000}}}}
                    .dump());
  }

  // The session's events as `log show --json` gives them.
  json events(const std::string& home, const std::string& session) const {
    auto r = cli(home, "log show " + session + " --json");
    BOOST_REQUIRE_MESSAGE(r.code == 0, home << ": " << r.out << r.err);
    json shown = json::parse(r.out);
    return shown["data"]["events"];
  }

  json spans(const std::string& home, const std::string& session, std::string* source = nullptr) const {
    auto r = cli(home, "trace show " + session + " --full --json");
    BOOST_REQUIRE_MESSAGE(r.code == 0, home << ": " << r.out << r.err);
    json shown = json::parse(r.out);
    if (source != nullptr) *source = shown["data"]["source"].get<std::string>();
    return shown["data"]["spans"];
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(collector_nodes, Fixture)

BOOST_AUTO_TEST_CASE(a_hosts_sessions_land_on_the_collector_whole_and_the_trace_commands_run_there) {
  NodeProcess& c1 = start_node("c1", "--role collector");
  const std::string config = host_config(c1.port);
  for (const std::string id : {"s1", "s2"}) {
    auto r = cli(host_home, "run 'Say hello' --session " + id + " --config '" + config + "'");
    BOOST_TEST(r.code == 0, r.out << r.err);
  }
  for (const std::string id : {"s1", "s2"}) {
    // The copy is the log, event for event, as soon as the run has ended.
    json here = events(host_home, id), there = events(c1.home, id);
    BOOST_TEST(here.size() > 5u);
    BOOST_TEST(there == here, id << " differs on the collector");
    // Spans built there as the events landed, the same as the host's.
    std::string source;
    json remote;
    testing::wait_for([&] {  // the node's collector writes its spans within its flush interval
      remote = spans(c1.home, id, &source);
      return source == "store";
    }, 10s);
    BOOST_TEST(source == "store", id << ": the collector's spans were built from " << source);
    BOOST_TEST(remote == spans(host_home, id));
  }
  // The collector's home holds verified, imported copies: listed, verified, replayed.
  auto sessions = cli(c1.home, "sessions --json");
  BOOST_TEST(sessions.code == 0);
  BOOST_TEST(json::parse(sessions.out)["data"]["sessions"].size() == 2u, sessions.out);
  BOOST_TEST(contains(cli(c1.home, "sessions").out, "(imported)"));
  auto verify = cli(c1.home, "verify --all");
  BOOST_TEST(verify.code == 0, verify.out << verify.err);
  auto replayed = cli(c1.home, "replay s1");
  BOOST_TEST(replayed.code == 0, replayed.out << replayed.err);
  BOOST_TEST(contains(replayed.out, "identical"), replayed.out);
  auto stats = cli(c1.home, "trace stats --since 1h --json");
  BOOST_TEST(stats.code == 0, stats.out << stats.err);
  BOOST_TEST(!std::filesystem::exists(host_home + "/collector-pending"));
}

BOOST_AUTO_TEST_CASE(a_collector_down_costs_the_run_nothing_and_gets_everything_once_back) {
  const uint16_t port = testing::free_loopback_port();
  const std::string config = host_config(port);
  auto first = cli(host_home, "run 'Say hello' --session s1 --config '" + config + "'");
  BOOST_TEST(first.code == 0, first.out << first.err);
  // What no node holds is named for the next run.
  BOOST_TEST(contains(testing::CliRunner::slurp(host_home + "/collector-pending"), "s1"));

  NodeProcess& c1 = start_node("c1", "--role collector", "", port);
  auto second = cli(host_home, "run 'Say hello' --session s2 --config '" + config + "'");
  BOOST_TEST(second.code == 0, second.out << second.err);
  BOOST_TEST(events(c1.home, "s1") == events(host_home, "s1"));
  BOOST_TEST(events(c1.home, "s2") == events(host_home, "s2"));
  BOOST_TEST(!std::filesystem::exists(host_home + "/collector-pending"));
}

BOOST_AUTO_TEST_CASE(a_session_continued_in_a_new_process_sends_what_the_collector_lacks_from_the_log) {
  const uint16_t port = testing::free_loopback_port();
  const std::string config = host_config(port);
  auto first = cli(host_home, "run 'Say hello' --session s1 --config '" + config + "'");
  BOOST_TEST(first.code == 0, first.out << first.err);
  std::filesystem::remove(host_home + "/collector-pending");  // as if lost: only the log knows
  const size_t before = events(host_home, "s1").size();
  NodeProcess& c1 = start_node("c1", "--role collector", "", port);
  // The new process hears only the new events; the node says where its
  // copy ends (nowhere), and the rest comes from the host's log.
  auto more = cli(host_home, "resume s1 --then 'And again' --config '" + config + "'");
  BOOST_TEST(more.code == 0, more.out << more.err);
  json here = events(host_home, "s1");
  BOOST_TEST(here.size() > before);
  BOOST_TEST(events(c1.home, "s1") == here);
}

BOOST_AUTO_TEST_CASE(a_session_id_another_host_sent_first_is_refused_and_the_copy_kept) {
  NodeProcess& c1 = start_node("c1", "--role collector");
  auto a = cli(host_home, "run 'Say hello' --session s1 --config '" + host_config(c1.port) + "'");
  BOOST_TEST(a.code == 0, a.out << a.err);
  const json kept = events(c1.home, "s1");

  const std::string other_home = dir.sub("other-home");
  std::filesystem::create_directories(other_home);
  ::chmod(other_home.c_str(), 0700);
  auto b = cli(other_home,
               "run 'Something else' --session s1 --config '" + host_config(c1.port, "echo other", "other") + "'");
  BOOST_TEST(b.code == 0, b.out << b.err);  // observability never fails a run
  BOOST_TEST(contains(b.err, "collector node c1 refused session s1"), b.err);
  BOOST_TEST(contains(testing::CliRunner::slurp(c1.log), "first event differs"));
  BOOST_TEST(events(c1.home, "s1") == kept);
}

BOOST_AUTO_TEST_SUITE_END()

// The node's actor in process: every shipment a host would never send.
BOOST_FIXTURE_TEST_SUITE(collector_node_actor, Fixture)

BOOST_AUTO_TEST_CASE(shipments_are_checked_before_anything_is_written) {
  // A real session's events, from a run without nodes.
  const std::string config =
      file("plain.json", json{{"provider", {{"name", "scripted"}, {"scenario", file("s.json", shell_then_done("echo x"))}}},
                              {"session", {{"workspace", dir.sub("work")}}}}
                             .dump());
  auto r = cli(host_home, "run 'Say hello' --session s1 --config '" + config + "'");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.out + r.err);
  std::vector<Event> all;
  {
    std::unique_ptr<EventLog> host;
    BOOST_REQUIRE(EventLog::open(EventLog::Options{.path = host_home + "/log", .mode = EventLog::Mode::kReader}, &host)
                      .ok());
    uint64_t last = 0;
    BOOST_REQUIRE(host->last_seq("s1", &last).ok());
    BOOST_REQUIRE(host->read("s1", 1, last, &all).ok());
  }
  BOOST_REQUIRE(all.size() > 6u);
  const std::string anchor = anchor_digest(all.front());
  auto slice = [&](size_t from, size_t to) { return std::vector<Event>(all.begin() + from, all.begin() + to); };

  std::unique_ptr<EventLog> copies;
  BOOST_REQUIRE(EventLog::open(EventLog::Options{.path = dir.sub("copies")}, &copies).ok());
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  auto node = spawn_collector_node(system, CollectorNodeOptions{.name = "c", .log = copies.get(), .max_events = 64});
  caf::scoped_actor self{system};
  auto ship = [&](EventShipment s) {
    ShipmentAck ack;
    self->request(node, 10s, std::move(s)).receive([&](ShipmentAck& a) { ack = a; },
                                                   [&](caf::error& e) { ack.error = "request: " + to_string(e); });
    return ack;
  };
  auto held = [&] {
    uint64_t last = 0;
    BOOST_REQUIRE(copies->last_seq("s1", &last).ok());
    return last;
  };

  // Past the node's bound.
  std::vector<Event> many;
  for (size_t i = 0; i < 65; ++i) many.push_back(all[i % all.size()]);
  BOOST_TEST(contains(ship({"s1", anchor, many}).error, "at most 64"));
  // Not a session id.
  BOOST_TEST(!ship({"bad id/..", anchor, slice(0, 2)}).error.empty());
  // Another session's anchor.
  BOOST_TEST(contains(ship({"s1", std::string(32, 'a'), slice(0, 2)}).error, "does not match"));
  // A hole in the middle.
  std::vector<Event> holed = slice(0, 4);
  holed.erase(holed.begin() + 2);
  BOOST_TEST(contains(ship({"s1", anchor, holed}).error, "skip from seq 2 to 4"));
  // A checkpoint whose state hash the fold does not reach.
  std::vector<Event> tampered = all;
  bool changed = false;
  for (Event& e : tampered) {
    if (auto* c = std::get_if<TurnCommitted>(&e.body)) {
      c->state_hash.lo ^= 1;
      changed = true;
    }
  }
  BOOST_REQUIRE(changed);
  BOOST_TEST(contains(ship({"s1", anchor, tampered}).error, "do not verify"));
  BOOST_TEST(held() == 0u);  // nothing of the refused shipments was written

  // Out of order: the node says where its copy ends, and the host sends from there.
  const size_t half = all.size() / 2;
  BOOST_TEST(ship({"s1", anchor, slice(half, all.size())}).have_seq == 0u);
  BOOST_TEST(ship({"s1", anchor, slice(0, half)}).have_seq == half);
  BOOST_TEST(ship({"s1", anchor, {}}).have_seq == half);  // a question
  BOOST_TEST(ship({"s1", anchor, slice(half, all.size())}).have_seq == all.size());
  // Sent again: skipped, not written twice.
  BOOST_TEST(ship({"s1", anchor, slice(0, all.size())}).have_seq == all.size());
  std::vector<Event> copy;
  BOOST_REQUIRE(copies->read("s1", 1, UINT64_MAX, &copy).ok());
  BOOST_TEST(copy.size() == all.size());
  SessionMeta meta;
  BOOST_REQUIRE(copies->get_meta("s1", &meta).ok());
  BOOST_TEST(meta.imported_seq == all.size());  // never run here
  self->send_exit(node, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
