# example.char_gpt_hostile (issue 63): examples/char_gpt refuses every bad number by name
# (exit 2), a --checkpoint it cannot write before training, and a --resume of another
# model or under other settings before anything is written: the checkpoint stays
# byte-identical. A refused resume still removes the debris of a killed save.
#   cmake -DTRAINER=<char_gpt> -DTOOL=<checkpoint_tool> -DCORPUS=<dir or file> -DWORK_DIR=<dir>
#         -P char_gpt_hostile.cmake
foreach(var TRAINER TOOL CORPUS WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "char_gpt_hostile.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(small --width 128 --context 32 --batch 8 --eval-every 20 --sample 0 --corpus "${CORPUS}")

# Runs the trainer with ARGN; it must exit with STATUS and say EXPECTED (a plain string).
function(refused name status expected)
  execute_process(COMMAND "${TRAINER}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${status}")
    message(FATAL_ERROR "${name}: exit status '${rc}', expected ${status}:\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${name}: the message does not say '${expected}':\n${out}\n${err}")
  endif()
  message(STATUS "${name}: refused (${rc}): ${expected}")
endfunction()

# ---- numbers: the whole text, in range, exit status 2 ----
refused("temperature 0" 2 "--temperature must be a number in (0, 100], not '0'" --temperature 0)
refused("negative temperature" 2 "--temperature must be a number in (0, 100], not '-1'" --temperature -1)
refused("negative lr" 2 "--lr must be a number in (0, 10], not '-1'" --lr -1)
refused("negative weight decay" 2 "--weight-decay must be a number in [0, 1], not '-1'" --weight-decay -1)
refused("negative seed" 2 "--seed must be an integer from 0 to 18446744073709551615, not '-1'" --seed -1)
refused("100000 layers" 2 "--layers must be an integer from 1 to 1000, not '100000'" --layers 100000)
refused("a batch of 10^8" 2 "--batch must be an integer from 1 to 65536, not '100000000'" --batch 100000000)
refused("more than the memory" 2 "more than 90% of this machine's memory"
  --layers 1000 --width 256 --batch 65536 --context 256)
refused("steps as a fraction" 2 "--steps must be an integer" --steps 1.5)
refused("context past the table" 2 "--context must be an integer from 2 to 256, not '257'" --context 257)
refused("width not compiled in" 2 "--width: this build has widths 128 and 256 compiled in, not 64" --width 64)
refused("allow-changes alone" 2 "--allow-changes needs --resume" --allow-changes)
set(ENV{LUMINAL_NUM_THREADS} "1e3")
refused("threads as a real" 2 "LUMINAL_NUM_THREADS must be an integer from 1 to" ${small} --steps 1)
set(ENV{LUMINAL_NUM_THREADS} "1")

# ---- a corpus of more than half the memory is refused from its files' sizes, unread ----
file(MAKE_DIRECTORY "${WORK_DIR}/huge-corpus")
execute_process(COMMAND "${TOOL}" sparse "${WORK_DIR}/huge-corpus/disk.img" junk 1099511627776 RESULT_VARIABLE rc)
if(rc EQUAL 0)  # a 1 TB hole, where the file system allows one
  # A trainer that reads it grows by some 250 MB/s: stopped after 10 s.
  execute_process(COMMAND "${TRAINER}" --width 128 --context 32 --batch 8 --sample 0 --steps 1
    --corpus "${WORK_DIR}/huge-corpus" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 10)
  file(REMOVE "${WORK_DIR}/huge-corpus/disk.img")
  string(FIND "${err}" "its largest file is '${WORK_DIR}/huge-corpus/disk.img'" at)
  if(NOT rc STREQUAL "1" OR at EQUAL -1)
    message(FATAL_ERROR "a 1 TB file in the corpus: exit status '${rc}', expected 1 and a refusal naming it:\n${out}\n${err}")
  endif()
  message(STATUS "a 1 TB file in the corpus: refused (1) unread: ${err}")
endif()

# ---- an unwritable --checkpoint is refused before training ----
file(WRITE "${WORK_DIR}/a-file" "")
refused("checkpoint under a file" 1 "--checkpoint '${WORK_DIR}/a-file/g.safetensors': '${WORK_DIR}/a-file' is not a directory"
  ${small} --layers 2 --steps 1000 --checkpoint "${WORK_DIR}/a-file/g.safetensors")

# ---- a 2-layer checkpoint ----
set(ckpt "${WORK_DIR}/g.safetensors")
execute_process(COMMAND "${TRAINER}" ${small} --layers 2 --steps 20 --checkpoint "${ckpt}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${ckpt}")
  message(FATAL_ERROR "training the 2-layer checkpoint failed (${rc}):\n${out}\n${err}")
endif()
file(SHA256 "${ckpt}" before)

# A killed save's debris beside it (pid 2^22 + 7 runs no process): every start removes it.
set(debris "${ckpt}.tmp-4194311-0")
file(WRITE "${debris}" "half a save")
refused("resume with fewer layers" 1 "holds another model: --layers is 1 in this run, 2 in the checkpoint"
  ${small} --layers 1 --steps 20 --checkpoint "${ckpt}" --resume)
refused("resume with fewer layers, changes allowed" 1 "--layers is 1 in this run, 2 in the checkpoint"
  ${small} --layers 1 --steps 20 --checkpoint "${ckpt}" --resume --allow-changes)
refused("resume with another width" 1 "--width is 256 in this run, 128 in the checkpoint"
  ${small} --layers 2 --width 256 --steps 20 --checkpoint "${ckpt}" --resume)
refused("resume with another seed" 1 "--seed is 2 in this run, 1 in the checkpoint (resume with the same options, or pass --allow-changes"
  ${small} --layers 2 --seed 2 --steps 20 --checkpoint "${ckpt}" --resume)
refused("resume with another lr" 1 "--lr is 0.01 in this run, 0.002 in the checkpoint"
  ${small} --layers 2 --lr 0.01 --steps 20 --checkpoint "${ckpt}" --resume)
refused("resume with another weight decay" 1 "--weight-decay is 0.5 in this run, 0.01 in the checkpoint"
  ${small} --layers 2 --weight-decay 0.5 --steps 20 --checkpoint "${ckpt}" --resume)
# Without the recorded settings (a checkpoint of an older version), the tensors tell.
set(bare "${WORK_DIR}/bare.safetensors")
execute_process(COMMAND "${TOOL}" drop-metadata "${ckpt}" "${bare}" "run." RESULT_VARIABLE rc)
file(SHA256 "${bare}" bare_before)
refused("resume of a bare checkpoint with fewer layers" 1 "holds 'h.1.attn.k.bias', which the model does not have"
  ${small} --layers 1 --steps 20 --checkpoint "${bare}" --resume)
refused("resume of a bare checkpoint with more layers" 1 "has no tensor 'h.2.attn.k.bias', which the model needs"
  ${small} --layers 3 --steps 20 --checkpoint "${bare}" --resume)
file(SHA256 "${ckpt}" after)
file(SHA256 "${bare}" bare_after)
if(NOT before STREQUAL after OR NOT bare_before STREQUAL bare_after)
  message(FATAL_ERROR "a refused resume changed the checkpoint")
endif()
if(EXISTS "${debris}")
  message(FATAL_ERROR "a refused resume left the killed save's '${debris}'")
endif()
message(STATUS "every refused resume left the checkpoints byte-identical (${after}) and removed the debris")

# Changed settings with --allow-changes: a warning naming each, then training on.
execute_process(COMMAND "${TRAINER}" ${small} --layers 2 --lr 0.01 --steps 20 --checkpoint "${ckpt}" --resume
  --allow-changes RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(FIND "${err}" "warning: --lr is 0.01 in this run, 0.002 in the checkpoint (--allow-changes)" at)
if(NOT rc EQUAL 0 OR at EQUAL -1 OR NOT out MATCHES "resumed at step 20")
  message(FATAL_ERROR "resuming with --allow-changes failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "--allow-changes: resumed at step 20 with a warning naming the change")
