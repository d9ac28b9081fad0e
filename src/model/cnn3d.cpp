// CNN3D: the CosmoFlow network (MLPerf HPC; its PyTorch reference's layout and names) for volumes
// [C, D, H, W]: `layers` blocks of Conv3d 3x3x3 ('same' padding) -> LeakyReLU -> MaxPool3d 2
// (channels hidden·2^i, pooling while every side is at least 2), then the features flattened
// channels-last -> dense1 (128) -> LeakyReLU(0.3) -> Dropout -> dense2 (64) -> LeakyReLU(0.3) ->
// Dropout -> output. Dense layers are Xavier-uniform with zero biases, as the reference.
// Deliberately unlike it: the output is linear (the reference bounds it with a scaled tanh/sigmoid
// for its normalised cosmological parameters; mnddp's targets may be any real numbers).
#include <ATen/ATen.h>

#include <algorithm>

#include "mnddp/model/sample_randomness.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

struct ConvBlockImpl : nn::Module {
  ConvBlockImpl(std::int64_t in, std::int64_t out, bool pool)
      : conv(register_module("conv", nn::Conv3d(nn::Conv3dOptions(in, out, 3).padding(1)))), pool(pool) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor y = at::leaky_relu(conv->forward(x));
    return pool ? at::max_pool3d(y, {2, 2, 2}) : y;
  }

  nn::Conv3d conv;
  bool pool;
};
TORCH_MODULE(ConvBlock);

class Cnn3d final : public Model {
 public:
  explicit Cnn3d(const ModelSpec& spec) {
    std::int64_t channels = spec.input_shape[0];
    std::vector<std::int64_t> sides(spec.input_shape.begin() + 1, spec.input_shape.end());
    for (int i = 0; i < spec.layers; ++i) {
      const std::int64_t out = std::min<std::int64_t>(static_cast<std::int64_t>(spec.hidden) << std::min(i, 10), 1024);
      const bool pool = std::ranges::all_of(sides, [](std::int64_t side) { return side >= 2; });
      conv_seq_->push_back(ConvBlock(channels, out, pool));
      if (pool)
        for (auto& side : sides) side /= 2;
      channels = out;
    }
    const std::int64_t flat = channels * sides[0] * sides[1] * sides[2];
    register_module("conv_seq", conv_seq_);
    dense1_ = register_module("dense1", nn::Linear(flat, 128));
    dense2_ = register_module("dense2", nn::Linear(128, 64));
    output_ = register_module("output", nn::Linear(64, spec.num_outputs));
    dr1_ = register_module("dr1", SampleDropout(spec.dropout, sample_randomness_));
    dr2_ = register_module("dr2", SampleDropout(spec.dropout, sample_randomness_));
    torch::NoGradGuard no_grad;
    for (auto* dense : {&dense1_, &dense2_, &output_}) {
      nn::init::xavier_uniform_((*dense)->weight);
      nn::init::zeros_((*dense)->bias);
    }
  }

  at::Tensor forward(at::Tensor x) override {
    if (x.dim() == 4) x = x.unsqueeze(1);  // [N, D, H, W] volumes get one channel
    for (const auto& block : *conv_seq_) x = block->as<ConvBlockImpl>()->forward(x);
    x = x.permute({0, 2, 3, 4, 1}).flatten(1);  // channels last, as the reference (and Keras) flatten
    x = dr1_->forward(at::leaky_relu(dense1_->forward(x), 0.3));
    x = dr2_->forward(at::leaky_relu(dense2_->forward(x), 0.3));
    return output_->forward(x);
  }

 private:
  nn::ModuleList conv_seq_;
  nn::Linear dense1_{nullptr}, dense2_{nullptr}, output_{nullptr};
  SampleDropout dr1_{nullptr}, dr2_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_cnn3d(const ModelSpec& spec) { return std::make_shared<Cnn3d>(spec); }

}  // namespace mnddp
