# floe as a CMake package: find_package(floe) gives floe::floe.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS floe EXPORT floeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/floe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT floeTargets NAMESPACE floe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floe)
configure_package_config_file(cmake/floeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/floeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floe)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/floeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/floeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/floeConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/floe)
if(FLOE_BUILD_TOOLS)
  install(TARGETS floe_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
