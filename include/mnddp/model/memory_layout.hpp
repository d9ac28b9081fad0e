// --memory-format: the layout of a model's 4-D weights, and so of its activations. oneDNN's CPU
// convolutions take NHWC activations as they are; NCHW ones are reordered into its blocked layout
// and back around each convolution (a tenth of ResNet-18's oneDNN time on one CPU core).
#pragma once

#include <torch/nn/module.h>

#include <string>

#include "mnddp/choices.hpp"

namespace mnddp {

// Whether `requested` means channels-last for this model: auto picks it for the 2-D convolution
// models of the zoo (convnet, resnet*) on CPU, and on a GPU under bf16 or fp16 autocast (cuDNN's
// tensor-core convolutions take NHWC as it is and transpose NCHW around each one), unless
// --deterministic (whose thread-invariant BatchNorm would reroute every channels-last batch).
bool wants_channels_last(MemoryLayout requested, ModelKind kind, bool on_cpu, bool deterministic,
                         bool half_precision = false);

// Makes every 4-D parameter channels-last (the same values, another stride order) and returns how
// many there were. Throws UsageError, naming `model_name`, when there is none: channels-last was
// asked for a model without 2-D convolutions.
int make_channels_last(torch::nn::Module& model, const std::string& model_name);

}  // namespace mnddp
