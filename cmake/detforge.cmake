# Helpers in the style of absl_cc_library / leveldb_test: one call per target, warnings as
# errors on our own code only, one shared precompiled header for LibTorch.
include(GoogleTest)

set(DETFORGE_WARNINGS -Wall -Wextra -Werror)

# The torch wheel's libtorch_cuda.so needs the wheel's own NCCL/cuBLAS/...; without these
# paths ld picks the CUDA toolkit's older libnccl.so through ldconfig and fails.
get_filename_component(_torch_site "${Torch_DIR}/../../../.." ABSOLUTE)
file(GLOB DETFORGE_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${_torch_site}/nvidia/*/lib"
     "${_torch_site}/nvidia/cu*/lib")
set(DETFORGE_TORCH_LINK_OPTIONS)
foreach(dir ${DETFORGE_NVIDIA_LIB_DIRS} "${_torch_site}/torch/lib")
  list(APPEND DETFORGE_TORCH_LINK_OPTIONS "LINKER:-rpath-link,${dir}")
  if(NOT DETFORGE_RELOCATABLE)
    list(APPEND DETFORGE_TORCH_LINK_OPTIONS "LINKER:-rpath,${dir}")
  endif()
endforeach()

# detforge_read_x_list(file MACRO out): the names of an X-macro list file, one `MACRO(<name>)`
# per line, in its order; editing the file re-runs CMake.
function(detforge_read_x_list list_file macro out)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${list_file}")
  file(STRINGS "${list_file}" lines REGEX "^${macro}")
  set(names "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^${macro}\\(([a-z][a-z0-9_]*)\\)$")
      message(FATAL_ERROR "${list_file}: cannot read '${line}': expected "
        "${macro}(<name>) alone on its line")
    endif()
    list(APPEND names ${CMAKE_MATCH_1})
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# detforge_family_types(out): the detector families of src/models/family_list.h; their folders
# under src/models/ and tests/models/ come from it.
function(detforge_family_types out)
  detforge_read_x_list("${CMAKE_SOURCE_DIR}/src/models/family_list.h" DETFORGE_FAMILY types)
  set(${out} ${types} PARENT_SCOPE)
endfunction()

# One precompiled header with LibTorch, reused by every target that links torch.
add_library(detforge_pch OBJECT "${CMAKE_SOURCE_DIR}/cmake/pch.cpp")
target_link_libraries(detforge_pch PUBLIC ${TORCH_LIBRARIES})
target_compile_options(detforge_pch PRIVATE ${DETFORGE_WARNINGS})
target_precompile_headers(detforge_pch PRIVATE <torch/torch.h>)

# Test files compile at -O0, with their own precompiled header (GCC refuses a header built at
# another -O): they are a third of the build's compile time and run little code of their own; the
# libraries they test keep the build type's optimisation.
set(DETFORGE_TEST_OPTIMIZATION -O0)
add_library(detforge_test_pch OBJECT "${CMAKE_SOURCE_DIR}/cmake/pch.cpp")
target_link_libraries(detforge_test_pch PUBLIC ${TORCH_LIBRARIES})
target_compile_options(detforge_test_pch PRIVATE ${DETFORGE_WARNINGS} ${DETFORGE_TEST_OPTIMIZATION})
target_precompile_headers(detforge_test_pch PRIVATE <torch/torch.h>)

# detforge_torch_free(a.cpp ...): sources of a torch-linked target that include no LibTorch header,
# directly or through ours: compiled without the precompiled header, whose 700 MB take about 9 s a
# file to load on the 2-core VM (an empty file with it: 8.7 s), where these compile in 1-4 s.
# `scripts/build_profile.py --torch-free` lists the sources that could be named here.
function(detforge_torch_free)
  set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()

function(_detforge_uses_torch out deps)
  set(${out} OFF PARENT_SCOPE)
  foreach(d ${deps})
    if(d STREQUAL "torch" OR d MATCHES "^detforge_(structures|ops|weights|data|models|losses|distributed|eval|engine|tools)$")
      set(${out} ON PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

function(_detforge_setup target deps pch)
  _detforge_uses_torch(uses_torch "${deps}")
  target_compile_options(${target} PRIVATE ${DETFORGE_WARNINGS})
  if(uses_torch)
    target_precompile_headers(${target} REUSE_FROM ${pch})
    target_link_options(${target} PRIVATE ${DETFORGE_TORCH_LINK_OPTIONS})
  endif()
endfunction()

# detforge_add_library(NAME detforge_x SRCS a.cpp ... DEPS detforge_core torch ...)
# DEPS are public; "torch" means LibTorch.
function(detforge_add_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${A_NAME} STATIC ${A_SRCS})
  target_include_directories(${A_NAME} PUBLIC "${CMAKE_SOURCE_DIR}/src")
  set(deps)
  foreach(d ${A_DEPS})
    if(d STREQUAL "torch")
      list(APPEND deps ${TORCH_LIBRARIES})
    else()
      list(APPEND deps ${d})
    endif()
  endforeach()
  target_link_libraries(${A_NAME} PUBLIC ${deps} PRIVATE ${A_PRIVATE_DEPS})
  _detforge_setup(${A_NAME} "${A_DEPS}" detforge_pch)
endfunction()

# detforge_add_cuda_kernels(TARGET detforge_x SRCS a.cu ...): the CUDA kernels of library TARGET,
# where LibTorch has CUDA and nvcc is found (LibTorch's CMake config enables the CUDA language
# then); TARGET is compiled with DETFORGE_CUDA_KERNELS there. Elsewhere nothing is added and the
# library's CUDA tensors take its tensor-op path. The kernels include no LibTorch header.
function(detforge_add_cuda_kernels)
  cmake_parse_arguments(A "" "TARGET" "SRCS" ${ARGN})
  if(NOT (CAFFE2_USE_CUDA AND CMAKE_CUDA_COMPILER) OR DETFORGE_FUZZ)
    return()
  endif()
  # LibTorch's config fills CMAKE_CUDA_FLAGS with its own -gencode list, which includes
  # architectures this nvcc no longer builds; the kernels name their architectures below (in the
  # calling directory's scope, which is where CMake reads it for the directory's targets).
  set(CMAKE_CUDA_FLAGS "" PARENT_SCOPE)
  add_library(${A_TARGET}_cuda STATIC ${A_SRCS})
  target_include_directories(${A_TARGET}_cuda PRIVATE "${CMAKE_SOURCE_DIR}/src")
  # Machine code for every architecture CUDA 13 builds (Turing to Blackwell), PTX for newer ones.
  set_target_properties(${A_TARGET}_cuda PROPERTIES
    CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90-real;100-real;120"
    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${A_TARGET}_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror>
    # clang as nvcc's host compiler flags the unused static functions of CUDA's cuda_fp16.hpp.
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CXX_COMPILER_ID:Clang>>:-Xcompiler=-Wno-unused-function>)
  target_link_libraries(${A_TARGET} PRIVATE ${A_TARGET}_cuda)
  target_compile_definitions(${A_TARGET} PRIVATE DETFORGE_CUDA_KERNELS)
endfunction()

# detforge_add_test(NAME x_test SRCS ... DEPS ... LABELS unit ... [TIMEOUT s] [THREADS n]
#                   [THREADS_MATCHING regex m] [FIRST])
# Each test runs LibTorch with THREADS threads (OMP_NUM_THREADS, default 1) and takes that many
# of ctest's -j slots (PROCESSORS): two 2-thread tests on 2 cores spin against each other and
# took several times as long. Tests whose name matches THREADS_MATCHING's regex take m threads
# and slots instead. FIRST: ctest starts the executable's tests before the others (COST), so
# its long runs do not end the suite alone.
function(detforge_add_test)
  cmake_parse_arguments(A "FIRST" "NAME;TIMEOUT;THREADS" "SRCS;DEPS;LABELS;THREADS_MATCHING"
                        ${ARGN})
  add_executable(${A_NAME} ${A_SRCS} "${CMAKE_SOURCE_DIR}/tests/test_main.cpp")
  detforge_torch_free("${CMAKE_SOURCE_DIR}/tests/test_main.cpp")
  target_include_directories(${A_NAME} PRIVATE "${CMAKE_SOURCE_DIR}/tests")
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock)
  target_compile_definitions(${A_NAME} PRIVATE
    DETFORGE_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DETFORGE_BINARY_DIR="${CMAKE_BINARY_DIR}"
    DETFORGE_PYTHON="${DETFORGE_PYTHON}")
  _detforge_setup(${A_NAME} "${A_DEPS}" detforge_test_pch)
  target_compile_options(${A_NAME} PRIVATE ${DETFORGE_TEST_OPTIMIZATION})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  if(NOT A_THREADS)
    set(A_THREADS 1)
  endif()
  if(DETFORGE_RELOCATABLE)
    # Bundled test binaries run on the GPU host, not here: nothing to discover.
    return()
  endif()
  gtest_discover_tests(${A_NAME}
    WORKING_DIRECTORY "${CMAKE_BINARY_DIR}"
    DISCOVERY_TIMEOUT 60)
  # The properties are set by a file ctest reads after the discovered list: through
  # gtest_discover_tests' PROPERTIES a list value ("unit;parity") splits into two words and
  # every property after it was read as a wrong pair, so TIMEOUT and the rest never applied.
  set(props "${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_properties.cmake")
  set(cost 0)
  if(A_FIRST)
    set(cost 1000)
  endif()
  set(regex "^$")
  set(matched_threads ${A_THREADS})
  if(A_THREADS_MATCHING)
    list(GET A_THREADS_MATCHING 0 regex)
    list(GET A_THREADS_MATCHING 1 matched_threads)
  endif()
  file(WRITE "${props}"
    "if(${A_NAME}_TESTS)\n"
    "  set_tests_properties(\${${A_NAME}_TESTS} PROPERTIES LABELS \"${A_LABELS}\"\n"
    "    TIMEOUT ${A_TIMEOUT} COST ${cost})\n"
    "  foreach(t IN LISTS ${A_NAME}_TESTS)\n"
    "    set(n ${A_THREADS})\n"
    "    if(t MATCHES \"${regex}\")\n"
    "      set(n ${matched_threads})\n"
    "    endif()\n"
    "    set_tests_properties(\${t} PROPERTIES PROCESSORS \${n} ENVIRONMENT OMP_NUM_THREADS=\${n})\n"
    "  endforeach()\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${props}")
endfunction()
