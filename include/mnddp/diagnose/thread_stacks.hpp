// The native stack of every thread of this process, for the incident file: each thread is sent a
// signal whose handler records its own return addresses (Boost.Stacktrace's async-signal-safe dump);
// the caller then names them (dladdr: module, offset, exported symbol). `mnddp incident` names the
// rest from the modules' symbol tables (addr2line). Meant for the way out: a thread interrupted while
// it held the dynamic loader's lock may never leave the handler.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mnddp {

struct StackFrame {
  std::uintptr_t address = 0;
  std::string module;         // the shared object or executable holding it ("" when unknown)
  std::uintptr_t offset = 0;  // address - the module's load address (what addr2line takes)
  std::string symbol;         // demangled, when the module exports one ("" otherwise)
};

struct ThreadStack {
  long tid = 0;
  std::string name;                // the kernel's thread name (/proc/self/task/TID/comm)
  bool answered = false;           // false: it did not run the handler in time (signals blocked, or stuck)
  std::vector<StackFrame> frames;  // innermost first
};

// Installs the capture signal's handler. Once, early (start-up), so the way out allocates nothing
// for it; later calls do nothing.
void install_stack_capture();

// Every thread's stack, the caller's included; waits at most `wait` for the others' handlers.
std::vector<ThreadStack> capture_thread_stacks(std::chrono::milliseconds wait);

// Raw return addresses from a signal handler (crash_signals.cpp), named as above.
std::vector<StackFrame> describe_frames(const void* const* addresses, std::size_t count);

// The calling thread's raw frames into `buffer`, from its interrupted instruction on when `pc` (the
// signal context's program counter) is one of them. Async-signal-safe; returns the count.
std::size_t dump_this_thread(void** buffer, std::size_t capacity, std::uintptr_t pc);

// The program counter saved in a signal handler's context (0 where the platform is not known).
std::uintptr_t signal_context_pc(const void* ucontext);

}  // namespace mnddp
