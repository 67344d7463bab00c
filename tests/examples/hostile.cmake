# example.fashion_mnist_hostile: examples/fashion_mnist given bad options and hostile
# checkpoints must refuse each with a message that names the option, or the file and the
# key, and exit with an error: never crash, never train on, never exit 0.
#   cmake -DTRAINER=<fashion_mnist> -DTOOL=<checkpoint_tool> -DDATA_DIR=<fashion-mnist dir>
#         -DWORK_DIR=<dir> -P hostile.cmake
foreach(var TRAINER TOOL DATA_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "hostile.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(data --data "${DATA_DIR}")

# Runs the trainer with ARGN; it must fail (exit 1 or 2, not a signal) and its output
# must contain EXPECTED (a plain string, not a regex).
function(refused name expected)
  execute_process(COMMAND "${TRAINER}" ${ARGN}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT (status EQUAL 1 OR status EQUAL 2))
    message(FATAL_ERROR "${name}: exit status '${status}', expected a refusal (1 or 2):\n${out}\n${err}")
  endif()
  string(FIND "${out}${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${name}: the message does not say '${expected}':\n${out}\n${err}")
  endif()
  message(STATUS "${name}: refused (${status}): ${expected}")
endfunction()

function(tool)
  execute_process(COMMAND "${TOOL}" ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "checkpoint_tool ${ARGN} failed (${status}):\n${out}\n${err}")
  endif()
endfunction()

# ---- options: every number range-checked, named in the message ----
refused("epochs not a number" "--epochs must be an integer from 1 to 100000, not 'abc'" --epochs abc ${data})
refused("epochs past int" "--epochs must be an integer from 1 to 100000, not '2147483648'" --epochs 2147483648 ${data})
refused("epochs as a huge double" "--epochs must be an integer" --epochs 1e300 ${data})
refused("epochs zero" "--epochs must be an integer from 1" --epochs 0 ${data})
refused("negative seed" "--seed must be an integer from 0 to 18446744073709551615, not '-1'" --seed -1 ${data})
refused("seed past 2^64" "--seed must be an integer" --seed 18446744073709551616 ${data})
refused("batch size zero" "--batch-size must be an integer from 1 to 60000, not '0'" --batch-size 0 ${data})
refused("batch size fraction" "--batch-size must be an integer" --batch-size 2.5 ${data})
refused("lr NaN" "--lr must be a number in (0, 10], not 'nan'" --lr nan ${data})
refused("lr negative" "--lr must be a number in (0, 10], not '-1'" --lr -1 ${data})
refused("weight decay too large" "--weight-decay must be a number in [0, 1], not '2'" --weight-decay 2 ${data})
refused("limit zero" "--limit must be an integer from 1" --limit 0 ${data})
refused("stop after the end" "--stop-after 5 is after the last epoch (--epochs 2)" --epochs 2 --stop-after 5 ${data})
refused("missing value" "--lr needs a value" --lr)

# ---- a --checkpoint that cannot be written is refused before training ----
file(WRITE "${WORK_DIR}/a-file" "")
refused("checkpoint under a file" "--checkpoint '${WORK_DIR}/a-file/ckpt.safetensors': '${WORK_DIR}/a-file' is not a directory"
  --checkpoint "${WORK_DIR}/a-file/ckpt.safetensors" ${data})
refused("checkpoint is a directory" "--checkpoint '${WORK_DIR}' is a directory" --checkpoint "${WORK_DIR}" ${data})

# ---- a configuration that would train no step ----
refused("zero steps" "--batch-size 5000 is larger than the 1000 training images (--limit 1000): an epoch would train no step"
  --batch-size 5000 --limit 1000 ${data})

# ---- checkpoints read back: every value checked, the file and the key named ----
set(run --model mlp --epochs 3 --limit 512 --batch-size 64 --seed 3 ${data})
set(base "${WORK_DIR}/base.safetensors")
execute_process(COMMAND "${TRAINER}" ${run} --checkpoint "${base}" --stop-after 1
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the first epoch failed (${status}):\n${out}\n${err}")
endif()

set(bad "${WORK_DIR}/bad.safetensors")
function(refused_checkpoint name expected)  # ARGN: extra trainer options
  refused("${name}" "${expected}" ${run} --checkpoint "${bad}" --resume ${ARGN})
endfunction()

foreach(epoch abc 2147483647 -5 3 1.5 "")
  tool(set-metadata "${base}" "${bad}" "epoch=${epoch}")
  refused_checkpoint("epoch '${epoch}'" "checkpoint '${bad}': key 'epoch' is '${epoch}', not an integer from 0 to 2")
endforeach()
tool(set-metadata "${base}" "${bad}" "model=cnn")
refused_checkpoint("other model" "checkpoint '${bad}': key 'model' is 'cnn', but --model is mlp")
tool(set-metadata "${base}" "${bad}" "luminal.optimizer=sgd")
refused_checkpoint("other optimizer" "checkpoint '${bad}': key 'luminal.optimizer' is 'sgd'")
tool(set-metadata "${base}" "${bad}" "luminal.step=7")
refused_checkpoint("step count" "checkpoint '${bad}': key 'luminal.step' is 7, but epoch 1 ends at step 8 with 8 steps per epoch")
tool(set-metadata "${base}" "${bad}" "luminal.step=abc")
refused_checkpoint("step count text" "checkpoint '${bad}': key 'luminal.step' is 'abc'")
file(COPY_FILE "${base}" "${bad}")
refused_checkpoint("other batch size" "was trained with other settings: --batch-size is 32 in this run, 64 in the checkpoint" --batch-size 32)
# The step count still tells another batch size when the settings are allowed to change.
refused_checkpoint("other batch size, changes allowed" "key 'luminal.step' is 8, but epoch 1 ends at step 16 with 16 steps per epoch"
  --batch-size 32 --allow-changes)
# Other settings (issue 63): refused naming each change, before anything is written.
refused_checkpoint("other seed" "--seed is 4 in this run, 3 in the checkpoint (resume with the same options, or pass --allow-changes" --seed 4)
refused_checkpoint("other lr" "--lr is 0.01 in this run, 0.001 in the checkpoint" --lr 0.01)
refused_checkpoint("other weight decay" "--weight-decay is 0.5 in this run, 0 in the checkpoint" --weight-decay 0.5)
refused_checkpoint("other epochs" "--epochs is 4 in this run, 3 in the checkpoint" --epochs 4)
refused_checkpoint("other limit" "--limit is 256 in this run, 512 in the checkpoint" --limit 256)
refused_checkpoint("other model, changes allowed" "holds another model: --model is cnn in this run, mlp in the checkpoint"
  --model cnn --allow-changes)
# A checkpoint whose tensors are another model's, or that declares 2 GB it does not need,
# is refused from its header alone (the 2 GB are never read).
execute_process(COMMAND "${TOOL}" sparse "${WORK_DIR}/sparse.safetensors" junk 2147483648 RESULT_VARIABLE status)
string(TIMESTAMP t0 "%s")
refused("sparse 2 GB tensor" "which the model needs (f32 "
  ${run} --checkpoint "${WORK_DIR}/sparse.safetensors" --resume --allow-changes)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
if(seconds GREATER 20)
  message(FATAL_ERROR "refusing the sparse 2 GB checkpoint took ${seconds} s: was it read?")
endif()
refused_checkpoint("stop before the checkpoint" "--stop-after 1 is not after epoch 1" --stop-after 1)
tool(set-element "${base}" "${bad}" fc1.weight 5 nan)
refused_checkpoint("NaN weight" "checkpoint '${bad}': tensor 'fc1.weight' holds nan at element 5")
tool(set-element "${base}" "${bad}" optimizer.exp_avg_sq.fc2.bias 0 -1)
refused_checkpoint("negative second moment" "tensor 'optimizer.exp_avg_sq.fc2.bias' holds -1")
# The 160 KB file that crashed --resume with signal 11 (a stack overflow in formatting
# the message): its shape's first extent is an array nested 80000 deep, refused as soon
# as it is seen, with a short excerpt of it.
tool(nested "${bad}" 80000)
refused_checkpoint("deeply nested shape" "checkpoint '${bad}': tensor 'fc1.weight': shape[0] is [[[[[[[[")

# Refused resumes leave the checkpoint as it was; the debris of a killed save goes.
file(SHA256 "${base}" base_before)
file(WRITE "${base}.tmp-4194311-0" "half a save")
refused("resume under another seed" "--seed is 4 in this run" ${run} --seed 4 --checkpoint "${base}" --resume)
file(SHA256 "${base}" base_after)
if(NOT base_before STREQUAL base_after OR EXISTS "${base}.tmp-4194311-0")
  message(FATAL_ERROR "a refused resume changed the checkpoint or left a killed save's temporary file")
endif()

# The untouched checkpoint still resumes.
execute_process(COMMAND "${TRAINER}" ${run} --checkpoint "${base}" --resume
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "final test accuracy")
  message(FATAL_ERROR "resuming the untouched checkpoint failed (${status}):\n${out}\n${err}")
endif()
message(STATUS "every hostile option and checkpoint was refused by name; the untouched checkpoint resumed")
