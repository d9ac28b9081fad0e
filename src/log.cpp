// Rank-aware spdlog setup, and the console's status line (the progress bar): a log line erases the
// status line, is written, and the status line is drawn again below it, so the two never mix.
#include "mnddp/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <memory>
#include <mutex>

namespace mnddp {
namespace {

constexpr const char* kEraseLine = "\r\033[K";

class ConsoleSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_status(std::string text) {
    std::lock_guard lock(mutex_);
    status_ = std::move(text);
    std::fputs(kEraseLine, stdout);
    std::fputs(status_.c_str(), stdout);
    std::fflush(stdout);
  }
  void end_status() {
    std::lock_guard lock(mutex_);
    if (status_.empty()) return;
    std::fputs("\n", stdout);  // the last state of the bar stays on screen
    status_.clear();
    std::fflush(stdout);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (!status_.empty()) std::fputs(kEraseLine, stdout);
    std::fwrite(line.data(), 1, line.size(), stdout);
    if (!status_.empty()) std::fputs(status_.c_str(), stdout);
    std::fflush(stdout);  // every line: ranks' output interleaves by line under mpirun and srun
  }
  void flush_() override { std::fflush(stdout); }

 private:
  std::string status_;
};

// The sink of the installed logger; kept alive after the logger is replaced.
std::shared_ptr<ConsoleSink>& console() {
  static std::shared_ptr<ConsoleSink> sink;
  return sink;
}

}  // namespace

void init_logging(const LogSetup& setup) {
  if (!console()) console() = std::make_shared<ConsoleSink>();
  auto logger = std::make_shared<spdlog::logger>("mnddp", console());
  logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}/{}] [%l] %v", setup.rank, setup.world_size));
  const auto configured = spdlog::level::from_str(std::string(choice_name(setup.level)));
  const bool full = setup.rank == 0 || setup.all_ranks;
  logger->set_level(full ? configured : std::max(configured, spdlog::level::warn));
  spdlog::set_default_logger(logger);
}

void set_status_line(std::string text) {
  if (!console()) console() = std::make_shared<ConsoleSink>();
  console()->set_status(std::move(text));
}

void end_status_line() {
  if (console()) console()->end_status();
}

}  // namespace mnddp
