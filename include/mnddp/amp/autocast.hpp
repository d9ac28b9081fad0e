// Autocast for the forward pass only, as torch.autocast does: --amp bf16|fp16 turns it on for the
// scope's lifetime and restores the previous state (and clears the cast cache) at its end.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "mnddp/choices.hpp"

namespace mnddp {

class AutocastScope {
 public:
  AutocastScope(Amp amp, c10::DeviceType device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

}  // namespace mnddp
