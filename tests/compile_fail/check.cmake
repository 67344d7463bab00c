# Runs one compile-fail check (cmake -P):
#   cmake -DBUILD_DIR=<build> -DTARGET=cf_<name> -DREGEX_FILE=<file> [-DCONFIG=<cfg>] -P check.cmake
# Passes only if building TARGET fails AND the build output matches the regex in
# REGEX_FILE (CMake regex syntax; '.' also matches newlines). Prints the output otherwise.
foreach(var BUILD_DIR TARGET REGEX_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${REGEX_FILE}" regex)
string(STRIP "${regex}" regex)
if(regex STREQUAL "")
  message(FATAL_ERROR "check.cmake: empty regex in ${REGEX_FILE}")
endif()

set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" ${config_args}
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)

if(result EQUAL 0)
  message("${output}")
  message(FATAL_ERROR "compile_fail: ${TARGET} COMPILED, but it must not. Expected a "
                      "diagnostic matching:\n  ${regex}")
endif()

if(NOT output MATCHES "${regex}")
  message("${output}")
  message(FATAL_ERROR "compile_fail: ${TARGET} failed to compile (exit ${result}), but "
                      "the output above does not match the expected diagnostic:\n  ${regex}")
endif()

message(STATUS "compile_fail: ${TARGET} failed to compile as expected; output matches: ${regex}")
