// The incident thread: woken by a signal handler through a semaphore (async-signal-safe), it does the
// work a handler may not (allocating, locking, MPI) and lets the handler go on.
#include "mnddp/diagnose/incident_signals.hpp"

#include <fmt/format.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/diagnose/thread_stacks.hpp"
#include "mnddp/exit_codes.hpp"
#include "mnddp/guarded_thread.hpp"
#include "mnddp/preemption.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t kMaxFrames = 64;
constexpr double kCrashWaitSeconds = 10.0;  // a crashing thread waits this long for its record
constexpr double kStuckSeconds = 0.3;       // a collective open this long when the end came is worth a record

sem_t g_wake;
std::atomic<int> g_fatal_signal{0};
std::atomic<int> g_term_signal{0};
std::atomic<bool> g_term_default{false};  // SIGTERM was ours to catch: it terminates after the record
std::atomic<bool> g_crash_handled{false};
std::atomic<long> g_crash_tid{0};
std::atomic<long> g_incident_tid{0};
std::atomic<std::uintptr_t> g_fault_address{0};
void* g_crash_frames[kMaxFrames];
std::size_t g_crash_count = 0;
struct sigaction g_previous[NSIG];

long my_tid() { return static_cast<long>(::syscall(SYS_gettid)); }

void sleep_briefly() {
  const timespec pause{0, 20'000'000};
  ::nanosleep(&pause, nullptr);
}

void wait_for_the_record() {
  for (double waited = 0; !g_crash_handled.load() && waited < kCrashWaitSeconds; waited += 0.02) sleep_briefly();
}

extern "C" void on_fatal_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  int expected = 0;
  const bool incident_thread = my_tid() == g_incident_tid.load();
  if (g_fatal_signal.compare_exchange_strong(expected, signal) && !incident_thread) {
    g_crash_tid.store(my_tid());
    g_fault_address.store(info != nullptr ? reinterpret_cast<std::uintptr_t>(info->si_addr) : 0);
    g_crash_count = dump_this_thread(g_crash_frames, kMaxFrames, signal_context_pc(context));
    ::sem_post(&g_wake);
    wait_for_the_record();
  } else if (!incident_thread) {
    // A second thread crashing while the first one's record is written: ending the process now would
    // cut that record short. It waits for the record too, then dies of its own signal.
    wait_for_the_record();
  }
  // Let the signal take its course: the handler that was there before (MPI's backtrace), else death.
  ::sigaction(signal, &g_previous[signal], nullptr);
  errno = saved_errno;
  if (signal == SIGABRT || (info != nullptr && info->si_code <= 0)) ::raise(signal);  // sent, not faulted: again
}

void notify_termination(int signal) {
  if (signal != SIGTERM) return;  // the launcher's way to end a job; USR2 and the like are only warnings
  int expected = 0;
  if (g_term_signal.compare_exchange_strong(expected, signal)) ::sem_post(&g_wake);
}

extern "C" void on_uncaught_termination(int signal) {
  const int saved_errno = errno;
  g_term_default.store(true);
  notify_termination(signal);
  errno = saved_errno;
}

std::string signal_description(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

// The oldest open call on a lockstep channel, and how long it has been open.
std::optional<std::pair<std::string, double>> waiting_in_collective() {
  std::optional<std::pair<std::string, double>> oldest;
  const auto now = Clock::now();
  for (const auto& s : CollectiveTracker::snapshot_all()) {
    if (s.pace != ChannelPace::Lockstep || !s.oldest_open) continue;
    const double age = std::chrono::duration<double>(now - s.oldest_open->start).count();
    if (!oldest || age > oldest->second) {
      const auto& r = *s.oldest_open;
      oldest = std::pair{fmt::format("{} #{} on the {} channel ({}{}{})", r.op, r.seq, s.channel, human_bytes(r.bytes),
                                     r.label.empty() ? "" : ", ", r.label),
                         age};
    }
  }
  return oldest;
}

void handle_crash() {
  const int signal = g_fatal_signal.load();
  const std::string reason = fmt::format(
      "{} ({}) in thread {}{}", signal_description(signal), ::sigdescr_np(signal), g_crash_tid.load(),
      signal == SIGSEGV || signal == SIGBUS ? fmt::format(" at address {:#x}", g_fault_address.load()) : "");
  IncidentReport report;
  report.cause = IncidentCause::Crash;
  report.reason = reason;
  report.exit_code = 128 + signal;
  report.crash_tid = g_crash_tid.load();
  report.crash_frames = describe_frames(g_crash_frames, g_crash_count);
  // The record first, the words after: the crash may have left stderr's lock held.
  const bool written = IncidentRecorder::write(report);
  if (written) IncidentRecorder::ask_peers(reason, report.exit_code);
  std::fprintf(stderr, "[%s] mnddp: fatal: %s\n", IncidentRecorder::identity().c_str(), reason.c_str());
  if (written)
    std::fprintf(stderr, "[%s] mnddp: %s\n", IncidentRecorder::identity().c_str(), IncidentRecorder::pointer().c_str());
  g_crash_handled.store(true);
}

void handle_termination() {
  const int signal = g_term_signal.load();
  // Worth a record only when this rank is stuck waiting: give a young call the chance to finish, and
  // a rank between two calls (its peer died while it computed) the time to reach the next one.
  const auto deadline = Clock::now() + std::chrono::duration<double>(2 * kStuckSeconds);
  while (Clock::now() < deadline) {
    const auto waiting = waiting_in_collective();
    if (waiting && waiting->second >= kStuckSeconds) {
      IncidentReport report;
      report.cause = IncidentCause::Signal;
      report.reason =
          fmt::format("{} while waiting {:.1f} s in {}", signal_description(signal), waiting->second, waiting->first);
      report.exit_code = 128 + signal;
      IncidentRecorder::write(report, std::chrono::milliseconds(50));  // SIGKILL may be a second away
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (g_term_default.load()) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
  }
  g_term_signal.store(0);  // a preemption the run honours: a later SIGTERM is looked at afresh
}

}  // namespace

void install_incident_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The main thread's alternate stack (the others' come with guarded_thread): a stack overflow
    // still runs the handler, so it ends with a message and a record.
    static AlternateSignalStack main_thread_stack;
    ::sem_init(&g_wake, 0, 0);
    guarded_thread("incident", [] {
      g_incident_tid.store(my_tid());
      while (true) {
        while (::sem_wait(&g_wake) != 0) {
        }
        if (g_fatal_signal.load() != 0 && !g_crash_handled.load())
          handle_crash();
        else if (g_term_signal.load() != 0)
          handle_termination();
      }
    }).detach();
    struct sigaction action {};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int signal : kFatalSignals) ::sigaction(signal, &action, &g_previous[signal]);
    // Termination: through the preemption handler when it is one; else our own, which ends the process.
    set_preemption_notifier(notify_termination);
    struct sigaction current {};
    ::sigaction(SIGTERM, nullptr, &current);
    if (current.sa_handler == SIG_DFL) {
      struct sigaction term {};
      term.sa_handler = on_uncaught_termination;
      sigemptyset(&term.sa_mask);
      term.sa_flags = SA_RESTART;
      ::sigaction(SIGTERM, &term, nullptr);
    }
  });
}

AlternateSignalStack::AlternateSignalStack() {
  void* memory = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) return;  // no alternate stack: the handler still runs on any other fault
  stack_t stack{};
  stack.ss_sp = memory;
  stack.ss_size = kBytes;
  if (::sigaltstack(&stack, nullptr) != 0) {
    ::munmap(memory, kBytes);
    return;
  }
  memory_ = memory;
}

AlternateSignalStack::~AlternateSignalStack() {
  if (memory_ == nullptr) return;
  stack_t off{};
  off.ss_flags = SS_DISABLE;
  ::sigaltstack(&off, nullptr);
  ::munmap(memory_, kBytes);
}

}  // namespace mnddp
