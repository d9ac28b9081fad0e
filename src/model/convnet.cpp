// ConvNet: [Conv3x3 -> (BatchNorm) -> ReLU -> MaxPool2] x layers (channels double per block, pooling
// while the image is larger than 1x1) -> global average pool -> Dropout -> Linear.
#include <algorithm>

#include "mnddp/model/sample_randomness.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

class ConvNet final : public Model {
 public:
  explicit ConvNet(const ModelSpec& spec) {
    std::int64_t channels = spec.input_shape[0];
    std::int64_t height = spec.input_shape[1];
    std::int64_t width = spec.input_shape[2];
    std::int64_t out = spec.hidden;
    for (int i = 0; i < spec.layers; ++i) {
      features_->push_back(nn::Conv2d(nn::Conv2dOptions(channels, out, 3).padding(1).bias(!spec.batch_norm)));
      if (spec.batch_norm) features_->push_back(batch_norm_2d(spec, out));
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
    features_->push_back(SampleDropout(spec.dropout, sample_randomness_));
    features_->push_back(nn::Linear(channels, spec.num_outputs));
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

std::shared_ptr<Model> make_convnet(const ModelSpec& spec) { return std::make_shared<ConvNet>(spec); }

}  // namespace mnddp
