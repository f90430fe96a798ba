#define BOOST_TEST_MODULE schedule_test
#include <boost/test/unit_test.hpp>
