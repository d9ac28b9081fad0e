// ViT: the Vision Transformer (Dosovitskiy et al. 2021) in the layout, parameter names and
// initialisation of torchvision's VisionTransformer, so an export loads there: a patch embedding
// (conv_proj, a patch_size-strided convolution), a class token, learned position embeddings,
// `layers` pre-norm encoder blocks (multi-head self-attention through torch's
// scaled_dot_product_attention, and a GELU MLP of 4 x width), a final LayerNorm and a linear head
// on the class token. --dropout is torchvision's `dropout` (attention dropout is 0).
// torchvision takes square images only; mnddp also takes [C, H, W] with H != W.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include "fused_bias_linear.hpp"
#include "mnddp/model/sample_randomness.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

constexpr double kLayerNormEps = 1e-6;

// torch.nn.init.trunc_normal_(tensor, 0, std, a=-2, b=2): inverse-CDF sampling of the truncated normal.
void trunc_normal_(at::Tensor& tensor, double std, double a = -2.0, double b = 2.0) {
  const auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  tensor.uniform_(2.0 * cdf(a / std) - 1.0, 2.0 * cdf(b / std) - 1.0);
  tensor.erfinv_().mul_(std * std::sqrt(2.0)).clamp_(a, b);
}

// torch.nn.MultiheadAttention's parameters (in_proj_weight, in_proj_bias, out_proj), self-attention only.
struct SelfAttentionImpl : nn::Module {
  SelfAttentionImpl(std::int64_t width, std::int64_t heads)
      : heads(heads),
        in_proj_weight(register_parameter("in_proj_weight", at::empty({3 * width, width}))),
        in_proj_bias(register_parameter("in_proj_bias", at::zeros({3 * width}))),
        out_proj(register_module("out_proj", FusedBiasLinear(width, width))) {
    torch::NoGradGuard no_grad;
    nn::init::xavier_uniform_(in_proj_weight);  // as MultiheadAttention._reset_parameters
    nn::init::zeros_(out_proj->bias);
  }
  at::Tensor forward(const at::Tensor& x) {
    const auto batch = x.size(0), length = x.size(1), width = x.size(2);
    auto qkv = at::linear(x, in_proj_weight, in_proj_bias).chunk(3, -1);
    auto per_head = [&](const at::Tensor& t) { return t.view({batch, length, heads, width / heads}).transpose(1, 2); };
    const at::Tensor y = at::scaled_dot_product_attention(per_head(qkv[0]), per_head(qkv[1]), per_head(qkv[2]));
    return out_proj->forward(y.transpose(1, 2).contiguous().view({batch, length, width}));
  }

  std::int64_t heads;
  at::Tensor in_proj_weight;
  at::Tensor in_proj_bias;
  FusedBiasLinear out_proj;
};
TORCH_MODULE(SelfAttention);

// torchvision's EncoderBlock; its MLPBlock is Sequential(Linear, GELU, Dropout, Linear, Dropout).
struct EncoderBlockImpl : nn::Module {
  EncoderBlockImpl(std::int64_t width, std::int64_t heads, double dropout,
                   const std::shared_ptr<SampleRandomness>& randomness)
      : ln_1(register_module("ln_1", ThreadInvariantLayerNorm(nn::LayerNormOptions({width}).eps(kLayerNormEps)))),
        self_attention(register_module("self_attention", SelfAttention(width, heads))),
        drop(register_module("dropout", SampleDropout(dropout, randomness))),
        ln_2(register_module("ln_2", ThreadInvariantLayerNorm(nn::LayerNormOptions({width}).eps(kLayerNormEps)))),
        mlp(register_module("mlp", nn::Sequential())) {
    // One push_back each, not Sequential's variadic constructor: the dropouts' layer numbers must
    // follow construction order, and the order a call's arguments are evaluated in is unspecified.
    mlp->push_back(FusedBiasLinear(width, 4 * width));
    mlp->push_back(nn::GELU());
    mlp->push_back(SampleDropout(dropout, randomness));
    mlp->push_back(FusedBiasLinear(4 * width, width));
    mlp->push_back(SampleDropout(dropout, randomness));
    torch::NoGradGuard no_grad;
    for (auto& item : mlp->named_parameters()) {
      if (item.key().ends_with("weight"))
        nn::init::xavier_uniform_(item.value());
      else
        item.value().normal_(0.0, 1e-6);
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = drop->forward(self_attention->forward(ln_1->forward(input))) + input;
    return x + mlp->forward(ln_2->forward(x));
  }

  ThreadInvariantLayerNorm ln_1;
  SelfAttention self_attention;
  SampleDropout drop;
  ThreadInvariantLayerNorm ln_2;
  nn::Sequential mlp;
};
TORCH_MODULE(EncoderBlock);

struct EncoderImpl : nn::Module {
  EncoderImpl(std::int64_t length, const ModelSpec& spec, const std::shared_ptr<SampleRandomness>& randomness)
      : pos_embedding(register_parameter("pos_embedding", at::empty({1, length, spec.hidden}).normal_(0.0, 0.02))),
        drop(register_module("dropout", SampleDropout(spec.dropout, randomness))),
        layers(register_module("layers", nn::ModuleDict())),
        ln(register_module("ln", ThreadInvariantLayerNorm(nn::LayerNormOptions({spec.hidden}).eps(kLayerNormEps)))) {
    for (int i = 0; i < spec.layers; ++i)
      layers->update({{fmt::format("encoder_layer_{}", i),
                       EncoderBlock(spec.hidden, spec.heads, spec.dropout, randomness).ptr()}});
  }
  at::Tensor forward(at::Tensor x) {
    x = drop->forward(x + pos_embedding);
    for (const auto& block : layers->values()) x = block->as<EncoderBlockImpl>()->forward(x);
    return ln->forward(x);
  }

  at::Tensor pos_embedding;
  SampleDropout drop;
  nn::ModuleDict layers;
  ThreadInvariantLayerNorm ln;
};
TORCH_MODULE(Encoder);

class Vit final : public Model {
 public:
  explicit Vit(const ModelSpec& spec)
      : patch_(spec.patch_size),
        conv_proj_(register_module(
            "conv_proj",
            nn::Conv2d(nn::Conv2dOptions(spec.input_shape[0], spec.hidden, spec.patch_size).stride(spec.patch_size)))),
        class_token_(register_parameter("class_token", at::zeros({1, 1, spec.hidden}))),
        encoder_(register_module("encoder", Encoder(sequence_length(spec), spec, sample_randomness_))),
        heads_(register_module("heads", nn::Sequential())) {
    heads_->push_back("head", FusedBiasLinear(spec.hidden, spec.num_outputs));
    torch::NoGradGuard no_grad;
    trunc_normal_(conv_proj_->weight, std::sqrt(1.0 / static_cast<double>(spec.input_shape[0] * patch_ * patch_)));
    nn::init::zeros_(conv_proj_->bias);
    for (auto& parameter : heads_->parameters()) nn::init::zeros_(parameter);  // torchvision's head starts at zero
  }

  at::Tensor forward(at::Tensor x) override {
    if (x.dim() == 3) x = x.unsqueeze(1);  // [N, H, W] images get one channel
    const auto batch = x.size(0);
    x = conv_proj_->forward(x).flatten(2).transpose(1, 2);  // [N, patches, width]
    x = at::cat({class_token_.expand({batch, -1, -1}), x}, 1);
    x = encoder_->forward(x);
    return heads_->forward(x.select(1, 0));
  }

 private:
  static std::int64_t sequence_length(const ModelSpec& spec) {
    return (spec.input_shape[1] / spec.patch_size) * (spec.input_shape[2] / spec.patch_size) + 1;
  }

  std::int64_t patch_;
  nn::Conv2d conv_proj_;
  at::Tensor class_token_;
  Encoder encoder_;
  nn::Sequential heads_;
};

}  // namespace

std::shared_ptr<Model> make_vit(const ModelSpec& spec) { return std::make_shared<Vit>(spec); }

}  // namespace mnddp
