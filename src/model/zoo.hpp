// Internal to model/: each network's constructor behind a factory (models.cpp chooses one).
#pragma once

#include <torch/nn/modules/container/any.h>

#include <cstdint>
#include <memory>

#include "mnddp/model/models.hpp"
#include "mnddp/model/thread_invariant_norms.hpp"

namespace mnddp {

std::shared_ptr<Model> make_mlp(const ModelSpec& spec);
std::shared_ptr<Model> make_convnet(const ModelSpec& spec);  // spec.input_shape is [C, H, W]
std::shared_ptr<Model> make_gpt(const ModelSpec& spec);      // spec.input_shape is [context]
std::shared_ptr<Model> make_cnn3d(const ModelSpec& spec);    // spec.input_shape is [C, D, H, W]
std::shared_ptr<Model> make_vit(const ModelSpec& spec);      // spec.input_shape is [C, H, W]
// Loads spec.torchscript_path and checks one forward pass against spec.output_shape.
std::shared_ptr<Model> load_torchscript(const ModelSpec& spec);
// resnet18/34/50 (spec.kind); spec.input_shape is [C, H, W].
std::shared_ptr<Model> make_resnet(const ModelSpec& spec, bool cifar_stem);

// The zoo's BatchNorm2d: torch's, or SyncBatchNorm2d (the same names) when spec.sync_batch_norm.
torch::nn::AnyModule batch_norm_2d(const ModelSpec& spec, std::int64_t channels);

}  // namespace mnddp
