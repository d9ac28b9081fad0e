// --memory-format: channels-last weights for convolution models.
#include "mnddp/model/memory_layout.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "mnddp/error.hpp"

namespace mnddp {

bool wants_channels_last(MemoryLayout requested, ModelKind kind, bool on_cpu, bool deterministic, bool half_precision) {
  switch (requested) {
    case MemoryLayout::ChannelsLast:
      return true;
    case MemoryLayout::Contiguous:
      return false;
    case MemoryLayout::Auto:
      break;
  }
  const bool conv2d = kind == ModelKind::ConvNet || kind == ModelKind::Resnet18 || kind == ModelKind::Resnet34 ||
                      kind == ModelKind::Resnet50 || kind == ModelKind::Resnet101 || kind == ModelKind::Resnet152;
  return conv2d && (on_cpu || half_precision) && !deterministic;
}

int make_channels_last(torch::nn::Module& model, const std::string& model_name) {
  at::NoGradGuard no_grad;
  int converted = 0;
  for (auto& parameter : model.parameters()) {
    if (parameter.dim() != 4) continue;
    // set_data keeps the parameter's identity (optimizer, hooks and DDP see the same tensor).
    parameter.set_data(parameter.contiguous(at::MemoryFormat::ChannelsLast));
    ++converted;
  }
  if (converted == 0)
    throw UsageError(
        fmt::format("--memory-format channels-last: --model {} has no 4-D weight (no 2-D convolution) "
                    "to lay out channels-last; use auto or contiguous",
                    model_name));
  return converted;
}

}  // namespace mnddp
