#define BOOST_TEST_MODULE replay_test
#include <boost/test/unit_test.hpp>
