# example.options (issue 63): every example reads its numbers and LUMINAL_NUM_THREADS
# strictly: a bad one is a one-line error naming it, exit status 2, before any work.
#   cmake -DQUICKSTART=<quickstart> -DHEAT_SOURCE=<heat_source> -DPINN=<pinn>
#         [-DSENTENCE_EMBED=<sentence_embed>] -P options.cmake
foreach(var QUICKSTART HEAT_SOURCE PINN)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "options.cmake: -D${var}=... is required")
  endif()
endforeach()

# Runs ARGN with LUMINAL_NUM_THREADS=THREADS ("" leaves it unset): exit status 2 and one
# line on standard error that says EXPECTED.
function(refused name threads expected)
  if(threads STREQUAL "")
    unset(ENV{LUMINAL_NUM_THREADS})
  else()
    set(ENV{LUMINAL_NUM_THREADS} "${threads}")
  endif()
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  unset(ENV{LUMINAL_NUM_THREADS})
  string(FIND "${err}" "${expected}" at)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT status STREQUAL "2" OR at EQUAL -1 OR NOT lines EQUAL 1)
    message(FATAL_ERROR "${name}: exit status '${status}', ${lines} lines; expected 2 and one line saying "
                        "'${expected}':\n${out}\n${err}")
  endif()
  message(STATUS "${name}: refused: ${err}")
endfunction()

set(threads_message "LUMINAL_NUM_THREADS must be an integer from 1 to")
foreach(threads 100000 abc 0 -1 1e3 " 2" 99999999999999999999)
  refused("quickstart, LUMINAL_NUM_THREADS='${threads}'" "${threads}" "${threads_message}" "${QUICKSTART}")
endforeach()
refused("heat_source, LUMINAL_NUM_THREADS=abc" abc "${threads_message}" "${HEAT_SOURCE}")
refused("pinn, LUMINAL_NUM_THREADS=0" 0 "${threads_message}" "${PINN}")
refused("heat_source --steps 2^31-1" "" "--steps must be an integer from 1 to 100000, not '2147483647'"
  "${HEAT_SOURCE}" --steps 2147483647)
refused("heat_source --iterations 1e3" "" "--iterations must be an integer from 1 to 1000000, not '1e3'"
  "${HEAT_SOURCE}" --iterations 1e3)
refused("heat_source without a value" "" "--steps needs a value" "${HEAT_SOURCE}" --steps)
refused("heat_source unknown option" "" "unknown argument '--step'" "${HEAT_SOURCE}" --step 5)
refused("pinn --lr -1" "" "--lr must be a number in (0, 1], not '-1'" "${PINN}" --lr -1)
refused("pinn --points 1e9" "" "--points must be an integer from 1 to 1000000, not '1e9'" "${PINN}" --points 1e9)
refused("pinn --seed -1" "" "--seed must be an integer from 0 to 18446744073709551615, not '-1'" "${PINN}" --seed -1)
if(SENTENCE_EMBED)
  refused("sentence_embed --batch 0" "" "--batch must be an integer from 1 to 256, not '0'" "${SENTENCE_EMBED}" --batch 0)
  refused("sentence_embed --top abc" "" "--top must be an integer from 1 to 100000, not 'abc'" "${SENTENCE_EMBED}" --top abc)
  refused("sentence_embed, LUMINAL_NUM_THREADS=-1" -1 "${threads_message}" "${SENTENCE_EMBED}")
endif()

# A valid value runs.
set(ENV{LUMINAL_NUM_THREADS} 1)
execute_process(COMMAND "${QUICKSTART}" RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "quickstart with LUMINAL_NUM_THREADS=1 failed (${status}):\n${out}\n${err}")
endif()
message(STATUS "quickstart with LUMINAL_NUM_THREADS=1 runs")
