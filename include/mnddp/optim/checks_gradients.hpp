// An optimizer whose own pass over the gradients also looks for NaN/Inf (FusedSgd, FusedAdamW), so
// that --on-nonfinite abort on the CPU needs no separate scan: the trainer asks afterwards.
#pragma once

namespace mnddp {

class ChecksGradients {
 public:
  virtual ~ChecksGradients() = default;

  // Whether a host gradient the last step() read held a NaN or an infinity (device gradients are
  // not looked at). The parameters it updated then hold garbage: a caller that sees it must stop
  // (--on-nonfinite abort), not go on.
  virtual bool nonfinite_seen() const = 0;
};

}  // namespace mnddp
