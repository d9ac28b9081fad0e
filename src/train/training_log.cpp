// Interval metrics and validation results: log lines and the metrics file.
#include "mnddp/train/training_log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/error.hpp"

namespace mnddp {

TrainingLog::TrainingLog(TrainingLogOptions options, double interval_loss, std::int64_t interval_steps)
    : options_(std::move(options)), writer_(options_.metrics_file), loss_(interval_loss), steps_(interval_steps) {}

void TrainingLog::run_started(const RunPlan&) { start_ = Clock::now(); }  // set-up is not a step

void TrainingLog::phase(StepPhase phase, Clock::time_point begin, Clock::time_point end) {
  if (phase == StepPhase::DataWait) data_wait_ += seconds(begin, end);
  if (phase == StepPhase::ExposedComm) exposed_comm_ += seconds(begin, end);
}

StepMetrics TrainingLog::report(std::int64_t step, std::int64_t epoch, double lr, double loss_scale, bool last,
                                MpiComm& control, const FaultHooks& faults) {
  const IntervalPoint at{step, step - steps_ + 1, last};
  ReductionMessage message;
  const auto loss_slot = message.add_sum(loss_);
  const auto wait_slot = message.add_sum(data_wait_);
  const auto comm_slot = message.add_sum(exposed_comm_);
  const auto waits_slot = message.add_sum(host_waits_);
  for (auto& rider : riders_) rider->contribute(message, at);
  {
    const bool stray = faults.desyncs_interval(at.first_step, at.step);
    const CollectiveLabel label(stray ? "stray all-reduce (injected desync)" : "training metrics");
    control.allreduce(message);
  }
  if (!message.layout_agreed())
    throw Error(fmt::format("ranks out of step: the metrics all-reduce of step {} met contributions of "
                            "different layouts of the same size (a rank is running another part of the program)",
                            step),
                kExitDesync, /*collective=*/true);
  for (auto& rider : riders_) rider->receive(message, at);
  const double ranks = control.size();
  const double sums[3] = {message.sum(loss_slot) / ranks, message.sum(wait_slot) / ranks,
                          message.sum(comm_slot) / ranks};
  const double elapsed = seconds(start_, Clock::now());
  const auto steps = static_cast<double>(steps_);
  // A resumed interval's loss covers its carried-over steps; its times, only this invocation's.
  const auto timed = static_cast<double>(std::max<std::int64_t>(timed_steps_, 1));
  StepMetrics m;
  m.step = step;
  m.epoch = epoch;
  m.loss = sums[0] / steps;
  m.lr = lr;
  m.loss_scale = loss_scale;
  m.step_time_s = elapsed / timed;
  m.data_wait_s = sums[1] / timed;
  m.exposed_comm_s = sums[2] / timed;
  m.host_waits_per_step = message.sum(waits_slot) / ranks / timed;
  m.samples_per_second = timed * static_cast<double>(options_.samples_per_step) / elapsed;
  for (const auto& rider : riders_) rider->annotate(m);
  const std::string straggler = m.straggler_rank < 0
                                    ? std::string()
                                    : fmt::format(" straggler rank {} ({}) +{:.1f} ms", m.straggler_rank,
                                                  m.straggler_host, m.straggler_late_s * 1e3);
  spdlog::log(options_.console ? spdlog::level::info : spdlog::level::debug,
              "epoch {} step {}/{}: loss {:.4f} lr {:.3g} {:.0f} samples/s step {:.1f} ms data wait {:.1f} ms "
              "exposed comm {:.1f} ms{}",
              epoch, step, options_.total_steps, m.loss, lr, m.samples_per_second, m.step_time_s * 1e3,
              m.data_wait_s * 1e3, m.exposed_comm_s * 1e3, straggler);
  writer_.write(m);
  loss_ = data_wait_ = exposed_comm_ = host_waits_ = 0.0;
  steps_ = timed_steps_ = 0;
  start_ = Clock::now();
  return m;
}

void TrainingLog::report(std::int64_t step, std::int64_t epoch, const EvalResult& result) {
  std::string values;
  for (const auto& metric : result.metrics)
    values += fmt::format("{}{} {:.4f}", values.empty() ? "" : ", ", metric.name, metric.value);
  spdlog::info("epoch {} step {}: validation {} ({} samples)", epoch, step, values, result.samples);
  writer_.write(EvalMetrics{step, epoch, result.metrics, result.samples});
}

}  // namespace mnddp
