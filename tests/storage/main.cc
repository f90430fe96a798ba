#define BOOST_TEST_MODULE storage_test
#include <boost/test/unit_test.hpp>
