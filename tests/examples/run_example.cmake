# What the example tests that feed a program on stdin share (include()d by
# sentence_embed.cmake and llama_generate.cmake, which define PROGRAM):
#   run(WHAT EXPECTED INPUT_FILE ARGS...)   runs PROGRAM with ARGS and INPUT_FILE on stdin;
#                                           it must exit with EXPECTED (a signal or another
#                                           status fails the test, naming WHAT); sets out, err
#   require_text(WHERE HAYSTACK NEEDLE)     fails naming WHERE unless HAYSTACK holds NEEDLE
function(run what expected input)
  execute_process(COMMAND "${PROGRAM}" ${ARGN} INPUT_FILE "${input}"
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status STREQUAL "${expected}")
    message(FATAL_ERROR "${what}: exit status '${status}', expected ${expected}:\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(require_text where haystack needle)
  string(FIND "${haystack}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${where}: the output does not say '${needle}':\n${haystack}")
  endif()
endfunction()
