# Finds every third-party package mnddp builds against and wraps each in one imported target:
# MPI::MPI_CXX, mnddp::hdf5 (parallel), Boost::program_options, spdlog, nlohmann_json,
# mnddp::torch, and (when present) mnddp::cudart and mnddp::nccl.
#
# A missing package stops the configure with one line: what is missing, the module to load on a
# cluster, the Debian and Spack package, and the CMake variable that points at a copy elsewhere.

# mnddp_missing WHAT HOW: the one line, and the end of the configure.
function(mnddp_missing what how)
  # A leading space: CMake prints the line as it is, instead of reflowing it into a paragraph.
  message(FATAL_ERROR " mnddp: ${what} not found: ${how}")
endfunction()

find_package(Threads REQUIRED)
find_package(MPI COMPONENTS C CXX)
if(NOT MPI_C_FOUND OR NOT MPI_CXX_FOUND)
  mnddp_missing("MPI (C and C++)" "module load openmpi (or your site's MPI); Debian: libopenmpi-dev; Spack: openmpi; or -DMPI_HOME=<prefix>")
endif()
find_package(Boost 1.70 COMPONENTS program_options)
if(NOT Boost_FOUND)
  mnddp_missing("Boost.Program_options >= 1.70" "module load boost; Debian: libboost-program-options-dev; Spack: boost+program_options; or -DBoost_ROOT=<prefix>")
endif()
find_package(fmt QUIET)
if(NOT fmt_FOUND)
  mnddp_missing("fmt" "module load fmt; Debian: libfmt-dev; Spack: fmt; or -Dfmt_ROOT=<prefix>")
endif()
find_package(spdlog QUIET)
if(NOT spdlog_FOUND)
  mnddp_missing("spdlog" "module load spdlog; Debian: libspdlog-dev; Spack: spdlog; or -Dspdlog_ROOT=<prefix>")
endif()
find_package(nlohmann_json 3.9 QUIET)
if(NOT nlohmann_json_FOUND)
  mnddp_missing("nlohmann-json >= 3.9" "Debian: nlohmann-json3-dev; Spack: nlohmann-json; or -Dnlohmann_json_ROOT=<prefix>")
endif()
find_package(Protobuf QUIET)  # --tensorboard: TensorBoard's event messages (protoc, libprotobuf)
if(NOT Protobuf_FOUND OR NOT Protobuf_PROTOC_EXECUTABLE)
  mnddp_missing("protobuf (libprotobuf and protoc)" "module load protobuf; Debian: libprotobuf-dev protobuf-compiler; Spack: protobuf; or -DProtobuf_ROOT=<prefix>")
endif()
find_package(ZLIB QUIET)  # CRC-32 checksums of format-1 checkpoints (still read)
if(NOT ZLIB_FOUND)
  mnddp_missing("zlib" "Debian: zlib1g-dev; Spack: zlib-api; or -DZLIB_ROOT=<prefix>")
endif()
# xxHash: XXH3-64 block checksums of checkpoint arrays (format 2).
find_path(MNDDP_XXHASH_INCLUDE_DIR xxhash.h)
find_library(MNDDP_XXHASH_LIBRARY xxhash)
if(NOT MNDDP_XXHASH_INCLUDE_DIR OR NOT MNDDP_XXHASH_LIBRARY)
  mnddp_missing("xxHash (xxhash.h, libxxhash)" "Debian: libxxhash-dev; Spack: xxhash; or -DCMAKE_PREFIX_PATH=<prefix>")
endif()
add_library(mnddp::xxhash UNKNOWN IMPORTED)
set_target_properties(mnddp::xxhash PROPERTIES IMPORTED_LOCATION "${MNDDP_XXHASH_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${MNDDP_XXHASH_INCLUDE_DIR}")

# --- The mnddp executable's malloc ----------------------------------------------------------------
# torch's CPU tensors come from malloc. glibc maps every block above its mmap threshold afresh and
# unmaps it at free, so each step's activations are page-faulted and zeroed again; tcmalloc (Debian:
# libgoogle-perftools-dev) keeps freed pages for the next step (docs/BENCHMARKS.md: 5-13% of a
# one-rank step). Sanitizers bring their own malloc, so they build with the system's.
set(MNDDP_HOST_ALLOCATOR "auto" CACHE STRING "malloc of the mnddp executable: auto (tcmalloc when found), tcmalloc, system")
set_property(CACHE MNDDP_HOST_ALLOCATOR PROPERTY STRINGS auto tcmalloc system)
if(NOT MNDDP_HOST_ALLOCATOR MATCHES "^(auto|tcmalloc|system)$")
  message(FATAL_ERROR "MNDDP_HOST_ALLOCATOR=${MNDDP_HOST_ALLOCATOR}: expected auto, tcmalloc or system")
endif()
if(MNDDP_SANITIZE AND MNDDP_HOST_ALLOCATOR STREQUAL "tcmalloc")
  message(FATAL_ERROR "MNDDP_HOST_ALLOCATOR=tcmalloc with MNDDP_SANITIZE=${MNDDP_SANITIZE}: the sanitizer replaces malloc itself")
endif()
set(MNDDP_TCMALLOC 0)
if(NOT MNDDP_SANITIZE AND NOT MNDDP_HOST_ALLOCATOR STREQUAL "system")
  find_path(MNDDP_TCMALLOC_INCLUDE_DIR gperftools/tcmalloc.h)
  find_library(MNDDP_TCMALLOC_LIBRARY tcmalloc_minimal)
  if(MNDDP_TCMALLOC_INCLUDE_DIR AND MNDDP_TCMALLOC_LIBRARY)
    set(MNDDP_TCMALLOC 1)
    add_library(mnddp::tcmalloc UNKNOWN IMPORTED)
    set_target_properties(mnddp::tcmalloc PROPERTIES IMPORTED_LOCATION "${MNDDP_TCMALLOC_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${MNDDP_TCMALLOC_INCLUDE_DIR}")
  elseif(MNDDP_HOST_ALLOCATOR STREQUAL "tcmalloc")
    message(FATAL_ERROR "MNDDP_HOST_ALLOCATOR=tcmalloc: tcmalloc not found (gperftools/tcmalloc.h, libtcmalloc_minimal): "
                        "install libgoogle-perftools-dev, or run scripts/setup.sh")
  else()
    message(STATUS "mnddp: tcmalloc not found (Debian: libgoogle-perftools-dev); mnddp uses the system malloc, "
                   "slower on CPU")
  endif()
endif()

# --- HDF5: must be the MPI-enabled build -------------------------------------------------------
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 COMPONENTS C)
if(NOT HDF5_FOUND)
  mnddp_missing("HDF5 (parallel)" "module load hdf5 (its MPI build, e.g. phdf5); Debian: libhdf5-openmpi-dev; Spack: hdf5+mpi; or -DHDF5_ROOT=<prefix>")
endif()
# HDF5 2.x's hdf5-config.cmake names it HDF5_PROVIDES_PARALLEL; CMake's FindHDF5 (up to 3.31) reads
# only the 1.x name, and a parallel 2.x would read as serial.
if(NOT HDF5_IS_PARALLEL AND HDF5_PROVIDES_PARALLEL)
  set(HDF5_IS_PARALLEL TRUE)
endif()
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "mnddp: HDF5 ${HDF5_VERSION} at ${HDF5_INCLUDE_DIRS} was built without MPI: load its "
                      "MPI build (module load phdf5 or hdf5/<version>-mpi; Debian: libhdf5-openmpi-dev; Spack: hdf5+mpi) "
                      "or point -DHDF5_ROOT at one")
endif()
add_library(mnddp::hdf5 INTERFACE IMPORTED)
target_include_directories(mnddp::hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(mnddp::hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_C)
target_compile_definitions(mnddp::hdf5 INTERFACE ${HDF5_C_DEFINITIONS} H5_USE_110_API_DEFAULT)

# --- LibTorch ------------------------------------------------------------------------------------
# Located through torch.utils.cmake_prefix_path of the project venv (or Torch_DIR / CMAKE_PREFIX_PATH).
# We import the libraries ourselves instead of calling find_package(Torch): TorchConfig's Caffe2
# CUDA module needs nvcc, probes for GPUs at configure time and fails on toolkit/wheel version skew,
# while we only need headers and the shared libraries.
set(MNDDP_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "Python whose torch provides LibTorch")
if(NOT Torch_DIR)
  execute_process(COMMAND ${MNDDP_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND EXISTS "${_torch_prefix}/Torch")
    set(Torch_DIR "${_torch_prefix}/Torch" CACHE PATH "Directory with TorchConfig.cmake" FORCE)
  else()
    find_path(Torch_DIR TorchConfig.cmake PATH_SUFFIXES share/cmake/Torch)
  endif()
endif()
if(NOT Torch_DIR OR NOT EXISTS "${Torch_DIR}/TorchConfigVersion.cmake")
  mnddp_missing("LibTorch (a Python with torch >= 2.7, or a LibTorch distribution)"
                "module load a Python with torch and pass -DMNDDP_PYTHON=<its python>; scripts/setup.sh (a venv with the torch wheel); Spack: py-torch; or -DTorch_DIR=<prefix>/share/cmake/Torch")
endif()
get_filename_component(MNDDP_TORCH_ROOT "${Torch_DIR}/../../.." ABSOLUTE)
include("${Torch_DIR}/TorchConfigVersion.cmake")
set(Torch_VERSION ${PACKAGE_VERSION})
set(_torch_libdir "${MNDDP_TORCH_ROOT}/lib")
find_library(MNDDP_TORCH_CPU_LIB torch_cpu PATHS ${_torch_libdir} NO_DEFAULT_PATH REQUIRED)
find_library(MNDDP_C10_LIB c10 PATHS ${_torch_libdir} NO_DEFAULT_PATH REQUIRED)
find_library(MNDDP_TORCH_CUDA_LIB torch_cuda PATHS ${_torch_libdir} NO_DEFAULT_PATH)
find_library(MNDDP_C10_CUDA_LIB c10_cuda PATHS ${_torch_libdir} NO_DEFAULT_PATH)

add_library(mnddp::torch INTERFACE IMPORTED)
# LibTorch ships its own fmt headers (a newer fmt than Debian's spdlog was built with). A shim
# directory placed first on the include path makes <fmt/...> the system fmt spdlog expects.
find_path(MNDDP_FMT_INCLUDE fmt/format.h PATHS /usr/include /usr/local/include NO_CMAKE_PATH)
get_target_property(_fmt_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
foreach(_dir IN LISTS _fmt_dirs MNDDP_FMT_INCLUDE)
  if(_dir AND EXISTS "${_dir}/fmt/format.h")
    set(_fmt_dir "${_dir}")
    break()
  endif()
endforeach()
file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/fmt-shim")
file(CREATE_LINK "${_fmt_dir}/fmt" "${CMAKE_BINARY_DIR}/fmt-shim/fmt" SYMBOLIC)
target_include_directories(mnddp::torch BEFORE INTERFACE "${CMAKE_BINARY_DIR}/fmt-shim")
target_include_directories(mnddp::torch SYSTEM INTERFACE
  "${MNDDP_TORCH_ROOT}/include" "${MNDDP_TORCH_ROOT}/include/torch/csrc/api/include")
# Since torch 2.7 the wheels use the C++11 ABI, which matches Debian's Boost, HDF5 and spdlog.
target_compile_definitions(mnddp::torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
# The CPU half only (libtorch_cpu, libc10): libtorch.so would pull in libtorch_cuda.so and, through it,
# cuBLAS(Lt), cuSPARSE(Lt), cuFFT, nvJitLink... (~170 MB resident in every rank, GPU or not). A run
# that may use a GPU loads the CUDA half at run time (src/train/torch_cuda.cpp); code that calls
# c10::cuda/at::cuda directly (the GPU tests) links mnddp::torch_cuda.
target_link_libraries(mnddp::torch INTERFACE ${MNDDP_TORCH_CPU_LIB} ${MNDDP_C10_LIB})
set_property(TARGET mnddp::torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_torch_libdir}")
# libtorch.so and libtorch_cpu.so export their private copies of std::filesystem (built with a newer
# GCC); whichever library comes first in DT_NEEDED wins symbol lookup, and torch's remove_all
# crashes when called from our code. Naming libstdc++ before any object or library puts it first.
set_property(TARGET mnddp::torch APPEND PROPERTY INTERFACE_LINK_OPTIONS
             "LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")

# --- CUDA and NCCL (optional): cmake/MnddpCuda.cmake ---------------------------------------------
include(MnddpCuda)
