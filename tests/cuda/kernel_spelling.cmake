# CTest cuda.kernel_types_spelled_exactly: a GPU bug shown without a GPU.
#
# nvcc's cudafe++ writes every kernel's template arguments into the host code it
# generates, and registers each kernel under that spelling. It writes a floating-point
# template argument with 6 significant digits, so a kernel whose type held 1.44269502f was
# registered as the kernel of 1.4427f, another type, and launching the real one failed with
# "invalid device function" (seen on an H200). Kernel types therefore hold constants as
# integer bits (flat::constant, Pad's ValueBits). This script compiles kernel_spelling.cu
# through nvcc's front ends and fails if a kernel registration spells a float or double.
#
#   cmake -DNVCC=<nvcc> -DHOST_CXX=<host compiler> -DSOURCE=<kernel_spelling.cu>
#         -DINCLUDES=<dir|dir> -DARCH=<90> -DWORK=<scratch dir> -P kernel_spelling.cmake
foreach(var NVCC HOST_CXX SOURCE INCLUDES ARCH WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "kernel_spelling.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPLACE "|" ";" INCLUDES "${INCLUDES}")
set(include_flags "")
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()
execute_process(
  COMMAND "${NVCC}" -ccbin "${HOST_CXX}" -std=c++20 --expt-relaxed-constexpr
          "--generate-code=arch=compute_${ARCH},code=sm_${ARCH}" ${include_flags}
          -Xcudafe=--diag_suppress=186,--diag_suppress=550,--diag_suppress=177
          -cuda --keep --keep-dir "${WORK}" "${SOURCE}" -o "${WORK}/kernel_spelling.ii"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (${rc}):\n${out}")
endif()
file(GLOB stubs "${WORK}/*.stub.c")
if(NOT stubs)
  message(FATAL_ERROR "nvcc left no .stub.c in ${WORK} (did --keep change?)")
endif()
file(READ "${stubs}" stub)
string(FIND "${stub}" "__cudaRegisterEntry" registered)
if(registered EQUAL -1)
  message(FATAL_ERROR "the stub registers no kernel: the check would see nothing")
endif()
string(REGEX MATCH "\\((float|double)\\)[-0-9.e+]+" spelled "${stub}")
if(spelled)
  message(FATAL_ERROR "a kernel registration spells the floating-point template argument '${spelled}': "
                      "nvcc rounds it, and that kernel would fail to launch (invalid device function)")
endif()
message(STATUS "kernel types hold no floating-point template arguments")
