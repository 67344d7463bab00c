# example.<trainer>_mpi_mismatch (issue 63): 2 ranks of a data-parallel example started
# with different options (MPMD: `mpiexec -n 1 T A : -n 1 T B`) must each end within 30 s,
# with luminal's message naming the option and both values, and a non-zero exit: never a
# hang, never MPI's own error alone, never training apart.
#   cmake -DMPIEXEC=<mpiexec> -DTRAINER=<fashion_mnist|char_gpt> -DCOMMON="--model|mlp|..."
#         -DCASES="--epochs|1|2+--batch-size|64|128+--lr|0.001|5" -P mpi_mismatch.cmake
# (COMMON: options separated by '|'; CASES: option|rank 0's value|rank 1's, separated by '+')
foreach(var MPIEXEC TRAINER COMMON CASES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "mpi_mismatch.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" COMMON "${COMMON}")
string(REPLACE "+" ";" CASES "${CASES}")

foreach(case IN LISTS CASES)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 option)
  list(GET parts 1 first)
  list(GET parts 2 second)
  string(TIMESTAMP start "%s")
  execute_process(
    COMMAND "${MPIEXEC}" -n 1 "${TRAINER}" ${COMMON} ${option} ${first} : -n 1 "${TRAINER}" ${COMMON} ${option} ${second}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  set(expected "the ranks' settings differ: ${option} is ${first} on rank 0, ${second} on rank 1")
  string(FIND "${out}${err}" "${expected}" at)
  if(status EQUAL 0 OR at EQUAL -1 OR seconds GREATER 30)
    message(FATAL_ERROR "${option} ${first} and ${second}: exit status '${status}' after ${seconds} s; expected a "
                        "refusal within 30 s saying '${expected}':\n${out}\n${err}")
  endif()
  # Both ranks print it: the error is one, on every rank.
  string(REGEX MATCHALL "error on rank [01]: luminal: the ranks' settings differ" ranks "${out}${err}")
  list(LENGTH ranks count)
  if(NOT count EQUAL 2)
    message(FATAL_ERROR "${option}: ${count} ranks reported the difference, not 2:\n${out}\n${err}")
  endif()
  message(STATUS "${option} ${first} / ${second}: refused on both ranks after ${seconds} s, exit status ${status}")
endforeach()
