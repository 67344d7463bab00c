# Runs one compile-fail check (cmake -P):
#   cmake -DBUILD_DIR=<build> -DTARGET=cf_<name> -DREGEX_FILE=<file> [-DCONFIG=<cfg>]
#         [-DSOURCE=<file.cpp> -DDIAGNOSTICS=<file>] -P check.cmake
# Passes only if building TARGET fails AND the build output matches the regex in
# REGEX_FILE (CMake regex syntax; '.' also matches newlines). Prints the output otherwise.
#
# With SOURCE and DIAGNOSTICS (what the compiler itself printed, kept by
# capture_diagnostics.sh), two more promises in the source are checked:
#   a line marked "// error here" is where the compiler's first "error:" points, and that
#   first error line alone matches the regex (it names the problem and both shapes);
#   "// at most N lines of at most M characters" bounds the compiler's whole output (in
#   bytes, its paths counted from the source tree's root).
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
if(DEFINED DIAGNOSTICS)
  file(REMOVE "${DIAGNOSTICS}")
endif()
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

if(DEFINED SOURCE AND DEFINED DIAGNOSTICS)
  if(NOT EXISTS "${DIAGNOSTICS}")
    message(FATAL_ERROR "compile_fail: ${TARGET}: the compiler's output was not kept in "
                        "${DIAGNOSTICS} (capture_diagnostics.sh did not run)")
  endif()
  file(READ "${SOURCE}" source_text)
  file(READ "${DIAGNOSTICS}" diagnostics)
  # One list element per line: ';' and brackets would split or join CMake list elements.
  string(REPLACE ";" "," diagnostics_list "${diagnostics}")
  string(REPLACE "[" "(" diagnostics_list "${diagnostics_list}")
  string(REPLACE "]" ")" diagnostics_list "${diagnostics_list}")
  string(REGEX REPLACE "\n$" "" diagnostics_list "${diagnostics_list}")
  string(REPLACE "\n" ";" diagnostics_list "${diagnostics_list}")

  string(FIND "${source_text}" "// error here" marker)
  if(NOT marker EQUAL -1)
    string(SUBSTRING "${source_text}" 0 ${marker} before_marker)
    string(REGEX MATCHALL "\n" newlines "${before_marker}")
    list(LENGTH newlines error_line)
    math(EXPR error_line "${error_line} + 1")
    get_filename_component(source_name "${SOURCE}" NAME)
    set(first_error "")
    foreach(line IN LISTS diagnostics_list)
      if(line MATCHES ": error: ")
        set(first_error "${line}")
        break()
      endif()
    endforeach()
    if(NOT first_error MATCHES "${source_name}:${error_line}:[0-9]+: error: ")
      message("${diagnostics}")
      message(FATAL_ERROR "compile_fail: ${TARGET}: the first error must point at "
                          "${source_name}:${error_line} (the line marked '// error here'), "
                          "but it is:\n  ${first_error}")
    endif()
    if(NOT first_error MATCHES "${regex}")
      message("${diagnostics}")
      message(FATAL_ERROR "compile_fail: ${TARGET}: the first error line does not match "
                          "${regex}:\n  ${first_error}")
    endif()
    message(STATUS "compile_fail: the first error points at ${source_name}:${error_line} "
                   "and matches the expected diagnostic")
  endif()

  if(source_text MATCHES "// at most ([0-9]+) lines of at most ([0-9]+) characters")
    set(max_lines ${CMAKE_MATCH_1})
    set(max_length ${CMAKE_MATCH_2})
    list(LENGTH diagnostics_list line_count)
    # Lengths without the checkout's path, which differs from one machine to the next.
    get_filename_component(root "${SOURCE}" DIRECTORY)
    get_filename_component(root "${root}" DIRECTORY)
    get_filename_component(root "${root}" DIRECTORY)
    string(REPLACE "${root}/" "" diagnostics_list "${diagnostics_list}")
    set(longest 0)
    foreach(line IN LISTS diagnostics_list)
      string(LENGTH "${line}" length)
      if(length GREATER longest)
        set(longest ${length})
      endif()
    endforeach()
    if(line_count GREATER max_lines OR longest GREATER max_length)
      message("${diagnostics}")
      message(FATAL_ERROR "compile_fail: ${TARGET}: the compiler printed ${line_count} lines, "
                          "the longest ${longest} characters; the promise is at most "
                          "${max_lines} lines of at most ${max_length} characters")
    endif()
    message(STATUS "compile_fail: ${line_count} lines, the longest ${longest} characters "
                   "(at most ${max_lines} of ${max_length})")
  endif()
endif()
