// JSON-lines metrics, written with nlohmann::json and flushed per line so a killed job keeps them.
#include "mnddp/observe/metrics.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "mnddp/error.hpp"

namespace mnddp {

MetricsWriter::MetricsWriter(const std::string& path) {
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  out_.open(path, std::ios::app);
  if (!out_)
    throw UsageError(fmt::format("--metrics-file: cannot open '{}' for writing: {}", path, std::strerror(errno)));
}

void MetricsWriter::write(const StepMetrics& m) {
  if (!enabled()) return;
  nlohmann::json line = {{"kind", "train"},
                         {"step", m.step},
                         {"epoch", m.epoch},
                         {"loss", m.loss},
                         {"lr", m.lr},
                         {"samples_per_s", m.samples_per_second},
                         {"step_time_s", m.step_time_s},
                         {"data_wait_s", m.data_wait_s},
                         {"exposed_comm_s", m.exposed_comm_s},
                         {"host_waits_per_step", m.host_waits_per_step}};
  if (m.loss_scale > 0) line["loss_scale"] = m.loss_scale;
  if (m.straggler_rank >= 0) {
    nlohmann::json straggler = {{"rank", m.straggler_rank}, {"host", m.straggler_host}, {"late_s", m.straggler_late_s}};
    if (!std::isnan(m.straggler_before_batch_s)) {
      straggler["before_batch_s"] = m.straggler_before_batch_s;
      straggler["forward_s"] = m.straggler_forward_s;
      straggler["backward_s"] = m.straggler_backward_s;
    }
    line["straggler"] = std::move(straggler);
  }
  out_ << line.dump() << '\n' << std::flush;
}

void MetricsWriter::write_line(const std::string& json) {
  if (!enabled()) return;
  out_ << json << '\n' << std::flush;
}

void MetricsWriter::write(const EvalMetrics& m) {
  if (!enabled()) return;
  nlohmann::json line = {{"kind", "eval"}, {"step", m.step}, {"epoch", m.epoch}, {"samples", m.samples}};
  for (const auto& metric : m.metrics) line[metric.name] = metric.value;
  out_ << line.dump() << '\n' << std::flush;
}

}  // namespace mnddp
