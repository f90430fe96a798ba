# Finds RE2 (Debian: libre2-dev, which ships no CMake package) and defines the
# imported target re2::re2, the name RE2's own package exports.
find_path(re2_INCLUDE_DIR re2/re2.h)
find_library(re2_LIBRARY NAMES re2)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(re2 REQUIRED_VARS re2_LIBRARY re2_INCLUDE_DIR)
if(re2_FOUND AND NOT TARGET re2::re2)
  find_package(Threads REQUIRED)
  add_library(re2::re2 UNKNOWN IMPORTED)
  set_target_properties(re2::re2 PROPERTIES
    IMPORTED_LOCATION "${re2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${re2_INCLUDE_DIR}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${re2_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
mark_as_advanced(re2_INCLUDE_DIR re2_LIBRARY)
