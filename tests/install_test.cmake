# Installs floe into a prefix inside the build tree, then configures and builds a consumer
# project against it with find_package(floe), and runs it.
set(floe_prefix ${CMAKE_BINARY_DIR}/install-test/prefix)
set(consumer_build ${CMAKE_BINARY_DIR}/install-test/consumer)
add_test(NAME install.find_package_consumer
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${floe_prefix}
    -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/install/consumer -DCONSUMER_BUILD=${consumer_build}
    -DGENERATOR=${CMAKE_GENERATOR}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/install/run_consumer.cmake)
set_tests_properties(install.find_package_consumer PROPERTIES LABELS cpu
  PASS_REGULAR_EXPRESSION "engine: [a-z0-9]+")
