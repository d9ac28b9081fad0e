// TensorBoard (--tensorboard DIR): rank 0 writes scalar summaries to an event file TensorBoard reads
// (DIR/events.out.tfevents.<time>.<host>.<pid>.mnddp): TFRecord framing (length, masked CRC-32C of
// the length, the serialised Event, masked CRC-32C of the data) around TensorBoard's Event message
// (protobuf, the schema in src/observe/tensorboard_event.proto). A resumed run adds a new file to
// the directory; TensorBoard reads them as one run, by step.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "mnddp/observe/run_observer.hpp"

namespace mnddp {

// TFRecord's checksum of `bytes`: CRC-32C (Castagnoli), rotated and offset ("masked").
std::uint32_t masked_crc32c(const void* bytes, std::size_t size);

class TensorBoardWriter {
 public:
  // Creates the directory and a new event file in it; throws UsageError naming --tensorboard.
  TensorBoardWriter(const std::string& directory, const std::string& host);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(std::string_view tag, std::int64_t step, double value);
  // A session starts at `step`: TensorBoard forgets what it read for this step and later ones.
  void session_start(std::int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::FILE* out_ = nullptr;
};

// Rank 0's scalars: every interval train/loss, train/lr, train/samples_per_second,
// train/data_wait_fraction, train/exposed_comm_fraction (of the step time) and train/loss_scale
// (fp16); every validation val/<metric>.
class TensorBoardObserver final : public RunObserver {
 public:
  TensorBoardObserver(const std::string& directory, const std::string& host);
  // A resumed run's first logged step follows its checkpoint's: a session start there makes
  // TensorBoard drop what an earlier invocation logged past that checkpoint (it is logged again).
  void run_started(const RunPlan& plan) override;
  void interval(const StepMetrics& m) override;
  void validated(const EvalMetrics& m, std::string_view headline, Clock::time_point begin,
                 Clock::time_point end) override;

 private:
  TensorBoardWriter writer_;
};

}  // namespace mnddp
