// BodyStore's bound on one body: a longer body is stored cut, with a marker
// giving its whole size, under the key of what is stored; a body kept only
// in part by its caller says how long it was.
#include <boost/test/unit_test.hpp>

#include <future>

#include "storage/body_store.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

BOOST_AUTO_TEST_SUITE(body_store_cap)

BOOST_AUTO_TEST_CASE(a_body_past_max_body_bytes_is_stored_cut_with_its_size) {
  testing::TempDir dir;
  std::unique_ptr<BodyStore> store;
  CHECK_OK(BodyStore::open(dir.sub("bodies"), BodyStore::Mode::kWriter, &store, 1000));
  BOOST_TEST(store->max_body_bytes() == 1000u);
  const std::string marker_end = " bytes are kept (provider.max_stored_body_bytes)]\n";

  // At the bound: verbatim.
  std::string fits(1000, 'a'), ref;
  CHECK_OK(store->put(fits, &ref));
  std::string got;
  CHECK_OK(store->get(ref, &got));
  BOOST_TEST(got == fits);

  // Past it: the first 1000 bytes, then the marker.
  std::string big(250'000, 'b');
  big[999] = 'c';
  big[1000] = 'd';
  CHECK_OK(store->put(big, &ref));
  CHECK_OK(store->get(ref, &got));
  BOOST_TEST(got ==
             std::string(999, 'b') + "c\n[carapace: body cut: the first 1000 of its 250000" + marker_end);
  BOOST_TEST(ref == BodyStore::ref_of(got));

  // put_async: the same cut; and a caller's beginning of a longer body.
  std::promise<std::string> cut_ref, part_ref;
  store->put_async(big, [&](Status s, std::string r) { cut_ref.set_value(s.ok() ? r : s.message()); });
  store->put_async(std::string(10, 'e'), 5'000'000,
                   [&](Status s, std::string r) { part_ref.set_value(s.ok() ? r : s.message()); });
  BOOST_TEST(cut_ref.get_future().get() == ref);
  CHECK_OK(store->get(part_ref.get_future().get(), &got));
  BOOST_TEST(got == "eeeeeeeeee\n[carapace: body cut: the first 10 of its 5000000" + marker_end);

  std::vector<std::pair<std::string, uint64_t>> all;
  CHECK_OK(store->list(&all));
  BOOST_TEST(all.size() == 3u);
  for (const auto& [key, size] : all) BOOST_TEST(size <= 1000u + 100, key << ": " << size);
}

BOOST_AUTO_TEST_SUITE_END()
