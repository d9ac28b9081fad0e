// Template definitions for communicator.hpp.
#pragma once

#include <exception>

#include "mnddp/error.hpp"

namespace mnddp {

// Runs `work` and turns whatever it throws into a Failure (nullopt when it returns).
template <typename Work>
std::optional<Failure> capture_failure(Work&& work) {
  try {
    work();
  } catch (const Error& e) {
    return Failure{e.what(), e.exit_code()};
  } catch (const std::exception& e) {
    return Failure{e.what(), kExitFailure};
  }
  return std::nullopt;
}

template <typename Work>
void on_root_then_agree(Communicator& comm, Work&& work) {
  std::optional<Failure> failure;
  if (comm.is_root()) failure = capture_failure(std::forward<Work>(work));
  agree_on_failure(comm, failure);
}

template <typename Work>
void on_all_then_agree(Communicator& comm, Work&& work) {
  agree_on_failure(comm, capture_failure(std::forward<Work>(work)));
}

}  // namespace mnddp
