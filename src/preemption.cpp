// Preemption signal handling: a flag set by an async-signal-safe handler.
#include "mnddp/preemption.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::atomic<int> g_signal{0};
std::atomic<void (*)(int)> g_notifier{nullptr};

std::vector<int>& held_signals() {
  static std::vector<int> signals;
  return signals;
}

extern "C" void on_preemption_signal(int signal) {
  const int saved_errno = errno;  // the interrupted code may be about to read it (sem_post can set it)
  g_signal.store(signal, std::memory_order_relaxed);
  if (auto* notify = g_notifier.load()) notify(signal);
  errno = saved_errno;
}

constexpr std::pair<const char*, int> kSignalNames[] = {{"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                                                        {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
                                                        {"XCPU", SIGXCPU}};

int signal_from_name(std::string name) {
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  if (!name.empty() && name.size() <= 3 && std::all_of(name.begin(), name.end(), ::isdigit))
    return std::atoi(name.c_str());
  for (const auto& [known, number] : kSignalNames)
    if (name == known) return number;
  return 0;
}

}  // namespace

std::vector<int> parse_signal_list(const std::string& spec) {
  std::vector<int> signals;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    const int number = signal_from_name(item);
    if (number <= 0 || number >= NSIG || number == SIGKILL || number == SIGSTOP)
      throw UsageError(
          fmt::format("--preempt-signals: '{}' is not a signal that can be caught (e.g. USR2,TERM)", item));
    signals.push_back(number);
  }
  return signals;
}

std::string format_signal_list(const std::vector<int>& signals) {
  std::string text;
  for (int signal : signals) {
    if (!text.empty()) text += ',';
    const auto* found = std::find_if(std::begin(kSignalNames), std::end(kSignalNames),
                                     [signal](const auto& entry) { return entry.second == signal; });
    text += found != std::end(kSignalNames) ? std::string(found->first) : std::to_string(signal);
  }
  return text;
}

void install_preemption_handlers(const std::vector<int>& signals) {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : signals) sigaction(signal, &action, nullptr);
}

void hold_preemption_signals(const std::vector<int>& signals) {
  held_signals() = signals;
  install_preemption_handlers(held_signals());
}

void settle_preemption_signals(const std::vector<int>& wanted) {
  install_preemption_handlers(wanted);
  for (int signal : held_signals()) {
    if (std::find(wanted.begin(), wanted.end(), signal) != wanted.end()) continue;
    std::signal(signal, SIG_DFL);
    if (g_signal.load() == signal) {
      g_signal.store(0);
      std::raise(signal);
    }
  }
  held_signals().clear();
}

void set_preemption_notifier(void (*notify)(int signal)) { g_notifier.store(notify); }

bool preemption_requested() { return g_signal.load(std::memory_order_relaxed) != 0; }
int preemption_signal() { return g_signal.load(std::memory_order_relaxed); }

}  // namespace mnddp
