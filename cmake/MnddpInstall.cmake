# `cmake --install build --prefix P`: the executables, share/mnddp/ (Slurm scripts, configs, examples,
# docs, the plot and checkpoint-reading scripts), man pages made from --help by help2man, and an Lmod
# module file that finds its prefix from its own path, so the installed tree may be moved.
#
# Run paths: mnddp installs no shared library of its own, so nothing is looked up relative to the
# prefix; the executables keep the absolute run paths of the libraries they were linked against
# (torch's and its NCCL/CUDA runtime wheels, MPI, HDF5), as DT_RPATH, which the loader searches before
# LD_LIBRARY_PATH (cmake/MnddpCuda.cmake says why). Moving the prefix moves none of them.
include(GNUInstallDirs)

set(MNDDP_MODULE_DEPENDS "" CACHE STRING
    "Modules the installed module file loads first (depends_on), e.g. 'openmpi/4.1;hdf5/1.10-mpi'")

set_target_properties(mnddp mnddp-data PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS mnddp mnddp-data RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(_share ${CMAKE_INSTALL_DATADIR}/mnddp)
install(DIRECTORY slurm/ DESTINATION ${_share}/slurm USE_SOURCE_PERMISSIONS)
install(DIRECTORY configs/ DESTINATION ${_share}/configs)
install(DIRECTORY examples/ DESTINATION ${_share}/examples USE_SOURCE_PERMISSIONS)
install(DIRECTORY docs/ DESTINATION ${_share}/docs)
install(FILES README.md DESTINATION ${_share})
# mnddp plan --plot runs share/mnddp/plan_plot.py (beside bin/, see src/train/plan_command.cpp).
install(PROGRAMS scripts/plan_plot.py data_tools/load_checkpoint.py DESTINATION ${_share})

# --- man pages: help2man runs each command's --help (no MPI is started for it) ------------------
find_program(MNDDP_HELP2MAN help2man)
if(MNDDP_HELP2MAN)
  set(_man_dir ${CMAKE_CURRENT_BINARY_DIR}/man)
  file(MAKE_DIRECTORY ${_man_dir})
  set(_pages)
  # page | target | help option | one-line description
  foreach(_entry IN ITEMS
          "mnddp|mnddp|--help|data-parallel LibTorch training across GPUs and nodes"
          "mnddp-train|mnddp|train --help|train a model data-parallel under mpirun or srun"
          "mnddp-plan|mnddp|plan --help|predict step time, scaling and memory per GPU from one rank"
          "mnddp-preflight|mnddp|preflight --help|check devices, data, checkpoint directory and links before training"
          "mnddp-data|mnddp-data|--help|write, convert, reshard and inspect HDF5 training shards")
    string(REPLACE "|" ";" _fields "${_entry}")
    list(GET _fields 0 _page)
    list(GET _fields 1 _target)
    list(GET _fields 2 _option)
    list(GET _fields 3 _name)
    add_custom_command(
      OUTPUT ${_man_dir}/${_page}.1
      COMMAND ${CMAKE_COMMAND} -E env OMPI_MCA_ess_singleton_isolated=1
              ${MNDDP_HELP2MAN} --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
              "--help-option=${_option}" "--name=${_name}" --output=${_man_dir}/${_page}.1 $<TARGET_FILE:${_target}>
      DEPENDS ${_target}
      COMMENT "man page ${_page}.1"
      VERBATIM)
    list(APPEND _pages ${_man_dir}/${_page}.1)
  endforeach()
  add_custom_target(mnddp_man ALL DEPENDS ${_pages})
  install(FILES ${_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "mnddp: help2man not found: no man pages (Debian: help2man; Spack: help2man)")
endif()

# --- the Lmod module file ----------------------------------------------------------------------
# The MPI library by name and version (FindMPI leaves MPI_C_LIBRARY_VERSION_STRING empty unless it
# ran a test program): from mpi.h's Open MPI or MPICH version macros, else the standard's version.
string(REGEX MATCH "^[^,\n]+" MNDDP_MPI_NAME "${MPI_C_LIBRARY_VERSION_STRING}")
if(NOT MNDDP_MPI_NAME AND EXISTS "${MPI_C_HEADER_DIR}/mpi.h")
  file(STRINGS "${MPI_C_HEADER_DIR}/mpi.h" _mpi_version REGEX "^#define (OMPI_(MAJOR|MINOR|RELEASE)_VERSION|MPICH_VERSION) ")
  if(_mpi_version MATCHES "OMPI_MAJOR_VERSION ([0-9]+);.*OMPI_MINOR_VERSION ([0-9]+);.*OMPI_RELEASE_VERSION ([0-9]+)")
    set(MNDDP_MPI_NAME "Open MPI ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
  elseif(_mpi_version MATCHES "MPICH_VERSION \"([^\"]+)\"")
    set(MNDDP_MPI_NAME "MPICH ${CMAKE_MATCH_1}")
  endif()
endif()
if(NOT MNDDP_MPI_NAME)
  set(MNDDP_MPI_NAME "MPI ${MPI_C_VERSION}")
endif()
set(MNDDP_MODULE_DEPENDS_LUA "")
foreach(_module IN LISTS MNDDP_MODULE_DEPENDS)
  string(APPEND MNDDP_MODULE_DEPENDS_LUA "depends_on(\"${_module}\")\n")
endforeach()
configure_file(packaging/lmod/mnddp.lua.in ${CMAKE_CURRENT_BINARY_DIR}/modulefiles/${PROJECT_VERSION}.lua @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/modulefiles/${PROJECT_VERSION}.lua
        DESTINATION ${CMAKE_INSTALL_DATADIR}/modulefiles/mnddp)
