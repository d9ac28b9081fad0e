// Template definitions for communicator.hpp.
#pragma once

#include <exception>

#include "mnddp/error.hpp"

namespace mnddp {

template <typename Work>
void on_root_then_agree(Communicator& comm, Work&& work) {
  std::optional<Failure> failure;
  if (comm.is_root()) {
    try {
      work();
    } catch (const Error& e) {
      failure = Failure{e.what(), e.exit_code()};
    } catch (const std::exception& e) {
      failure = Failure{e.what(), kExitFailure};
    }
  }
  agree_on_failure(comm, failure);
}

}  // namespace mnddp

namespace mnddp {

// Every rank runs `work`; if it throws on any rank, every rank throws the same collective Error.
// For deterministic set-up steps that fail identically everywhere (one message, not N).
template <typename Work>
void on_all_then_agree(Communicator& comm, Work&& work) {
  std::optional<Failure> failure;
  try {
    work();
  } catch (const Error& e) {
    failure = Failure{e.what(), e.exit_code()};
  } catch (const std::exception& e) {
    failure = Failure{e.what(), kExitFailure};
  }
  agree_on_failure(comm, failure);
}

}  // namespace mnddp
