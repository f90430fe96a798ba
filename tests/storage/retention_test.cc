#include <boost/test/unit_test.hpp>

#include "storage/retention.h"

using namespace carapace;

namespace {

constexpr int64_t kDay = 86400LL * 1'000'000;

RetentionInputs home_with_three_bodies() {
  RetentionInputs in;
  in.now_us = 100 * kDay;
  in.bodies = {{"aaa", 100}, {"bbb", 200}, {"ccc", 300}, {"ddd", 50}};
  in.last_referenced_us = {{"aaa", 10 * kDay}, {"bbb", 95 * kDay}, {"ccc", 60 * kDay}};  // ddd: by no event
  in.session_updated_us = {{"old", 20 * kDay}, {"new", 99 * kDay}};
  return in;
}

std::vector<std::string> refs(const RetentionPlan& plan) {
  std::vector<std::string> out;
  for (const auto& b : plan.bodies) out.push_back(b.ref);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(retention)

BOOST_AUTO_TEST_CASE(age_removes_bodies_last_referenced_before_it_and_those_no_event_names) {
  RetentionPlan plan = plan_retention(RetentionPolicy{.max_age_us = 30 * kDay}, home_with_three_bodies());
  // Day 100, 30 days: before day 70 goes (aaa, day 10; ccc, day 60), and ddd, named by no event.
  BOOST_TEST(refs(plan) == (std::vector<std::string>{"aaa", "ccc", "ddd"}));
  BOOST_TEST(plan.unreferenced == 1u);
  BOOST_TEST(plan.body_bytes_removed == 450u);
  BOOST_TEST(plan.body_bytes_kept == 200u);
  BOOST_TEST(plan.span_sessions == std::vector<std::string>{"old"});
}

BOOST_AUTO_TEST_CASE(size_removes_the_oldest_referenced_first_until_the_rest_fit) {
  RetentionPlan plan = plan_retention(RetentionPolicy{.max_body_bytes = 250}, home_with_three_bodies());
  // ddd (no reference) goes first; then aaa (day 10), ccc (day 60): bbb (day 95, 200 B) fits.
  BOOST_TEST(refs(plan) == (std::vector<std::string>{"ddd", "aaa", "ccc"}));
  BOOST_TEST(plan.body_bytes_kept == 200u);
  BOOST_TEST(plan.span_sessions.empty());  // no age limit: spans stay
}

BOOST_AUTO_TEST_CASE(no_limit_keeps_every_referenced_body) {
  RetentionPlan plan = plan_retention(RetentionPolicy{}, home_with_three_bodies());
  BOOST_TEST(refs(plan) == std::vector<std::string>{"ddd"});
  BOOST_TEST(plan.body_bytes_kept == 600u);
}

BOOST_AUTO_TEST_CASE(a_limit_already_met_removes_nothing_referenced) {
  RetentionPlan plan =
      plan_retention(RetentionPolicy{.max_age_us = 365 * kDay, .max_body_bytes = 10'000}, home_with_three_bodies());
  BOOST_TEST(refs(plan) == std::vector<std::string>{"ddd"});
  BOOST_TEST(plan.span_sessions.empty());
}

BOOST_AUTO_TEST_SUITE_END()
