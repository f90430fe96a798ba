#include <boost/test/unit_test.hpp>

#include "events/fold.h"
#include "events/session_state.h"
#include "tests/support/fill.h"
#include "tests/support/printing.h"
#include "tests/support/session_builder.h"

using namespace carapace;
using carapace::testing::SessionBuilder;

BOOST_AUTO_TEST_SUITE(state_tests)

BOOST_AUTO_TEST_CASE(state_hash_is_stable_across_builds) {
  // A fixed state must hash to the same value forever (for a given
  // kStateHashVersion): checkpoints written today are re-checked by later
  // builds. If this fails, the canonical encoding changed: bump
  // kStateHashVersion instead of editing the expected value.
  SessionBuilder b;
  b.start("stable").turn({"shell"});
  BOOST_TEST(state_hash(b.state(), 1).hex() == "129926b89c6631022a0b5c7d11d6d920");
  BOOST_TEST(state_hash(b.state(), 2).hex() == "a50ea53565bd839a5c014a8945bea6b9");
}

BOOST_AUTO_TEST_CASE(every_field_takes_part_in_the_hash) {
  SessionState base;
  Digest128 h0 = state_hash(base);
  std::apply(
      [&](const auto&... f) {
        (
            [&] {
              if (f.tag == SessionState::kMessagesTag) return;  // covered by messages_digest
              SessionState changed = base;
              testing::fill(changed.*(f.member), 3);
              BOOST_TEST(!(state_hash(changed) == h0), "field " << f.name << " does not change the hash");
            }(),
            ...);
      },
      SessionState::fields());
}

BOOST_AUTO_TEST_CASE(messages_enter_the_hash_through_their_digest) {
  SessionBuilder b;
  b.start().turn({"shell"});
  SessionState s = b.state();
  Digest128 before = state_hash(s);
  s.messages[1].text += "!";
  s.messages_digest = digest_messages(s.messages);
  BOOST_TEST(!(state_hash(s) == before));
}

BOOST_AUTO_TEST_CASE(incremental_digest_equals_a_fresh_one) {
  SessionBuilder b;
  b.start();
  for (int i = 0; i < 20; ++i) b.turn({"shell", "read_file"});
  BOOST_TEST((b.state().messages_digest == digest_messages(b.state().messages)));
  BOOST_TEST(b.state().messages.size() == 1u + 20 * 3);
}

BOOST_AUTO_TEST_CASE(snapshot_round_trips) {
  SessionBuilder b;
  b.start();
  for (int i = 0; i < 5; ++i) b.turn({"shell"});
  std::string bytes = encode_state(b.state());
  SessionState back;
  CHECK_OK(decode_state(bytes, &back));
  BOOST_TEST((back == b.state()));
  BOOST_TEST((state_hash(back) == state_hash(b.state())));
}

BOOST_AUTO_TEST_CASE(a_snapshot_whose_messages_were_altered_is_refused) {
  SessionBuilder b;
  b.start().turn({"shell"});
  SessionState tampered = b.state();
  tampered.messages[0].text = "a different task";  // digest left as it was
  SessionState out;
  Status s = decode_state(encode_state(tampered), &out);
  BOOST_TEST(s.is_corruption());
  BOOST_TEST(s.message().find("messages digest") != std::string::npos);
  BOOST_TEST(decode_state("\xff\xff", &out).is_corruption());
}

BOOST_AUTO_TEST_SUITE_END()
