// ResNet-18/34/50/101/152 in torchvision's layout (parameter names included: conv1, bn1, layer1.0.conv1,
// layer2.0.downsample.0, fc, ...) and initialisation (Kaiming-normal convolutions, fan-out; BatchNorm
// weights 1, biases 0), so the counts equal torchvision's: resnet18 at 1000 classes has 11,689,512
// parameters, resnet50 25,557,032. ResNet-50 is v1.5 (the stride in the 3x3 convolution). The
// ImageNet stem is a 7x7 stride-2 convolution and a 3x3 max-pool; the CIFAR stem a 3x3 stride-1
// convolution without pooling, for small images.
#include <ATen/ATen.h>

#include "mnddp/model/sync_batch_norm.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

struct BlockImpl : nn::Module {
  virtual at::Tensor forward(const at::Tensor& x) = 0;

 protected:
  // A BatchNorm2d (plain or synchronised, batch_norm_2d), registered under `name`.
  nn::AnyModule norm(const ModelSpec& spec, const std::string& name, std::int64_t channels) {
    nn::AnyModule bn = batch_norm_2d(spec, channels);
    register_module(name, bn.ptr());
    return bn;
  }
  // The projection shortcut: a strided 1x1 convolution and a BatchNorm (downsample.0, downsample.1).
  static nn::Sequential shortcut(const ModelSpec& spec, std::int64_t in, std::int64_t out, std::int64_t stride) {
    nn::Sequential path(conv(in, out, 1, stride));
    path->push_back(batch_norm_2d(spec, out));
    return path;
  }
};

// Two 3x3 convolutions (ResNet-18/34).
struct BasicBlockImpl : BlockImpl {
  static constexpr std::int64_t kExpansion = 1;
  BasicBlockImpl(const ModelSpec& spec, std::int64_t in, std::int64_t planes, std::int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 3, stride));
    bn1 = norm(spec, "bn1", planes);
    conv2 = register_module("conv2", conv(planes, planes, 3, 1));
    bn2 = norm(spec, "bn2", planes);
    if (stride != 1 || in != planes * kExpansion)
      downsample = register_module("downsample", shortcut(spec, in, planes * kExpansion, stride));
  }
  // In place, as torchvision: BatchNorm's backward needs its input, not its output.
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = bn1.forward(conv1->forward(x)).relu_();
    out = bn2.forward(conv2->forward(out));
    return out.add_(downsample ? downsample->forward(x) : x).relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::AnyModule bn1, bn2;
  nn::Sequential downsample{nullptr};
};

// 1x1 -> 3x3 (with the stride) -> 1x1 x4 (ResNet-50).
struct BottleneckImpl : BlockImpl {
  static constexpr std::int64_t kExpansion = 4;
  BottleneckImpl(const ModelSpec& spec, std::int64_t in, std::int64_t planes, std::int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 1, 1));
    bn1 = norm(spec, "bn1", planes);
    conv2 = register_module("conv2", conv(planes, planes, 3, stride));
    bn2 = norm(spec, "bn2", planes);
    conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1));
    bn3 = norm(spec, "bn3", planes * kExpansion);
    if (stride != 1 || in != planes * kExpansion)
      downsample = register_module("downsample", shortcut(spec, in, planes * kExpansion, stride));
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor out = bn1.forward(conv1->forward(x)).relu_();
    out = bn2.forward(conv2->forward(out)).relu_();
    out = bn3.forward(conv3->forward(out));
    return out.add_(downsample ? downsample->forward(x) : x).relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::AnyModule bn1, bn2, bn3;
  nn::Sequential downsample{nullptr};
};

class ResNet final : public Model {
 public:
  ResNet(const ModelSpec& spec, std::vector<int> blocks, bool bottleneck, bool cifar_stem) : cifar_stem_(cifar_stem) {
    const std::int64_t channels = spec.input_shape[0];
    conv1_ = register_module("conv1", cifar_stem ? conv(channels, 64, 3, 1) : conv(channels, 64, 7, 2));
    bn1_ = batch_norm_2d(spec, 64);
    register_module("bn1", bn1_.ptr());
    const std::int64_t expansion = bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
    std::int64_t in = 64;
    for (std::size_t stage = 0; stage < 4; ++stage) {
      const std::int64_t planes = std::int64_t{64} << stage;
      nn::ModuleList layer;
      for (int b = 0; b < blocks[stage]; ++b) {
        const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        if (bottleneck)
          layer->push_back(std::make_shared<BottleneckImpl>(spec, in, planes, stride));
        else
          layer->push_back(std::make_shared<BasicBlockImpl>(spec, in, planes, stride));
        in = planes * expansion;
      }
      layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", nn::Linear(in, spec.num_outputs));
    initialise();
  }

  at::Tensor forward(at::Tensor x) override {
    if (x.dim() == 3) x = x.unsqueeze(1);  // [N, H, W] images get one channel
    x = bn1_.forward(conv1_->forward(x)).relu_();
    if (!cifar_stem_) x = at::max_pool2d(x, 3, 2, 1);
    for (auto& layer : layers_)
      for (const auto& block : *layer) x = block->as<BlockImpl>()->forward(x);
    return fc_->forward(at::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }

 private:
  // torchvision's: kaiming_normal_(mode="fan_out", nonlinearity="relu") for convolutions, BatchNorm
  // weight 1 and bias 0; the Linear keeps its default.
  void initialise() {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        nn::init::ones_(bn->weight);
        nn::init::zeros_(bn->bias);
      } else if (auto* sync = module->as<SyncBatchNorm2d>()) {
        nn::init::ones_(sync->weight);
        nn::init::zeros_(sync->bias);
      }
    }
  }

  bool cifar_stem_;
  nn::Conv2d conv1_{nullptr};
  nn::AnyModule bn1_;
  std::vector<nn::ModuleList> layers_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_resnet(const ModelSpec& spec, bool cifar_stem) {
  switch (spec.kind) {
    case ModelKind::Resnet18:
      return std::make_shared<ResNet>(spec, std::vector<int>{2, 2, 2, 2}, false, cifar_stem);
    case ModelKind::Resnet34:
      return std::make_shared<ResNet>(spec, std::vector<int>{3, 4, 6, 3}, false, cifar_stem);
    case ModelKind::Resnet50:
      return std::make_shared<ResNet>(spec, std::vector<int>{3, 4, 6, 3}, true, cifar_stem);
    case ModelKind::Resnet101:
      return std::make_shared<ResNet>(spec, std::vector<int>{3, 4, 23, 3}, true, cifar_stem);
    case ModelKind::Resnet152:
      return std::make_shared<ResNet>(spec, std::vector<int>{3, 8, 36, 3}, true, cifar_stem);
    default:
      throw std::logic_error("make_resnet: not a ResNet");
  }
}

}  // namespace mnddp
