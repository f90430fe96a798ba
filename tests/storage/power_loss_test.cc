// The power-loss simulation itself (storage/sync_ledger_fs.h,
// storage/power_loss.h): what it takes away, and that a process killed in the
// middle of a step the ledger records leaves a log that still opens.
#include <sys/wait.h>
#include <unistd.h>
#include <boost/test/unit_test.hpp>

#include <rocksdb/file_system.h>

#include <filesystem>
#include <fstream>

#include "storage/power_loss.h"
#include "storage/sync_ledger_fs.h"
#include "tests/support/log_fixture.h"

using namespace carapace;
namespace fs = std::filesystem;

namespace {

// A file system that dies (as SIGKILL would: no destructor, no flush) right
// after it renamed a file onto CURRENT, before the ledger can write it down.
class DiesAfterRenamingCurrent : public rocksdb::FileSystemWrapper {
 public:
  DiesAfterRenamingCurrent() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "DiesAfterRenamingCurrent"; }
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->RenameFile(from, to, options, dbg);
    if (s.ok() && fs::path(to).filename() == "CURRENT") ::_exit(0);
    return s;
  }
};

void write_lines(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(power_loss)

BOOST_FIXTURE_TEST_CASE(a_process_killed_between_a_rename_and_its_ledger_line_leaves_a_log_that_opens,
                        testing::LogFixture) {
  synth("a", 3);
  const std::vector<Event> before = read_all("a");
  close();
  const std::string ledger = dir.sub("ledger");
  // The second open makes a new MANIFEST, then renames a temporary file onto
  // CURRENT to name it; the process dies right after the rename.
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    std::shared_ptr<rocksdb::FileSystem> ledger_fs;
    if (!make_sync_ledger_fs(
             SyncLedgerOptions{.ledger_path = ledger, .target = std::make_shared<DiesAfterRenamingCurrent>()},
             &ledger_fs)
             .ok())
      ::_exit(2);
    std::unique_ptr<EventLog> again;
    (void)EventLog::open(EventLog::Options{.path = path(), .file_system = ledger_fs}, &again);
    ::_exit(3);  // the open finished: it never renamed onto CURRENT
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_REQUIRE_EQUAL(WEXITSTATUS(status), 0);
  PowerLossReport report;
  CHECK_OK(simulate_power_loss(PowerLossOptions{.ledger_path = ledger}, &report));
  // CURRENT names the new MANIFEST; the rename made its creation durable, so
  // the power loss must not have taken it away.
  std::unique_ptr<EventLog> reopened;
  Status s = EventLog::open(EventLog::Options{.path = path(), .mode = EventLog::Mode::kReader}, &reopened);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.to_string());
  log = std::move(reopened);
  BOOST_TEST(read_all("a").size() == before.size());
}

BOOST_FIXTURE_TEST_CASE(an_announced_rename_that_never_happened_changes_nothing, testing::LogFixture) {
  close();
  const std::string d = dir.sub("plain");
  fs::create_directories(d);
  const std::string ledger = dir.sub("ledger");
  write_file(d + "/MANIFEST-2", "manifest");
  write_file(d + "/2.dbtmp", "MANIFEST-2\n");
  // The process died after announcing the rename, before making it.
  write_lines(ledger, "C " + d + "/MANIFEST-2\nS 8 " + d + "/MANIFEST-2\nC " + d + "/2.dbtmp\nS 11 " + d +
                          "/2.dbtmp\nr " + d + "/2.dbtmp\t" + d + "/CURRENT\n");
  PowerLossReport report;
  CHECK_OK(simulate_power_loss(PowerLossOptions{.ledger_path = ledger}, &report));
  // No directory sync, no rename: neither file's entry was durable.
  BOOST_TEST(!fs::exists(d + "/MANIFEST-2"));
  BOOST_TEST(!fs::exists(d + "/2.dbtmp"));
  BOOST_TEST(!fs::exists(d + "/CURRENT"));
  BOOST_TEST(report.files_removed == 2u);
}

BOOST_FIXTURE_TEST_CASE(unsynced_bytes_and_entries_are_taken_away_synced_ones_kept, testing::LogFixture) {
  close();
  const std::string d = dir.sub("plain");
  fs::create_directories(d);
  const std::string ledger = dir.sub("ledger");
  write_file(d + "/1.log", std::string(100, 'w'));
  write_file(d + "/2.sst", std::string(50, 's'));
  write_file(d + "/3.sst", std::string(50, 't'));
  write_lines(ledger, "C " + d + "/1.log\nC " + d + "/2.sst\nS 50 " + d + "/2.sst\nD " + d + "\nS 60 " + d +
                          "/1.log\nC " + d + "/3.sst\nS 50 " + d + "/3.sst\n");
  PowerLossReport report;
  CHECK_OK(simulate_power_loss(PowerLossOptions{.ledger_path = ledger}, &report));
  BOOST_TEST(fs::file_size(d + "/1.log") == 60u);  // its last 40 bytes were never synced
  BOOST_TEST(fs::file_size(d + "/2.sst") == 50u);
  BOOST_TEST(!fs::exists(d + "/3.sst"));  // created after the directory's last sync
  BOOST_TEST(report.bytes_dropped == 40u);
  BOOST_TEST(report.files_removed == 1u);
  // The ledger is emptied: a second loss takes nothing more.
  PowerLossReport again;
  CHECK_OK(simulate_power_loss(PowerLossOptions{.ledger_path = ledger}, &again));
  BOOST_TEST(again.bytes_dropped == 0u);
  BOOST_TEST(fs::file_size(d + "/1.log") == 60u);
}

BOOST_AUTO_TEST_SUITE_END()
