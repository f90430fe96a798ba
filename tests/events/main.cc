#define BOOST_TEST_MODULE events_test
#include <boost/test/unit_test.hpp>
