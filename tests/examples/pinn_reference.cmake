# example.pinn_reference: examples/pinn's loss and parameter gradients at initialization
# (its loss holds second derivatives of the network with respect to its input) must match
# PyTorch's for the same network, points and initial parameters (examples/pinn_reference.py,
# to 1e-9 relative in f64). Skipped, saying so, when no Python with torch and numpy is found.
#   cmake -DPROGRAM=<pinn> -DSCRIPT=<pinn_reference.py> -DPYTHON=<python or empty> -DWORK_DIR=<dir> -P pinn_reference.cmake
foreach(var PROGRAM SCRIPT WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "pinn_reference.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT PYTHON)
  # Matched by the test's SKIP_REGULAR_EXPRESSION.
  message(STATUS "pinn_reference: skipped: no Python with torch and numpy (configure with "
                 "-DLUMINAL_TORCH_PYTHON=/path/to/python)")
  return()
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

execute_process(COMMAND "${PROGRAM}" --steps 1 --seed 3 --points 64 --dump-init "${WORK_DIR}/init.safetensors"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "pinn --dump-init failed (${status}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${WORK_DIR}/init.safetensors"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}${err}")
if(status EQUAL 77)
  return()  # the script printed "pinn_reference: skipped: ..."
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "luminal's loss or gradients differ from PyTorch's (exit status ${status})")
endif()
