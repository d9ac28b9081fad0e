// The per-rank Chrome-trace file: written as it goes (the header, events every interval, the thread
// names and the closing bracket at the end).
#include "mnddp/observe/trace_observer.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
namespace {

std::string json_string(std::string_view text) { return nlohmann::json(text).dump(); }

}  // namespace

std::string trace_file_path(const std::string& directory, int rank) {
  return (std::filesystem::path(directory) / fmt::format("rank-{:05}.trace.json", rank)).string();
}

TraceObserver::TraceObserver(Communicator& control, const std::string& directory, const std::string& host)
    : rank_(control.rank()), path_(trace_file_path(directory, control.rank())) {
  try {
    on_all_then_agree(control, [&] {
      std::error_code error;
      std::filesystem::create_directories(directory, error);
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
               rank_, json_string(fmt::format("rank {} ({})", rank_, host)).c_str(), rank_, rank_);
  first_event_ = false;
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
  if (timeline::pending() >= 4096) flush_events();  // long intervals: keep memory bounded
}

void TraceObserver::interval(const StepMetrics& m) {
  flush_events();
  if (out_ == nullptr) return;
  const double ts = micros(Clock::now());
  std::fprintf(out_,
               ",\n{\"ph\":\"C\",\"name\":\"loss\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"loss\":%.6g}}"
               ",\n{\"ph\":\"C\",\"name\":\"samples/s\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"samples/s\":%.6g}}",
               rank_, ts, m.loss, rank_, ts, m.samples_per_second);
}

void TraceObserver::validated(const EvalMetrics& m, std::string_view, Clock::time_point begin, Clock::time_point end) {
  timeline::span("eval", fmt::format("validation (step {})", m.step), begin, end,
                 fmt::format("{{\"samples\":{}}}", m.samples));
}

void TraceObserver::run_finished(const RunOutcome&) { close(); }

void TraceObserver::flush_events() {
  if (out_ == nullptr) return;
  for (const timeline::Event& e : timeline::drain()) {
    const std::string name = json_string(e.name);
    const std::string args = e.args.empty() ? std::string() : ",\"args\":" + e.args;
    if (e.kind == timeline::Event::Kind::Span) {
      std::fprintf(out_,
                   ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":%s,\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f%s}",
                   e.category.c_str(), name.c_str(), rank_, e.thread, micros(e.begin), micros(e.end) - micros(e.begin),
                   args.c_str());
    } else {
      std::fprintf(out_,
                   ",\n{\"ph\":\"b\",\"cat\":\"%s\",\"name\":%s,\"id\":%llu,\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}"
                   ",\n{\"ph\":\"e\",\"cat\":\"%s\",\"name\":%s,\"id\":%llu,\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                   e.category.c_str(), name.c_str(), static_cast<unsigned long long>(e.id), rank_, e.thread,
                   micros(e.begin), args.c_str(), e.category.c_str(), name.c_str(),
                   static_cast<unsigned long long>(e.id), rank_, e.thread, micros(e.end));
    }
  }
  std::fflush(out_);
}

void TraceObserver::close() {
  if (out_ == nullptr) return;
  timeline::enable(false);
  flush_events();
  const auto threads = timeline::thread_names();
  for (std::size_t t = 0; t < threads.size(); ++t)
    std::fprintf(out_, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%zu,\"args\":{\"name\":%s}}",
                 rank_, t, json_string(threads[t]).c_str());
  std::fprintf(out_, "\n]}\n");
  std::fclose(out_);
  out_ = nullptr;
}

}  // namespace mnddp
