// A thread whose body cannot end the process through std::terminate: an exception that escapes it
// (an allocation failure, a health check that throws) ends the job the way every fatal error does,
// through Runtime::abort_all, with a message naming the thread. std::terminate would leave no message,
// no incident record and, on the other ranks, a hang until their watchdog. Each has an alternate
// signal stack, so a stack overflow in it is recorded like any other crash.
#pragma once

#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "mnddp/diagnose/incident_signals.hpp"
#include "mnddp/error.hpp"
#include "mnddp/runtime.hpp"

namespace mnddp {

// The reason abort_all gives for an exception that left the thread `what`.
std::string escaped_exception_reason(const char* what, std::exception_ptr error);

template <typename Body>
std::thread guarded_thread(const char* what, Body&& body) {
  return std::thread([what, body = std::forward<Body>(body)]() mutable {
    const AlternateSignalStack signal_stack;
    try {
      body();
    } catch (...) {
      Runtime::abort_all(escaped_exception_reason(what, std::current_exception()), kExitFailure);
    }
  });
}

}  // namespace mnddp
