// Stacks of every thread by a signal per thread (SIGRTMIN + 6, answered by an async-signal-safe dump).
#include "mnddp/diagnose/thread_stacks.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/core/demangle.hpp>
#include <boost/stacktrace/safe_dump_to.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace mnddp {
namespace {

constexpr std::size_t kMaxFrames = 64;
constexpr std::size_t kMaxThreads = 1024;

int capture_signal() { return SIGRTMIN + 6; }

// One thread's answer. The handler finds its slot by thread id: a scan of atomics, async-signal-safe.
// A slot is handed out again only when no handler can be writing in it: one asked and never answered
// is taken back (Asked -> Free) only if its handler has not begun; one whose handler is still
// writing (it answered late) waits until it is Done.
enum SlotState : int { kFree, kAsked, kWriting, kDone };
struct Slot {
  std::atomic<long> tid{0};
  std::atomic<int> state{kFree};
  std::size_t count = 0;
  void* frames[kMaxFrames] = {};
};
std::array<Slot, kMaxThreads> g_slots;
std::once_flag g_installed;

long my_tid() { return static_cast<long>(::syscall(SYS_gettid)); }

extern "C" void on_capture_signal(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  const long tid = my_tid();
  for (auto& slot : g_slots) {
    int asked = kAsked;
    if (slot.tid.load(std::memory_order_acquire) != tid ||
        !slot.state.compare_exchange_strong(asked, kWriting, std::memory_order_acq_rel))
      continue;
    slot.count = dump_this_thread(slot.frames, kMaxFrames, signal_context_pc(context));
    slot.state.store(kDone, std::memory_order_release);
    break;
  }
  errno = saved_errno;
}

std::string thread_name(long tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<long> thread_ids() {
  std::vector<long> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    try {
      ids.push_back(std::stol(entry.path().filename().string()));
    } catch (const std::exception&) {
      // not a thread's directory
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

std::uintptr_t signal_context_pc(const void* ucontext) {
  if (ucontext == nullptr) return 0;
  const auto* context = static_cast<const ucontext_t*>(ucontext);
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(context->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(context->uc_mcontext.pc);
#else
  (void)context;
  return 0;
#endif
}

std::size_t dump_this_thread(void** buffer, std::size_t capacity, std::uintptr_t pc) {
  std::size_t count = boost::stacktrace::safe_dump_to(0, buffer, capacity * sizeof(void*));
  while (count > 0 && buffer[count - 1] == nullptr) --count;
  // Drop the handler's own frames and the signal trampoline: start at the interrupted instruction.
  for (std::size_t i = 0; pc != 0 && i < count; ++i) {
    if (reinterpret_cast<std::uintptr_t>(buffer[i]) != pc) continue;
    for (std::size_t j = i; j < count; ++j) buffer[j - i] = buffer[j];
    return count - i;
  }
  return count;
}

std::vector<StackFrame> describe_frames(const void* const* addresses, std::size_t count) {
  std::vector<StackFrame> frames;
  for (std::size_t i = 0; i < count; ++i) {
    StackFrame frame;
    frame.address = reinterpret_cast<std::uintptr_t>(addresses[i]);
    Dl_info info{};
    if (::dladdr(addresses[i], &info) != 0) {
      if (info.dli_fname != nullptr) frame.module = info.dli_fname;
      frame.offset = frame.address - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
      if (info.dli_sname != nullptr) frame.symbol = boost::core::demangle(info.dli_sname);
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

void install_stack_capture() {
  std::call_once(g_installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_capture_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(capture_signal(), &action, nullptr);
    void* warm[4];
    dump_this_thread(warm, 4, 0);  // the unwinder's first use loads what it needs, outside any handler
  });
}

std::vector<ThreadStack> capture_thread_stacks(std::chrono::milliseconds wait) {
  static std::mutex one_at_a_time;
  std::lock_guard lock(one_at_a_time);
  install_stack_capture();
  const long self = my_tid();
  std::vector<ThreadStack> stacks;
  std::vector<Slot*> asked;
  std::size_t next_slot = 0;
  // A slot no handler can be in: Free, or Done by a late answer nobody reads.
  auto free_slot = [&]() -> Slot* {
    for (; next_slot < g_slots.size(); ++next_slot) {
      Slot& slot = g_slots[next_slot];
      const int state = slot.state.load(std::memory_order_acquire);
      if (state == kFree || state == kDone) {
        ++next_slot;
        return &slot;
      }
    }
    return nullptr;
  };
  for (const long tid : thread_ids()) {
    ThreadStack stack;
    stack.tid = tid;
    stack.name = thread_name(tid);
    stacks.push_back(std::move(stack));
    Slot* slot = tid == self ? nullptr : free_slot();
    asked.push_back(slot);
    if (slot == nullptr) continue;
    slot->tid.store(tid, std::memory_order_release);
    slot->state.store(kAsked, std::memory_order_release);
    ::syscall(SYS_tgkill, ::getpid(), tid, capture_signal());
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto all_done = [&] {
    for (const Slot* slot : asked)
      if (slot != nullptr && slot->state.load(std::memory_order_acquire) != kDone) return false;
    return true;
  };
  while (!all_done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    ThreadStack& stack = stacks[i];
    if (stack.tid == self) {
      void* frames[kMaxFrames];
      const std::size_t count = dump_this_thread(frames, kMaxFrames, 0);
      stack.frames = describe_frames(frames, count);
      stack.answered = true;
    } else if (asked[i] != nullptr && asked[i]->state.load(std::memory_order_acquire) == kDone) {
      stack.frames = describe_frames(asked[i]->frames, asked[i]->count);
      stack.answered = true;
      asked[i]->state.store(kFree, std::memory_order_release);
    } else if (asked[i] != nullptr) {
      // Unanswered: taken back unless its handler has begun (then it stays Writing until Done).
      int state = kAsked;
      asked[i]->state.compare_exchange_strong(state, kFree, std::memory_order_acq_rel);
    }
  }
  return stacks;
}

}  // namespace mnddp
