// Internal to ckpt/: the parallel checkpoint writer's state, shared by its whole-array half
// (checkpoint_writer.cpp) and its share half (checkpoint_share_writer.cpp).
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "mnddp/comm/collective_tracker.hpp"

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp {

struct ParallelCheckpointWriter::Impl {
  Communicator* comm = nullptr;
  // The agreement communicator's records (an MpiComm's): each collective HDF5 phase of the write
  // (MPI-IO underneath) opens one, so the watchdog sees a rank stuck inside the file system.
  CollectiveTracker* tracker = nullptr;
  MPI_Comm mpi = MPI_COMM_NULL;  // the writers' communicator (HDF5 uses a duplicate of it)
  std::string path;
  int rank = 0;
  int size = 1;
  H5Handle file;
  H5Handle transfer;     // collective data transfer
  H5Handle link_create;  // creates intermediate groups
  H5Handle dataset_create;

  // Creates the dataset (collective); sets `file_space` to its whole space. Under hdf5_mutex().
  H5Handle create(const std::string& array, DType dtype, const std::vector<std::int64_t>& shape, H5Handle& file_space);
  // A record of one collective phase of the write, open while it lives (none without a tracker).
  std::optional<CollectiveScope> phase(const char* op, std::size_t bytes = 0) {
    if (tracker == nullptr) return std::nullopt;
    return std::optional<CollectiveScope>(std::in_place, *tracker, op, bytes);
  }
  // Throws the error of a failed H5Dwrite, naming a full disk as such.
  [[noreturn]] void write_failed(const std::string& array, std::size_t bytes);
};

}  // namespace mnddp
