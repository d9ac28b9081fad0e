// TensorBoard event files: protobuf for the messages, Boost.CRC for TFRecord's CRC-32C.
#include "mnddp/observe/tensorboard.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "mnddp/error.hpp"
#include "tensorboard_event.pb.h"

namespace mnddp {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::uint32_t masked_crc32c(const void* bytes, std::size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;  // CRC-32C
  crc.process_bytes(bytes, size);
  const std::uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& directory, const std::string& host) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  const double now = wall_seconds();
  path_ = (std::filesystem::path(directory) /
           fmt::format("events.out.tfevents.{}.{}.{}.mnddp", static_cast<long long>(now), host, getpid()))
              .string();
  out_ = std::fopen(path_.c_str(), "wb");
  if (out_ == nullptr)
    throw UsageError(fmt::format("--tensorboard: cannot open '{}' for writing: {}", path_, std::strerror(errno)));
  tensorboard::Event first;
  first.set_wall_time(now);
  first.set_file_version("brain.Event:2");
  write_record(first.SerializeAsString());
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

void TensorBoardWriter::scalar(std::string_view tag, std::int64_t step, double value) {
  tensorboard::Event event;
  event.set_wall_time(wall_seconds());
  event.set_step(step);
  tensorboard::Summary::Value* summary = event.mutable_summary()->add_value();
  summary->set_tag(std::string(tag));
  summary->set_simple_value(static_cast<float>(value));
  summary->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::session_start(std::int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(wall_seconds());
  event.set_step(step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  write_record(event.SerializeAsString());
  flush();
}

void TensorBoardWriter::flush() { std::fflush(out_); }

void TensorBoardWriter::write_record(const std::string& data) {
  // TFRecord: uint64 length, masked CRC of those 8 bytes, the data, masked CRC of the data (little
  // endian; this code runs on little-endian machines only, as does the rest of mnddp's I/O).
  const std::uint64_t length = data.size();
  const std::uint32_t length_crc = masked_crc32c(&length, sizeof(length));
  const std::uint32_t data_crc = masked_crc32c(data.data(), data.size());
  std::fwrite(&length, sizeof(length), 1, out_);
  std::fwrite(&length_crc, sizeof(length_crc), 1, out_);
  std::fwrite(data.data(), 1, data.size(), out_);
  std::fwrite(&data_crc, sizeof(data_crc), 1, out_);
}

TensorBoardObserver::TensorBoardObserver(const std::string& directory, const std::string& host)
    : writer_(directory, host) {}

void TensorBoardObserver::run_started(const RunPlan& plan) { writer_.session_start(plan.first_step + 1); }

void TensorBoardObserver::interval(const StepMetrics& m) {
  writer_.scalar("train/loss", m.step, m.loss);
  writer_.scalar("train/lr", m.step, m.lr);
  writer_.scalar("train/samples_per_second", m.step, m.samples_per_second);
  if (m.step_time_s > 0) {
    writer_.scalar("train/data_wait_fraction", m.step, m.data_wait_s / m.step_time_s);
    writer_.scalar("train/exposed_comm_fraction", m.step, m.exposed_comm_s / m.step_time_s);
  }
  if (m.loss_scale > 0) writer_.scalar("train/loss_scale", m.step, m.loss_scale);
  writer_.flush();  // a killed job keeps what it logged
}

void TensorBoardObserver::validated(const EvalMetrics& m, std::string_view, Clock::time_point, Clock::time_point) {
  for (const auto& metric : m.metrics) writer_.scalar("val/" + metric.name, m.step, metric.value);
  writer_.flush();
}

}  // namespace mnddp
