// TraceStore: spans and progress in one batch, read back in order; the
// indexes by start time, model and tool; one writer, readers beside it.
#include "storage/trace_store.h"

#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "storage/db_options.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

namespace {

StoredSpan span(const std::string& session, uint64_t seq, int64_t start, std::string model, std::string tool,
                std::string value) {
  return StoredSpan{session, "id" + std::to_string(seq), seq, start, std::move(model), std::move(tool),
                    std::move(value)};
}

std::vector<std::string> ids(const std::vector<SpanRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) out.push_back(r.session + "/" + r.span_id);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_store)

// Every `carapace run` opens the store, writes a little and closes: the
// writer merges the small files before it closes, so they do not pile up.
BOOST_AUTO_TEST_CASE(short_writers_leave_few_table_files) {
  testing::TempDir dir;
  const std::string path = dir.sub("traces");
  for (int i = 0; i < 40; ++i) {
    std::unique_ptr<TraceStore> store;
    CHECK_OK(TraceStore::open(path, TraceStore::Mode::kWriter, &store));
    const std::string id = "s" + std::to_string(i);
    std::vector<StoredSpan> spans = {span(id, 1, 100 + i, "m", "", "root"), span(id, 2, 200 + i, "", "shell", "tool")};
    CHECK_OK(store->write(spans, {{id, TraceProgress{.last_seq = 2}}}));
  }
  size_t tables = 0;
  for (const auto& f : std::filesystem::directory_iterator(path)) tables += f.path().extension() == ".sst";
  BOOST_TEST(tables <= 30u, tables << " table files after 40 short writers");  // 5 families
  std::unique_ptr<TraceStore> reader;
  CHECK_OK(TraceStore::open(path, TraceStore::Mode::kReader, &reader));
  for (int i = 0; i < 40; ++i) {
    std::vector<std::string> values;
    CHECK_OK(reader->spans_of("s" + std::to_string(i), &values));
    BOOST_TEST((values == std::vector<std::string>{"root", "tool"}));
  }
}

BOOST_AUTO_TEST_CASE(spans_progress_and_indexes_round_trip) {
  testing::TempDir dir;
  const std::string path = dir.sub("traces");
  {
    std::unique_ptr<TraceStore> store;
    CHECK_OK(TraceStore::open(path, TraceStore::Mode::kWriter, &store));
    std::vector<StoredSpan> first = {span("a", 1, 100, "", "", "root a"), span("a", 12, 300, "m1", "", "llm a v1"),
                                     span("a", 9, 200, "", "shell", "tool a"), span("b", 1, 150, "", "", "root b"),
                                     span("b", 5, 400, "m2", "", "llm b")};
    CHECK_OK(store->write(first, {{"a", TraceProgress{.last_seq = 12}}, {"b", TraceProgress{.last_seq = 5}}}));
    // A span written again replaces its value under the same key.
    std::vector<StoredSpan> again = {span("a", 12, 300, "m1", "", "llm a v2")};
    CHECK_OK(store->write(again, {{"a", TraceProgress{.last_seq = 13, .dropped = 2}}}));

    std::vector<std::string> values;
    CHECK_OK(store->spans_of("a", &values));
    BOOST_TEST((values == std::vector<std::string>{"root a", "tool a", "llm a v2"}));  // open_seq order
    TraceProgress p;
    CHECK_OK(store->progress("a", &p));
    BOOST_TEST(p.last_seq == 13u);
    BOOST_TEST(p.dropped == 2u);
    BOOST_TEST(store->progress("zz", &p).is_not_found());

    std::vector<SpanRef> refs;
    CHECK_OK(store->by_start(150, &refs));
    BOOST_TEST((ids(refs) == std::vector<std::string>{"b/id1", "a/id9", "a/id12", "b/id5"}));
    refs.clear();
    CHECK_OK(store->by_model("m1", 0, &refs));
    BOOST_TEST((ids(refs) == std::vector<std::string>{"a/id12"}));
    refs.clear();
    CHECK_OK(store->by_tool("shell", 0, &refs));
    BOOST_TEST((ids(refs) == std::vector<std::string>{"a/id9"}));
    BOOST_TEST(refs[0].start_us == 200);
    refs.clear();
    CHECK_OK(store->by_tool("shell", 201, &refs));
    BOOST_TEST(refs.empty());

    // A second writer is refused while the first has it; a reader opens beside it.
    std::unique_ptr<TraceStore> second;
    BOOST_TEST(!TraceStore::open(path, TraceStore::Mode::kWriter, &second).ok());
    std::unique_ptr<TraceStore> reader;
    CHECK_OK(TraceStore::open(path, TraceStore::Mode::kReader, &reader));
    std::vector<std::pair<std::string, TraceProgress>> all;
    CHECK_OK(reader->all_progress(&all));
    BOOST_TEST(all.size() == 2u);
  }
  std::unique_ptr<TraceStore> reader;
  BOOST_TEST(TraceStore::open(dir.sub("nothing"), TraceStore::Mode::kReader, &reader).is_not_found());
}

// Its spans are keyed by session, as the log's events are: level 1 and the
// table files sized to four of its 4 MB flushes (bench/README.md,
// compaction_bench --store traces), in every family the store opens.
BOOST_AUTO_TEST_CASE(level_sizes_follow_the_write_buffers) {
  const auto families = trace_store_families();
  BOOST_TEST(families.size() == 6u);
  for (const auto& f : families) {
    BOOST_TEST(f.options.write_buffer_size == size_t{4} << 20);
    BOOST_TEST(f.options.max_bytes_for_level_base == uint64_t{16} << 20);
    BOOST_TEST(f.options.target_file_size_base == uint64_t{16} << 20);
  }
}

BOOST_AUTO_TEST_SUITE_END()
