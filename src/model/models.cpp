// MLP and ConvNet classifiers.
#include "mnddp/model/models.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Flatten -> [Linear -> ReLU] x layers -> Dropout -> Linear.
class Mlp final : public Classifier {
 public:
  explicit Mlp(const ModelSpec& spec) {
    std::int64_t width = product(spec.input_shape);
    for (int i = 0; i < spec.layers; ++i) {
      body_->push_back(nn::Linear(width, spec.hidden));
      body_->push_back(nn::ReLU());
      width = spec.hidden;
    }
    body_->push_back(nn::Dropout(spec.dropout));
    body_->push_back(nn::Linear(width, spec.num_classes));
    register_module("body", body_);
  }
  at::Tensor forward(at::Tensor x) override { return body_->forward(x.flatten(1)); }

 private:
  nn::Sequential body_;
};

// [Conv3x3 -> (BatchNorm) -> ReLU -> MaxPool2] x layers (channels double per block, pooling while the
// image is larger than 1x1) -> global average pool -> Dropout -> Linear.
class ConvNet final : public Classifier {
 public:
  explicit ConvNet(const ModelSpec& spec) {
    std::int64_t channels = spec.input_shape[0];
    std::int64_t height = spec.input_shape[1];
    std::int64_t width = spec.input_shape[2];
    std::int64_t out = spec.hidden;
    for (int i = 0; i < spec.layers; ++i) {
      features_->push_back(nn::Conv2d(nn::Conv2dOptions(channels, out, 3).padding(1).bias(!spec.batch_norm)));
      if (spec.batch_norm) features_->push_back(nn::BatchNorm2d(out));
      features_->push_back(nn::ReLU());
      if (height >= 2 && width >= 2) {
        features_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
        height /= 2;
        width /= 2;
      }
      channels = out;
      out = std::min<std::int64_t>(out * 2, 1024);
    }
    features_->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    features_->push_back(nn::Flatten());
    features_->push_back(nn::Dropout(spec.dropout));
    features_->push_back(nn::Linear(channels, spec.num_classes));
    register_module("features", features_);
  }
  at::Tensor forward(at::Tensor x) override {
    if (x.dim() == 3) x = x.unsqueeze(1);  // [N, H, W] images get one channel
    return features_->forward(x);
  }

 private:
  nn::Sequential features_;
};

}  // namespace

std::shared_ptr<Classifier> make_model(const ModelSpec& spec) {
  if (spec.input_shape.empty() || product(spec.input_shape) <= 0)
    throw UsageError(fmt::format("--model {}: samples have an empty shape", choice_name(spec.kind)));
  switch (spec.kind) {
    case ModelKind::Mlp:
      return std::make_shared<Mlp>(spec);
    case ModelKind::ConvNet: {
      ModelSpec image = spec;
      if (image.input_shape.size() == 2) image.input_shape.insert(image.input_shape.begin(), 1);
      if (image.input_shape.size() != 3)
        throw UsageError(
            fmt::format("--model convnet needs image samples shaped [C, H, W] or [H, W], but the data has "
                        "samples shaped [{}]; use --model mlp for flat features",
                        fmt::join(spec.input_shape, ", ")));
      return std::make_shared<ConvNet>(image);
    }
  }
  throw std::logic_error("make_model: unknown model kind");
}

std::int64_t parameter_count(const torch::nn::Module& module) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace mnddp
