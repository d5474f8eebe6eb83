# Extra test registrations, included by tests/CMakeLists.txt.

# The command line end to end: cli_test runs the built floe binary.
if(TARGET cli_test AND TARGET floe_cli)
  target_compile_definitions(cli_test PRIVATE FLOE_CLI="$<TARGET_FILE:floe_cli>"
                                              FLOE_CASES_DIR="${CMAKE_CURRENT_SOURCE_DIR}/cases")
  add_dependencies(cli_test floe_cli)
endif()

# floe bench: the command without a GPU (bench_cli_test runs the built floe binary), and its
# problem list and FLOP count, which live among the floe_cli sources: compiled in here too.
if(TARGET bench_cli_test)
  target_sources(bench_cli_test PRIVATE ${PROJECT_SOURCE_DIR}/tools/floe/bench/bench_problems.cc)
  target_include_directories(bench_cli_test PRIVATE ${PROJECT_SOURCE_DIR}/tools/floe/bench)
  if(TARGET floe_cli)
    target_compile_definitions(bench_cli_test PRIVATE FLOE_CLI="$<TARGET_FILE:floe_cli>")
    add_dependencies(bench_cli_test floe_cli)
  endif()
endif()

# The check made outside floe: numpy recomputes every hand-written case under tests/cases in
# fp64 from DESIGN §2 and compares with `floe run --device cpu`. Skips (77) without numpy.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND TARGET floe_cli)
  add_test(NAME external_check
           COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PROJECT_SOURCE_DIR}/.deps/python
                   ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cpu/external_check.py
                   --floe $<TARGET_FILE:floe_cli> --cases ${CMAKE_CURRENT_SOURCE_DIR}/cases
                   --work ${CMAKE_CURRENT_BINARY_DIR}/external_check)
  set_tests_properties(external_check PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

# The same outside check over ragged and paged cases (DESIGN 2.1, 2.2, 4): numpy unpacks the
# packed and paged inputs itself, clamps the slots as DESIGN says and packs the expected
# outputs (tokens outside every slot must come back untouched). A folder of its own: the
# GPU engines decline these layouts for now, and tests/cases must route to a GPU engine.
if(Python3_Interpreter_FOUND AND TARGET floe_cli)
  add_test(NAME external_check_serving
           COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PROJECT_SOURCE_DIR}/.deps/python
                   ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cpu/external_check.py
                   --floe $<TARGET_FILE:floe_cli> --cases ${CMAKE_CURRENT_SOURCE_DIR}/cases_serving
                   --work ${CMAKE_CURRENT_BINARY_DIR}/external_check_serving)
  set_tests_properties(external_check_serving PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
