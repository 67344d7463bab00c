# install.consumer (cmake -P): install the luminal build tree into a private prefix,
# configure + build tests/consumer against it with find_package(luminal), run the app.
#   -DBUILD_DIR=<luminal build tree> -DCONSUMER_SOURCE_DIR=<tests/consumer>
#   [-DCONFIG=<cfg>] [-DCXX_COMPILER=<c++>] [-DGENERATOR=<generator>]
#   [-DCUDA_COMPILER=<nvcc> -DCUDA_ARCHITECTURES=<archs>]: also build and run app_cuda
#   against luminal::cuda, with the nvcc host-compiler wrapper from the install
#   [-DKOKKOS=ON]: also build and run app_kokkos against luminal::kokkos
foreach(var BUILD_DIR CONSUMER_SOURCE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${BUILD_DIR}/consumer-prefix")
set(consumer_build "${BUILD_DIR}/consumer-build")
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(step description)
  message(STATUS "install.consumer: ${description}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message("${output}")
    message(FATAL_ERROR "install.consumer: '${description}' failed (exit ${result})")
  endif()
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

# Start clean, so files left from an earlier run cannot hide a missing install rule.
file(REMOVE_RECURSE "${prefix}" "${consumer_build}")

step("install to ${prefix}"
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CUDA_COMPILER)
  # Comma-separated here (one -D of the test's command line); an escaped list for CMake.
  string(REPLACE "," "\\;" cuda_architectures "${CUDA_ARCHITECTURES}")
  list(APPEND configure_args -DCONSUMER_CUDA=ON "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}"
    "-DCMAKE_CUDA_ARCHITECTURES=${cuda_architectures}"
    "-DCMAKE_CUDA_HOST_COMPILER=${prefix}/share/luminal/nvcc-host/g++")
endif()
if(KOKKOS)
  list(APPEND configure_args -DCONSUMER_KOKKOS=ON)
endif()
step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# It must have found the installed package, not something else.
file(STRINGS "${consumer_build}/CMakeCache.txt" luminal_dir_line REGEX "^luminal_DIR:")
string(REGEX REPLACE "^luminal_DIR:[A-Z]+=" "" luminal_dir "${luminal_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
if(luminal_dir)
  file(REAL_PATH "${luminal_dir}" luminal_dir)
endif()
string(FIND "${luminal_dir}/" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install.consumer: find_package(luminal) used '${luminal_dir}', "
                      "not the package installed under ${prefix}")
endif()

step("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${CONFIG}")

# Runs the consumer's executable `name` (from a single- or multi-config build tree) and
# fails with `failure` unless what it prints matches `pattern`.
function(run_app name pattern failure)
  set(app "${consumer_build}/${name}")
  if(NOT EXISTS "${app}" AND EXISTS "${consumer_build}/${CONFIG}/${name}")
    set(app "${consumer_build}/${CONFIG}/${name}")  # multi-config generators
  endif()
  step("run ${app}" "${app}")
  message("${step_output}")
  if(NOT step_output MATCHES "${pattern}")
    message(FATAL_ERROR "install.consumer: ${failure}")
  endif()
endfunction()

run_app(app "consumer ok" "the app did not print 'consumer ok'")
if(CUDA_COMPILER)
  run_app(app_cuda "consumer cuda( ok|: no CUDA device)"
    "app_cuda printed neither 'consumer cuda ok' nor that there is no GPU")
endif()
if(KOKKOS)
  run_app(app_kokkos "consumer kokkos ok" "app_kokkos did not print 'consumer kokkos ok'")
endif()
message(STATUS "install.consumer: passed")
