// The per-rank Chrome-trace file: written as it goes (the header at once, the events by the writer
// thread once a second, the thread names and the closing bracket at the end).
#include "mnddp/observe/trace_observer.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/error.hpp"
#include "mnddp/guarded_thread.hpp"

namespace mnddp {

namespace {

constexpr std::string_view kTracePrefix = "rank-";
constexpr std::string_view kTraceSuffix = ".trace.json";

void remove_stale_files(const std::string& directory, int world_size) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    const std::optional<int> rank = trace_file_rank(name);
    if ((rank && *rank >= world_size) || name == "merged.trace.json") std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace

std::string trace_file_path(const std::string& directory, int rank) {
  return (std::filesystem::path(directory) / fmt::format("{}{:05}{}", kTracePrefix, rank, kTraceSuffix)).string();
}

std::optional<int> trace_file_rank(std::string_view file_name) {
  if (!file_name.starts_with(kTracePrefix) || !file_name.ends_with(kTraceSuffix)) return std::nullopt;
  const std::string_view digits =
      file_name.substr(kTracePrefix.size(), file_name.size() - kTracePrefix.size() - kTraceSuffix.size());
  int rank = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return rank;
}

TraceObserver::TraceObserver(Communicator& control, const std::string& directory, const std::string& host)
    : rank_(control.rank()), path_(trace_file_path(directory, control.rank())) {
  try {
    on_all_then_agree(control, [&] {
      std::error_code error;
      std::filesystem::create_directories(directory, error);
      // The directory holds this invocation's trace: a rank file of a larger earlier world, and an
      // earlier merge, would be mixed into it.
      if (control.is_root()) remove_stale_files(directory, control.size());
      out_ = std::fopen(path_.c_str(), "w");
      if (out_ == nullptr)
        throw UsageError(fmt::format("--trace: cannot open '{}' for writing: {}", path_, std::strerror(errno)));
    });
  } catch (...) {
    if (out_ != nullptr) std::fclose(out_);
    throw;
  }
  {
    const CollectiveLabel label("trace origin");
    control.barrier();
  }
  origin_ = Clock::now();
  timeline::name_this_thread("training");
  timeline::enable(true);
  const nlohmann::json other = {{"rank", rank_}, {"world_size", control.size()}, {"host", host}};
  std::fprintf(out_, "{\"displayTimeUnit\":\"ms\",\"otherData\":%s,\"traceEvents\":[\n", other.dump().c_str());
  std::fprintf(out_,
               "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":%s}},\n"
               "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
               rank_, timeline::json_string(fmt::format("rank {} ({})", rank_, host)).c_str(), rank_, rank_);
  std::fflush(out_);  // a rank killed before the first write still leaves a file merge can read
  writer_ = guarded_thread("trace writer", [this] { write_loop(); });
}

TraceObserver::~TraceObserver() { close(); }

double TraceObserver::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void TraceObserver::phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) {
  timeline::span("step", std::string(phase_name(phase)), begin, end);
}

void TraceObserver::step_finished(std::int64_t step, std::int64_t epoch, Clock::time_point begin,
                                  Clock::time_point end) {
  timeline::span("step", fmt::format("step {}", step), begin, end, fmt::format("{{\"epoch\":{}}}", epoch));
}

void TraceObserver::interval(const StepMetrics& m) {
  std::lock_guard lock(mutex_);
  counters_.push_back({Clock::now(), m.loss, m.samples_per_second});
}

void TraceObserver::validated(const EvalMetrics& m, std::string_view, Clock::time_point begin, Clock::time_point end) {
  timeline::span("eval", fmt::format("validation (step {})", m.step), begin, end,
                 fmt::format("{{\"samples\":{}}}", m.samples));
}

void TraceObserver::run_finished(const RunOutcome&) { close(); }

void TraceObserver::write_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Once a second: a wake-up costs the ranks more than the writing (their cores are busy), and a
    // second's events are at most a few MB.
    wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
    lock.unlock();
    flush_events();
    lock.lock();
  }
}

void TraceObserver::flush_events() {
  if (out_ == nullptr) return;
  // fmt formats the numbers (printf's %f costs a microsecond an event); one write per flush.
  std::vector<Counters> counters;
  {
    std::lock_guard lock(mutex_);
    counters.swap(counters_);
  }
  fmt::memory_buffer text;
  for (const Counters& c : counters) {
    if (!std::isfinite(c.loss) || !std::isfinite(c.samples_per_second)) continue;  // JSON has no NaN
    fmt::format_to(
        fmt::appender(text),
        FMT_COMPILE(",\n{{\"ph\":\"C\",\"name\":\"loss\",\"pid\":{0},\"ts\":{1:.3f},\"args\":{{\"loss\":{2}}}}}"
                    ",\n{{\"ph\":\"C\",\"name\":\"samples/s\",\"pid\":{0},\"ts\":{1:.3f},\"args\":{{"
                    "\"samples/s\":{3}}}}}"),
        rank_, micros(c.at), c.loss, c.samples_per_second);
  }
  for (const timeline::Event& e : timeline::drain()) {
    const std::string name = timeline::json_string(e.name);
    const std::string_view comma = e.args.empty() ? "" : ",\"args\":";
    if (e.kind == timeline::Event::Kind::Span) {
      fmt::format_to(fmt::appender(text),
                     FMT_COMPILE(",\n{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{:.3f},"
                                 "\"dur\":{:.3f}{}{}}}"),
                     e.category, name, rank_, e.thread, micros(e.begin), micros(e.end) - micros(e.begin), comma,
                     e.args);
    } else {
      fmt::format_to(fmt::appender(text),
                     // "id2":{"local":..}: the id is this process's (every rank numbers from 1).
                     FMT_COMPILE(",\n{{\"ph\":\"b\",\"cat\":\"{0}\",\"name\":{1},\"id2\":{{\"local\":\"{2:#x}\"}},"
                                 "\"pid\":{3},\"tid\":{4},\"ts\":{5:.3f}{6}{7}}}"
                                 ",\n{{\"ph\":\"e\",\"cat\":\"{0}\",\"name\":{1},\"id2\":{{\"local\":\"{2:#x}\"}},"
                                 "\"pid\":{3},\"tid\":{4},\"ts\":{8:.3f}}}"),
                     e.category, name, e.id, rank_, e.thread, micros(e.begin), comma, e.args, micros(e.end));
    }
  }
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

void TraceObserver::close() {
  if (out_ == nullptr) return;
  timeline::enable(false);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (writer_.joinable()) writer_.join();
  flush_events();
  const auto threads = timeline::thread_names();
  for (std::size_t t = 0; t < threads.size(); ++t)
    std::fprintf(out_, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%zu,\"args\":{\"name\":%s}}",
                 rank_, t, timeline::json_string(threads[t]).c_str());
  std::fprintf(out_, "\n]}\n");
  std::fclose(out_);
  out_ = nullptr;
}

}  // namespace mnddp
