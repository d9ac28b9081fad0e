// The progress line: built from the plan, rank 0's step count and the last interval's metrics.
#include "mnddp/observe/progress_bar.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "mnddp/log.hpp"

namespace mnddp {
namespace {

// Open MPI's mpirun gives every rank a pseudo-terminal for stdout, whatever its own stdout is (a
// terminal, a pipe, a Slurm output file), so a rank's isatty() says nothing there. What mpirun
// writes to is its own stdout: on the node where it runs, mpirun is rank 0's parent. Elsewhere
// (rank 0 under a remote daemon) the parent's stdout is not a terminal and the answer is no.
bool launched_by_open_mpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

std::string launcher_stdout() {
  const std::string link = fmt::format("/proc/{}/fd/1", getppid());
  std::error_code error;
  return std::filesystem::read_symlink(link, error).string();
}

int terminal_width() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 20) return size.ws_col;
  if (launched_by_open_mpi()) {  // the rank's pseudo-terminal has no size; mpirun's terminal has
    const int fd = open(fmt::format("/proc/{}/fd/1", getppid()).c_str(), O_RDONLY | O_NOCTTY);
    if (fd >= 0) {
      const bool known = ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 20;
      close(fd);
      if (known) return size.ws_col;
    }
  }
  return 80;
}

std::string eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60);
}

}  // namespace

bool stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  if (isatty(STDOUT_FILENO) != 1) return false;
  if (!launched_by_open_mpi()) return true;
  const std::string target = launcher_stdout();
  return target.starts_with("/dev/pts/") || target.starts_with("/dev/tty");
}

ProgressBar::ProgressBar(int width) : width_(width > 0 ? width : terminal_width()) {}

ProgressBar::~ProgressBar() { end_status_line(); }

void ProgressBar::run_started(const RunPlan& plan) {
  plan_ = plan;
  step_ = plan.first_step;
  started_ = Clock::now();
  draw(started_, true);
}

void ProgressBar::step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point, Clock::time_point end) {
  validating_ = false;
  step_ = step;
  epoch_ = epoch;
  draw(end, step == plan_.total_steps);
}

void ProgressBar::interval(const StepMetrics& m) {
  last_ = m;
  draw(Clock::now(), true);
}

void ProgressBar::validation_started(std::int64_t) {
  validating_ = true;
  draw(Clock::now(), true);
}

void ProgressBar::run_finished(const RunOutcome&) {
  validating_ = false;
  draw(Clock::now(), true);
  end_status_line();
}

void ProgressBar::draw(Clock::time_point now, bool force) {
  if (!force && now - drawn_ < std::chrono::milliseconds(100)) return;
  drawn_ = now;
  set_status_line(render(now));
}

std::string ProgressBar::render(Clock::time_point now) const {
  const std::int64_t total = std::max<std::int64_t>(plan_.total_steps, 1);
  const std::int64_t done = step_ - plan_.first_step;
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  const double rate = done > 0 ? static_cast<double>(done) / elapsed : 0.0;  // steps/s, this invocation
  const std::string left = fmt::format("step {}/{} epoch {} ", step_, plan_.total_steps, epoch_);
  std::string right;
  if (last_) {
    const double wait_share = last_->step_time_s > 0 ? 100.0 * last_->data_wait_s / last_->step_time_s : 0.0;
    right = fmt::format(" {:.0f} samples/s loss {:.4f} data wait {:.0f}%", last_->samples_per_second, last_->loss,
                        wait_share);
  } else if (rate > 0) {
    right = fmt::format(" {:.0f} samples/s", rate * static_cast<double>(plan_.samples_per_step));
  }
  right += validating_ ? std::string(" validating...")
                       : fmt::format(" ETA {}", rate > 0 ? eta(static_cast<double>(total - step_) / rate) : "?");
  // The bar takes what the text leaves of the line (none on a narrow terminal).
  const int room = width_ - 1 - static_cast<int>(left.size() + right.size()) - 8;  // "[...] 100%"
  std::string bar;
  const double fraction = std::clamp(static_cast<double>(step_) / static_cast<double>(total), 0.0, 1.0);
  if (room >= 10) {
    const int filled = static_cast<int>(std::floor(fraction * room));
    bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
          std::string(static_cast<std::size_t>(room - filled), '.') + "]";
  }
  std::string line = fmt::format("{}{} {:.0f}%{}", left, bar, fraction * 100.0, right);
  if (static_cast<int>(line.size()) >= width_) line.resize(static_cast<std::size_t>(std::max(width_ - 1, 0)));
  return line;
}

}  // namespace mnddp
