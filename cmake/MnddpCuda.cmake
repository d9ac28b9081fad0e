# The CUDA runtime and NCCL mnddp links: the very files torch's CUDA half loads, so that a process
# maps one libcudart and one libnccl (F8 of the GPU review). The torch wheel brings them as nvidia-*
# wheels (nvidia/cu<major>/{include,lib} and nvidia/nccl/{include,lib} beside torch): mnddp builds
# against those, so a build host needs no CUDA toolkit, and a compute node none at run time. A plain
# LibTorch distribution without the wheels falls back to the toolkit's (find_package(CUDAToolkit)).
# The executables carry DT_RPATH (not DT_RUNPATH), which the loader searches before LD_LIBRARY_PATH:
# a `module load cuda nccl` cannot put another libnccl or libcudart in front of them.
# Defines MNDDP_HAVE_CUDA, MNDDP_HAVE_NCCL, mnddp::cudart, mnddp::torch_cuda, mnddp::nccl and the
# summaries printed at configure time.
set(MNDDP_HAVE_CUDA OFF)
set(MNDDP_HAVE_NCCL OFF)
set(MNDDP_CUDA_SUMMARY "off")
set(MNDDP_NCCL_SUMMARY "off")
if(MNDDP_TORCH_CUDA_LIB)
  set(MNDDP_TORCH_FLAVOUR "CUDA")
else()
  set(MNDDP_TORCH_FLAVOUR "CPU-only")
endif()

# DT_RPATH for every executable of the build (see above).
add_link_options("LINKER:--disable-new-dtags")

if(NOT MNDDP_WITH_CUDA STREQUAL "OFF")
  if(NOT MNDDP_TORCH_CUDA_LIB)
    set(MNDDP_CUDA_SUMMARY "off (LibTorch is CPU-only)")
  else()
    # The wheels' CUDA runtime: nvidia/cu13 (CUDA 13 wheels), nvidia/cuda_runtime (CUDA 12 wheels).
    execute_process(COMMAND ${MNDDP_PYTHON} -c
                    "import torch, nvidia, os; m = torch.version.cuda.split('.')[0]; \
root = list(nvidia.__path__)[0]; \
print(next((d for d in (os.path.join(root, 'cu' + m), os.path.join(root, 'cuda_runtime')) \
if os.path.exists(os.path.join(d, 'include', 'cuda_runtime_api.h'))), ''))"
                    OUTPUT_VARIABLE _cudart_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_cudart_wheel)
      file(GLOB _cudart_lib "${_cudart_wheel}/lib/libcudart.so.[0-9]*")
    endif()
    if(_cudart_wheel AND _cudart_lib)
      list(GET _cudart_lib 0 _cudart_lib)
      add_library(mnddp::cudart INTERFACE IMPORTED)
      target_include_directories(mnddp::cudart SYSTEM INTERFACE "${_cudart_wheel}/include")
      target_link_libraries(mnddp::cudart INTERFACE "${_cudart_lib}")
      set_property(TARGET mnddp::cudart APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_cudart_wheel}/lib")
      file(STRINGS "${_cudart_wheel}/include/cuda_runtime_api.h" _cudart_ver REGEX "^#define CUDART_VERSION ")
      string(REGEX REPLACE ".*CUDART_VERSION +([0-9]+).*" "\\1" _cudart_ver "${_cudart_ver}")
      math(EXPR _major "${_cudart_ver} / 1000")
      math(EXPR _minor "${_cudart_ver} % 1000 / 10")
      set(MNDDP_HAVE_CUDA ON)
      set(MNDDP_CUDA_SUMMARY "${_major}.${_minor} (${_cudart_lib})")
    else()
      find_package(CUDAToolkit QUIET)
      if(CUDAToolkit_FOUND)
        add_library(mnddp::cudart INTERFACE IMPORTED)
        target_link_libraries(mnddp::cudart INTERFACE CUDA::cudart)
        set(MNDDP_HAVE_CUDA ON)
        set(MNDDP_CUDA_SUMMARY "${CUDAToolkit_VERSION} (the toolkit's: no nvidia runtime wheel beside torch)")
      else()
        set(MNDDP_CUDA_SUMMARY "off (no CUDA runtime wheel beside torch, no CUDA toolkit)")
      endif()
    endif()
    if(MNDDP_HAVE_CUDA)
      add_library(mnddp::torch_cuda INTERFACE IMPORTED)
      target_link_libraries(mnddp::torch_cuda INTERFACE mnddp::torch ${MNDDP_TORCH_CUDA_LIB} ${MNDDP_C10_CUDA_LIB}
                                                        mnddp::cudart)
      set_property(TARGET mnddp::torch_cuda APPEND PROPERTY INTERFACE_LINK_OPTIONS
                   "LINKER:--push-state,--no-as-needed" "${MNDDP_TORCH_CUDA_LIB}" "LINKER:--pop-state")
    endif()
  endif()
  if(MNDDP_WITH_CUDA STREQUAL "ON" AND NOT MNDDP_HAVE_CUDA)
    message(FATAL_ERROR "mnddp: MNDDP_WITH_CUDA=ON but CUDA is ${MNDDP_CUDA_SUMMARY}")
  endif()
endif()

set(MNDDP_TORCH_CUDA_PATH "")
if(MNDDP_HAVE_CUDA)
  set(MNDDP_TORCH_CUDA_PATH "${MNDDP_TORCH_CUDA_LIB}")
endif()

if(MNDDP_HAVE_CUDA)
  # The NCCL torch itself loads (the nvidia-nccl wheel), so one process has one NCCL; the toolkit's
  # copy for a plain LibTorch distribution.
  execute_process(COMMAND ${MNDDP_PYTHON} -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])"
                  OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_path(MNDDP_NCCL_INCLUDE nccl.h HINTS "${_nccl_wheel}/include" ${CUDAToolkit_INCLUDE_DIRS})
  find_library(MNDDP_NCCL_LIB NAMES libnccl.so.2 nccl NAMES_PER_DIR HINTS "${_nccl_wheel}/lib" ${CUDAToolkit_LIBRARY_DIR})
  if(MNDDP_NCCL_INCLUDE AND MNDDP_NCCL_LIB)
    set(MNDDP_HAVE_NCCL ON)
    file(STRINGS "${MNDDP_NCCL_INCLUDE}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*" "\\1.\\2.\\3"
           MNDDP_NCCL_SUMMARY "${_nccl_ver}")
    add_library(mnddp::nccl INTERFACE IMPORTED)
    target_include_directories(mnddp::nccl SYSTEM INTERFACE ${MNDDP_NCCL_INCLUDE})
    target_link_libraries(mnddp::nccl INTERFACE ${MNDDP_NCCL_LIB} mnddp::cudart)
    get_filename_component(_nccl_libdir "${MNDDP_NCCL_LIB}" DIRECTORY)
    set_property(TARGET mnddp::nccl APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_nccl_libdir}")
    set(MNDDP_NCCL_SUMMARY "${MNDDP_NCCL_SUMMARY} (${MNDDP_NCCL_LIB})")
  else()
    set(MNDDP_NCCL_SUMMARY "off (nccl.h / libnccl not found)")
  endif()
endif()
