// This rank's incident record: gathered from the trackers, the activity board and the thread stacks,
// appended as one line to the job-wide file under a lock.
#include "mnddp/diagnose/incident.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <thread>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/diagnose/activity.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct State {
  std::mutex mutex;
  RankInfo rank;
  std::string path;
  std::string run_id;
  std::string device;
  IncidentRecorder::PeerRequest peer_request;
};
State& state() {
  static auto* s = new State;  // never destroyed: used on the way out
  return *s;
}
std::atomic<bool> g_configured{false};
std::atomic<bool> g_written{false};
// One record written or withdrawn at a time; waited for within a bound, since the writer may be a
// thread that crashed while writing.
std::mutex g_write_mutex;
constexpr auto kWriteWait = std::chrono::seconds(3);

// The lock, if it comes within `wait` (std::timed_mutex would do, but ThreadSanitizer cannot see
// its pthread_mutex_clocklock and reports every unlock of it).
std::unique_lock<std::mutex> lock_within(std::mutex& mutex, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex, std::try_to_lock);
  for (const auto give_up = Clock::now() + wait; !lock.owns_lock() && Clock::now() < give_up;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.try_lock();
  }
  return lock;
}
std::atomic<bool> g_signal_record{false};  // the record written was a `signal` one

// Seconds since the epoch of a steady-clock instant: comparable between the ranks' records (to the
// hosts' clock agreement).
double wall_seconds(Clock::time_point t) {
  const auto now_wall = std::chrono::system_clock::now().time_since_epoch();
  const auto back = Clock::now() - t;
  return std::chrono::duration<double>(now_wall - std::chrono::duration_cast<std::chrono::system_clock::duration>(back))
      .count();
}

std::string hex(std::uintptr_t value) { return fmt::format("{:#x}", value); }

json frames_json(const std::vector<StackFrame>& frames) {
  json out = json::array();
  for (const auto& f : frames)
    out.push_back({{"address", hex(f.address)}, {"module", f.module}, {"offset", hex(f.offset)}, {"symbol", f.symbol}});
  return out;
}

json channels_json() {
  json out = json::array();
  const auto now = Clock::now();
  for (const auto& s : CollectiveTracker::snapshot_all(/*with_history=*/true)) {
    json channel = {{"channel", s.channel}, {"pace", s.pace == ChannelPace::Lockstep ? "lockstep" : "background"},
                    {"started", s.started}, {"finished", s.finished},
                    {"hash", hex(s.hash)},  {"idle_s", s.idle_s},
                    {"open", nullptr}};
    if (s.oldest_open) {
      const auto& r = *s.oldest_open;
      channel["open"] = {{"seq", r.seq},
                         {"op", r.op},
                         {"bytes", r.bytes},
                         {"label", r.label},
                         {"age_s", std::chrono::duration<double>(now - r.start).count()}};
    }
    json history = json::array();
    for (const auto& call : s.history) {
      history.push_back({{"seq", call.seq},
                         {"op", call.op},
                         {"bytes", call.bytes},
                         {"label", call.label},
                         {"start", wall_seconds(call.start)},
                         {"end", call.open ? json(nullptr) : json(wall_seconds(call.end))}});
    }
    channel["history"] = std::move(history);
    out.push_back(std::move(channel));
  }
  return out;
}

json threads_json(const std::vector<ThreadStack>& stacks, const IncidentReport& report) {
  const auto activities = Activity::snapshot();
  json out = json::array();
  for (const auto& stack : stacks) {
    json thread = {{"tid", stack.tid}, {"name", stack.name}, {"role", ""}, {"activity", ""}, {"activity_s", 0.0}};
    for (const auto& a : activities) {
      if (a.tid != stack.tid) continue;
      thread["role"] = a.name;
      thread["activity"] = a.what;
      thread["activity_s"] = a.seconds;
      thread["unwound"] = a.what.empty() ? a.unwound : "";
    }
    const bool crashed = report.crash_tid != 0 && stack.tid == report.crash_tid;
    thread["crashed"] = crashed;
    thread["answered"] = stack.answered || crashed;
    thread["frames"] = frames_json(crashed ? report.crash_frames : stack.frames);
    out.push_back(std::move(thread));
  }
  return out;
}

json peers_json(const std::vector<PeerView>& peers) {
  json out = json::array();
  for (const auto& p : peers)
    out.push_back({{"rank", p.rank},
                   {"answered", p.answered},
                   {"state", p.state},
                   {"started", p.started},
                   {"finished", p.finished},
                   {"idle_s", p.idle_s},
                   {"where", p.where}});
  return out;
}

// Opens the incident file for appending, not through a symlink and not when it is someone else's
// file or a hard link to one: the path may lie in a directory others can write to.
int open_incident_file(const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);  // RDWR: end_torn_line reads
  if (fd < 0) return -1;
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid() || info.st_nlink != 1) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A line an earlier writer left unfinished (killed mid-write) would swallow this one: end it first.
void end_torn_line(int fd) {
  struct stat info {};
  char last = '\n';
  if (::fstat(fd, &info) == 0 && info.st_size > 0 && ::pread(fd, &last, 1, info.st_size - 1) == 1 && last != '\n') {
    const char newline = '\n';
    [[maybe_unused]] const ssize_t n = ::write(fd, &newline, 1);
  }
}

// One write of the whole line under an exclusive lock, waited for at most `lock_budget` (a lock that
// never comes, as on a broken network file system, must not keep the job from ending; a preempted
// rank has about a second before its launcher's SIGKILL).
bool append_line(const std::string& path, const std::string& line, std::chrono::milliseconds lock_budget) {
  std::error_code error;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  const int fd = open_incident_file(path);
  if (fd < 0) return false;
  bool locked = false;
  const auto give_up = Clock::now() + lock_budget;
  while (!(locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0) && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (locked) end_torn_line(fd);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  // Unlocked first: the next rank appends while this one's line reaches the disk (a launcher may
  // kill the job a second after its SIGTERM; a line in the page cache survives the process).
  if (locked) ::flock(fd, LOCK_UN);
  ::fsync(fd);
  ::close(fd);
  return done == line.size();
}

}  // namespace

std::string_view incident_cause_name(IncidentCause cause) {
  switch (cause) {
    case IncidentCause::Fatal:
      return "fatal";
    case IncidentCause::Crash:
      return "crash";
    case IncidentCause::Timeout:
      return "timeout";
    case IncidentCause::Error:
      return "error";
    case IncidentCause::Signal:
      return "signal";
    case IncidentCause::Request:
      return "request";
  }
  return "fatal";
}

void IncidentRecorder::configure(const RankInfo& rank, std::string path, std::string run_id) {
  install_stack_capture();
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.rank = rank;
  s.path = std::move(path);
  s.run_id = std::move(run_id);
  g_configured.store(!s.path.empty());
}

void IncidentRecorder::set_device(std::string device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.device = std::move(device);
}

bool IncidentRecorder::enabled() { return g_configured.load(); }
const std::string& IncidentRecorder::path() { return state().path; }
bool IncidentRecorder::written() { return g_written.load(); }
std::string IncidentRecorder::pointer() {
  return fmt::format("incident records in '{}' (explain them: mnddp incident {})", path(), path());
}

std::string IncidentRecorder::identity() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.rank.where();
}

std::string IncidentRecorder::record_json(const IncidentReport& report, const std::vector<ThreadStack>& stacks) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  json record = {{"incident", s.run_id},
                 {"rank", s.rank.rank},
                 {"world_size", s.rank.world_size},
                 {"host", s.rank.host},
                 {"pid", static_cast<long>(::getpid())},
                 {"device", s.device},
                 {"time", wall_seconds(Clock::now())},
                 {"cause", incident_cause_name(report.cause)},
                 {"origin", report.origin < 0 ? s.rank.rank : report.origin},
                 {"reason", report.reason},
                 {"exit_code", report.exit_code},
                 {"step", Activity::step()},
                 {"stuck", nullptr}};
  if (report.stuck)
    record["stuck"] = {{"channel", report.stuck->channel},
                       {"seq", report.stuck->seq},
                       {"what", report.stuck->what},
                       {"age_s", report.stuck->age_s}};
  record["peers"] = peers_json(report.peers);
  record["channels"] = channels_json();
  record["threads"] = threads_json(stacks, report);
  // Invalid UTF-8 in a label or a path must not cost the record.
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool IncidentRecorder::write(const IncidentReport& report, std::chrono::milliseconds stack_wait) {
  if (!enabled()) return false;
  // Held for the whole write, so a withdrawal waits for a record on its way out (never misses it).
  const auto write_lock = lock_within(g_write_mutex, kWriteWait);
  if (!write_lock.owns_lock() || g_written.exchange(true)) return false;
  const bool signal = report.cause == IncidentCause::Signal;
  g_signal_record.store(signal);
  try {
    const auto stacks = capture_thread_stacks(stack_wait);
    return append_line(path(), record_json(report, stacks) + "\n",
                       signal ? std::chrono::milliseconds(500) : std::chrono::milliseconds(2000));
  } catch (const std::exception&) {
    return false;  // on the way out already: the job's message matters more than its record
  }
}

void IncidentRecorder::withdraw_signal_record() {
  if (!enabled()) return;
  const auto write_lock = lock_within(g_write_mutex, kWriteWait);
  if (!write_lock.owns_lock() || !g_signal_record.exchange(false)) return;
  State& s = state();
  json line;
  {
    std::lock_guard lock(s.mutex);
    line = {{"incident", s.run_id}, {"rank", s.rank.rank}, {"withdrawn", true}, {"time", wall_seconds(Clock::now())}};
  }
  append_line(path(), line.dump() + "\n", std::chrono::milliseconds(2000));
  g_written.store(false);
}

// Held shared while a request runs and exclusively to replace it: the watchdog that clears its
// request on destruction waits for a call into it to return, never frees what the call uses.
std::shared_mutex& peer_request_mutex() {
  static auto* mutex = new std::shared_mutex;  // never destroyed: used on the way out
  return *mutex;
}

void IncidentRecorder::set_peer_request(PeerRequest request) {
  State& s = state();
  std::unique_lock in_use(peer_request_mutex());
  std::lock_guard lock(s.mutex);
  s.peer_request = std::move(request);
}

void IncidentRecorder::ask_peers(const std::string& reason, int exit_code) {
  // Once per rank: every rank that ends the job asks, and a second round would only wait again for
  // the ranks that are gone.
  static std::atomic<bool> asked{false};
  if (asked.exchange(true)) return;
  std::shared_lock in_use(peer_request_mutex());
  PeerRequest request;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    request = s.peer_request;
  }
  if (enabled() && request) request(reason, exit_code);
}

std::string make_run_id() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  const char* job = std::getenv("SLURM_JOB_ID");
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z-{}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                     utc.tm_hour, utc.tm_min, utc.tm_sec,
                     job != nullptr ? fmt::format("job{}", job) : fmt::format("pid{}", ::getpid()));
}

}  // namespace mnddp
