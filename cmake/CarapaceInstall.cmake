# The library as others use it: the carapace::carapace target (in this build,
# for add_subdirectory, and exported by `cmake --install`), the public header
# tree, the CMake package and the pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(CarapaceHeaders)

carapace_stage_public_headers("${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}/include" carapace_public_headers)

# The project libraries carapace_runtime needs, in link order (a library
# before the ones it depends on), found from their link properties so that a
# library added later is installed without being listed here.
function(_carapace_visit t)
  get_property(order GLOBAL PROPERTY _carapace_link_order)
  get_property(seen GLOBAL PROPERTY _carapace_link_seen)
  if("${t}" IN_LIST seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY _carapace_link_seen "${t}")
  get_target_property(deps ${t} LINK_LIBRARIES)
  foreach(d IN LISTS deps)
    if(TARGET "${d}")
      get_target_property(imported ${d} IMPORTED)
      get_target_property(type ${d} TYPE)
      if(NOT imported AND type STREQUAL "STATIC_LIBRARY")
        _carapace_visit(${d})
      endif()
    endif()
  endforeach()
  get_property(order GLOBAL PROPERTY _carapace_link_order)
  list(PREPEND order "${t}")
  set_property(GLOBAL PROPERTY _carapace_link_order "${order}")
endfunction()
function(carapace_link_closure target out_var)
  set_property(GLOBAL PROPERTY _carapace_link_order "")
  set_property(GLOBAL PROPERTY _carapace_link_seen "")
  _carapace_visit(${target})
  get_property(order GLOBAL PROPERTY _carapace_link_order)
  set(${out_var} "${order}" PARENT_SCOPE)
endfunction()
carapace_link_closure(carapace_runtime carapace_libraries)

# The target a consumer links. Only the public header tree and the C++20
# requirement reach the consumer's compile lines; the project's libraries are
# linked but their include paths and warning flags stay behind (LINK_ONLY).
# (carapace_library: the command owns the name `carapace`; exported as carapace::carapace.)
add_library(carapace_library INTERFACE)
add_library(carapace::carapace ALIAS carapace_library)
set_target_properties(carapace_library PROPERTIES EXPORT_NAME carapace)
target_include_directories(carapace_library INTERFACE $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
                                                      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(carapace_library INTERFACE cxx_std_20)
target_link_libraries(carapace_library INTERFACE nlohmann_json::nlohmann_json $<LINK_ONLY:carapace_runtime>)

install(TARGETS carapace_library ${carapace_libraries} EXPORT carapaceTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY "${PROJECT_BINARY_DIR}/include/carapace" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(carapace_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/carapace)
install(EXPORT carapaceTargets NAMESPACE carapace:: DESTINATION ${carapace_cmake_dir})
configure_package_config_file(cmake/carapaceConfig.cmake.in "${PROJECT_BINARY_DIR}/carapaceConfig.cmake"
                              INSTALL_DESTINATION ${carapace_cmake_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/carapaceConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
# CAF 0.17, libxxhash and Debian's RE2 ship no CMake package: the find modules travel with ours.
install(FILES "${PROJECT_BINARY_DIR}/carapaceConfig.cmake" "${PROJECT_BINARY_DIR}/carapaceConfigVersion.cmake"
              cmake/FindCAF.cmake cmake/FindxxHash.cmake cmake/Findre2.cmake
        DESTINATION ${carapace_cmake_dir})

# pkg-config: relocatable (paths from the .pc file's own place).
file(RELATIVE_PATH carapace_pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
set(carapace_pc_libs "")
foreach(lib IN LISTS carapace_libraries)
  string(APPEND carapace_pc_libs " -l${lib}")
endforeach()
configure_file(cmake/carapace.pc.in "${PROJECT_BINARY_DIR}/carapace.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/carapace.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
