// The pure pieces of tools nodes (docs/scale-out.md): which node a call
// goes to (NodeDirectory), and a node's ledger (CallLedger), which makes a
// call run at most once there across restarts of the node.
#define BOOST_TEST_MODULE remote_tools_test
#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "actors/tool/remote/call_ledger.h"
#include "actors/tool/remote/node_directory.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

namespace {

NodeRoute route(const std::string& name, std::vector<std::string> tools) {
  return NodeRoute{.name = name, .address = "127.0.0.1:7001", .tools = std::move(tools)};
}

std::string picked(const NodeDirectory& d, const std::string& tool, const std::string& except = "") {
  std::string node;
  Status s = d.pick(tool, "c1", except, &node);
  return s.ok() ? node : "error: " + s.message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_directory)

BOOST_AUTO_TEST_CASE(a_call_goes_to_an_up_node_with_the_fewest_calls_in_flight) {
  NodeDirectory d({route("a", {"shell"}), route("b", {"shell", "mcp:*"})}, NodeFallback::kRefuse);
  BOOST_TEST(picked(d, "read_file") == "");  // routed nowhere: this process
  BOOST_TEST(picked(d, "shell").rfind("error: no tools node that runs shell is up: a (127.0.0.1:7001): not connected yet", 0) == 0);
  d.set_up("a", "id-a");
  d.set_up("b", "id-b");
  BOOST_TEST(picked(d, "shell") == "a");  // a tie: the first in the configuration
  d.sent("a");
  BOOST_TEST(picked(d, "shell") == "b");
  BOOST_TEST(picked(d, "mcp:git:status") == "b");  // a prefix
  BOOST_TEST(picked(d, "shell", "b") == "a");      // a retry skips the node it gives up on
  d.set_down("a", "lost: exit_reason(remote_link_unreachable)");
  BOOST_TEST(picked(d, "shell") == "b");
  BOOST_TEST(picked(d, "shell", "b").find("a (127.0.0.1:7001): lost: exit_reason(remote_link_unreachable)") !=
             std::string::npos);
  d.answered("a", true);
  BOOST_TEST(d.states()[0].in_flight == 0u);  // a lost node's calls are not in flight any more
}

BOOST_AUTO_TEST_CASE(the_local_fallback_runs_here_when_no_node_is_up) {
  NodeDirectory d({route("a", {"shell"})}, NodeFallback::kLocal);
  BOOST_TEST(picked(d, "shell") == "");
}

BOOST_AUTO_TEST_CASE(a_replay_answers_from_what_was_recorded) {
  NodeDirectory d([](const std::string& call_id, std::string* node) {
    *node = call_id == "c1" ? "box-2" : "";
    return Status();
  });
  BOOST_TEST(picked(d, "anything") == "box-2");
}

BOOST_AUTO_TEST_CASE(addresses_are_checked) {
  std::string host;
  uint16_t port = 0;
  CHECK_OK(parse_node_address("10.0.0.5:7401", &host, &port));
  BOOST_TEST(host == "10.0.0.5");
  BOOST_TEST(port == 7401);
  for (const char* bad : {"10.0.0.5", ":7401", "10.0.0.5:", "10.0.0.5:0", "10.0.0.5:65536", "a b:1", "h:1x"}) {
    BOOST_TEST(!parse_node_address(bad, &host, &port).ok(), bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(call_ledger)

BOOST_AUTO_TEST_CASE(what_began_and_ended_survives_a_restart) {
  testing::TempDir dir;
  std::string id;
  {
    std::unique_ptr<CallLedger> ledger;
    CHECK_OK(CallLedger::open(dir.sub("ledger"), &ledger));
    id = ledger->id();
    BOOST_TEST(id.size() == 32u);
    BOOST_TEST((ledger->find("s1", "c1").state == CallLedger::State::kUnknown));
    CHECK_OK(ledger->begin("s1", "c1", "shell", 1));
    BOOST_TEST((ledger->find("s1", "c1").state == CallLedger::State::kStarted));
    CHECK_OK(ledger->finish("s1", "c1", ToolOutcome{.call_id = "c1", .output = "ran\n", .duration_ms = 7}));
    CHECK_OK(ledger->begin("s1", "c2", "shell", 1));  // the node dies during c2
  }
  std::unique_ptr<CallLedger> again;
  CHECK_OK(CallLedger::open(dir.sub("ledger"), &again));
  BOOST_TEST(again->id() == id);  // the same node
  auto done = again->find("s1", "c1");
  BOOST_TEST((done.state == CallLedger::State::kDone));
  BOOST_TEST(done.outcome_kept);
  BOOST_TEST(done.outcome.output == "ran\n");
  BOOST_TEST(done.outcome.duration_ms == 7u);
  BOOST_TEST((again->find("s1", "c2").state == CallLedger::State::kStarted));  // began, never ended: unknown
  BOOST_TEST((again->find("s2", "c1").state == CallLedger::State::kUnknown));  // another session's c1
  BOOST_TEST(again->calls() == 2u);
}

BOOST_AUTO_TEST_CASE(a_torn_last_line_is_cut_and_a_corrupt_one_refused) {
  testing::TempDir dir;
  {
    std::unique_ptr<CallLedger> ledger;
    CHECK_OK(CallLedger::open(dir.sub("ledger"), &ledger));
    CHECK_OK(ledger->begin("s1", "c1", "shell", 1));
  }
  std::ofstream(dir.sub("ledger/calls.jsonl"), std::ios::app) << R"({"session":"s1","call":"c1","ev)";
  {
    std::unique_ptr<CallLedger> ledger;
    CHECK_OK(CallLedger::open(dir.sub("ledger"), &ledger));  // the crash came while it was written
    BOOST_TEST((ledger->find("s1", "c1").state == CallLedger::State::kStarted));
    CHECK_OK(ledger->finish("s1", "c1", ToolOutcome{.call_id = "c1", .output = "ok"}));
  }
  {
    std::unique_ptr<CallLedger> ledger;
    CHECK_OK(CallLedger::open(dir.sub("ledger"), &ledger));
    BOOST_TEST((ledger->find("s1", "c1").state == CallLedger::State::kDone));
  }
  std::ofstream(dir.sub("ledger/calls.jsonl"), std::ios::app) << "not json\n{}\n";
  std::unique_ptr<CallLedger> broken;
  Status s = CallLedger::open(dir.sub("ledger"), &broken);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("calls.jsonl: line at byte") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_SUITE_END()
