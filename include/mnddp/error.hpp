// Typed errors and exit codes. Leaf code throws; one catch in main decides how the job ends.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

#include "mnddp/exit_codes.hpp"

namespace mnddp {

// Base of every mnddp error. `collective()` means every rank threw the same error at the same
// point (the verdict was agreed over MPI), so ranks may exit cleanly instead of MPI_Abort.
class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int exit_code = kExitFailure, bool collective = false)
      : std::runtime_error(message), exit_code_(exit_code), collective_(collective) {}
  int exit_code() const { return exit_code_; }
  bool collective() const { return collective_; }

 private:
  int exit_code_;
  bool collective_;
};

// Bad input from the user: an option value, a file, a dataset, the launch environment.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message, bool collective = false) : Error(message, kExitUsage, collective) {}
};

// A failing library call; the message carries the call, the library's error text and file:line.
class LibraryError : public Error {
 public:
  LibraryError(const std::string& library, const std::string& call, const std::string& detail,
               std::source_location where);
};

}  // namespace mnddp
