# Everything floe builds against, found where scripts/setup.sh put it. Nothing is vendored:
# Debian's packages on a developer machine or CI, or the copies scripts/stage-deps.sh carries
# to a machine without a network (.deps/include, .deps/googletest).
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(CUDAToolkit REQUIRED)

set(FLOE_DEPS_DIR "${PROJECT_SOURCE_DIR}/.deps" CACHE PATH "Project-local dependencies")

# CUTLASS/CuTe headers from the nvidia-cutlass wheel (scripts/setup.sh installs it).
set(FLOE_CUTLASS_INCLUDE "${FLOE_DEPS_DIR}/cutlass/cutlass_library/source/include"
    CACHE PATH "CUTLASS include dir (cutlass_library.source_path + /include)")
if(NOT EXISTS "${FLOE_CUTLASS_INCLUDE}/cute/tensor.hpp")
  message(FATAL_ERROR "CUTLASS headers not found at ${FLOE_CUTLASS_INCLUDE}; run scripts/setup.sh")
endif()
add_library(floe_cutlass INTERFACE)
target_include_directories(floe_cutlass SYSTEM INTERFACE "${FLOE_CUTLASS_INCLUDE}"
  "${CUDAToolkit_INCLUDE_DIRS}/cccl")

if(FLOE_BUILD_TOOLS OR FLOE_BUILD_TESTS)
  find_package(nlohmann_json 3 QUIET)
  if(NOT nlohmann_json_FOUND)
    if(NOT EXISTS "${FLOE_DEPS_DIR}/include/nlohmann/json.hpp")
      message(FATAL_ERROR "nlohmann-json not found; run scripts/setup.sh")
    endif()
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    target_include_directories(nlohmann_json::nlohmann_json INTERFACE "${FLOE_DEPS_DIR}/include")
  endif()
  find_package(CLI11 QUIET)
  if(NOT CLI11_FOUND)
    if(NOT EXISTS "${FLOE_DEPS_DIR}/include/CLI/CLI.hpp")
      message(FATAL_ERROR "CLI11 not found; run scripts/setup.sh")
    endif()
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE "${FLOE_DEPS_DIR}/include")
  endif()
endif()

if(FLOE_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    if(EXISTS "${FLOE_DEPS_DIR}/googletest/CMakeLists.txt")
      set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
      add_subdirectory("${FLOE_DEPS_DIR}/googletest" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    else()
      message(FATAL_ERROR "GoogleTest not found; run scripts/setup.sh")
    endif()
  endif()
endif()
