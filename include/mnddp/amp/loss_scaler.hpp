// Dynamic loss scaling for fp16 autocast, as torch.cuda.amp.GradScaler does it: the loss is
// multiplied by a large scale so small fp16 gradients do not flush to zero; after the all-reduce the
// gradients are unscaled and checked; a step with inf/NaN gradients is skipped and the scale halved,
// and after `growth_interval` clean steps the scale doubles.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "mnddp/comm/communicator.hpp"

namespace mnddp {

struct LossScalerOptions {
  bool enabled = false;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

class LossScaler {
 public:
  LossScaler(LossScalerOptions options, c10::Device device);

  bool enabled() const { return options_.enabled; }
  // loss * scale (the loss unchanged when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale in place and returns whether all are finite. Called on the
  // all-reduced gradients, which are identical on every rank, so every rank gets the same answer.
  // Under ZeRO each rank holds different gradients (its pieces): `agree_over` then makes the verdict
  // (and the scale's next update) every rank's, by one all-reduce of the found-inf flag.
  // Reads the verdict on the host: a synchronisation on a GPU (as GradScaler.step has with an
  // optimizer that cannot take found_inf).
  bool unscale(const std::vector<at::Tensor>& parameters, Communicator* agree_over = nullptr);
  // The same without the verdict's read: found_inf() holds it on the device (1 where inf/NaN was
  // found), for an optimizer that skips on the device (train/device_gated_optimizer.hpp).
  void unscale_on_device(const std::vector<at::Tensor>& parameters, Communicator* agree_over = nullptr);
  const at::Tensor& found_inf() const { return found_inf_; }
  // After the step (taken or skipped): halve on overflow, grow after enough clean steps.
  void update();
  double current_scale() const;

  // For checkpoints: the scale and the clean-step counter, and putting them back.
  std::pair<at::Tensor, at::Tensor> state() const { return {scale_, growth_tracker_}; }
  void load_state(double scale, int growth_tracker);

 private:
  LossScalerOptions options_;
  at::Tensor scale_;           // float32 [1] on the device
  at::Tensor growth_tracker_;  // int32 [1]: clean steps since the last change
  at::Tensor found_inf_;       // float32 [1]: set by unscale()
};

}  // namespace mnddp
