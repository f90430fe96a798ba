#define BOOST_TEST_MODULE provider_test
#include <boost/test/unit_test.hpp>
