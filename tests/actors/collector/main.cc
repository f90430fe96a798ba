#define BOOST_TEST_MODULE collector_test
#include <boost/test/unit_test.hpp>
