// GPT: a decoder-only Transformer language model in the layout of GPT-2 (and nanoGPT, whose
// parameter names it keeps, so its state dict loads there): token and position embeddings, pre-norm
// blocks of causal self-attention (torch's scaled_dot_product_attention; written out when training
// with dropout, whose masks are drawn per sample) and a GELU MLP, a final LayerNorm, and an output
// layer that shares the token embedding unless untied. Initialised as GPT-2: N(0, 0.02), residual
// projections N(0, 0.02/sqrt(2·layers)), zero biases.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include "fused_bias_linear.hpp"
#include "mnddp/error.hpp"
#include "mnddp/model/causal_attention.hpp"
#include "mnddp/model/sample_randomness.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

struct CausalSelfAttentionImpl : nn::Module {
  CausalSelfAttentionImpl(std::int64_t d_model, std::int64_t heads, double dropout,
                          const std::shared_ptr<SampleRandomness>& randomness)
      : heads(heads),
        dropout(dropout),
        c_attn(register_module("c_attn", FusedBiasLinear(d_model, 3 * d_model))),
        c_proj(register_module("c_proj", FusedBiasLinear(d_model, d_model))),
        attn_dropout(register_module("attn_dropout", SampleDropout(dropout, randomness))),
        resid_dropout(register_module("resid_dropout", SampleDropout(dropout, randomness))) {}

  at::Tensor forward(const at::Tensor& x) {
    const auto batch = x.size(0), length = x.size(1), width = x.size(2);
    auto qkv = c_attn->forward(x).split(width, 2);
    // [B, T, d] -> [B, heads, T, d / heads]
    auto per_head = [&](const at::Tensor& t) { return t.view({batch, length, heads, width / heads}).transpose(1, 2); };
    const at::Tensor q = per_head(qkv[0]), k = per_head(qkv[1]), v = per_head(qkv[2]);
    // SDPA's own dropout would draw from the rank's generator; the written-out path keys it by sample.
    const at::Tensor y = is_training() && dropout > 0.0
                             ? causal_attention(q, k, v, *attn_dropout)
                             : at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    return resid_dropout->forward(c_proj->forward(y.transpose(1, 2).contiguous().view({batch, length, width})));
  }

  std::int64_t heads;
  double dropout;
  FusedBiasLinear c_attn;
  FusedBiasLinear c_proj;
  SampleDropout attn_dropout;  // on the attention probabilities, as nanoGPT's
  SampleDropout resid_dropout;
};
TORCH_MODULE(CausalSelfAttention);

struct MlpBlockImpl : nn::Module {
  MlpBlockImpl(std::int64_t d_model, double dropout, const std::shared_ptr<SampleRandomness>& randomness)
      : c_fc(register_module("c_fc", FusedBiasLinear(d_model, 4 * d_model))),
        c_proj(register_module("c_proj", FusedBiasLinear(4 * d_model, d_model))),
        drop(register_module("dropout", SampleDropout(dropout, randomness))) {}
  at::Tensor forward(const at::Tensor& x) { return drop->forward(c_proj->forward(at::gelu(c_fc->forward(x)))); }

  FusedBiasLinear c_fc;
  FusedBiasLinear c_proj;
  SampleDropout drop;
};
TORCH_MODULE(MlpBlock);

struct BlockImpl : nn::Module {
  BlockImpl(std::int64_t d_model, std::int64_t heads, double dropout,
            const std::shared_ptr<SampleRandomness>& randomness)
      : ln_1(register_module("ln_1", ThreadInvariantLayerNorm(nn::LayerNormOptions({d_model})))),
        attn(register_module("attn", CausalSelfAttention(d_model, heads, dropout, randomness))),
        ln_2(register_module("ln_2", ThreadInvariantLayerNorm(nn::LayerNormOptions({d_model})))),
        mlp(register_module("mlp", MlpBlock(d_model, dropout, randomness))) {}
  at::Tensor forward(at::Tensor x) {
    x = x + attn->forward(ln_1->forward(x));
    return x + mlp->forward(ln_2->forward(x));
  }

  ThreadInvariantLayerNorm ln_1;
  CausalSelfAttention attn;
  ThreadInvariantLayerNorm ln_2;
  MlpBlock mlp;
};
TORCH_MODULE(Block);

// nanoGPT's `transformer` ModuleDict.
struct TransformerImpl : nn::Module {
  TransformerImpl(const ModelSpec& spec, std::int64_t context, const std::shared_ptr<SampleRandomness>& randomness)
      : wte(register_module("wte", nn::Embedding(spec.num_outputs, spec.hidden))),
        wpe(register_module("wpe", nn::Embedding(context, spec.hidden))),
        drop(register_module("drop", SampleDropout(spec.dropout, randomness))),
        h(register_module("h", nn::ModuleList())),
        ln_f(register_module("ln_f", ThreadInvariantLayerNorm(nn::LayerNormOptions({spec.hidden})))) {
    for (int i = 0; i < spec.layers; ++i) h->push_back(Block(spec.hidden, spec.heads, spec.dropout, randomness));
  }

  nn::Embedding wte;
  nn::Embedding wpe;
  SampleDropout drop;
  nn::ModuleList h;
  ThreadInvariantLayerNorm ln_f;
};
TORCH_MODULE(Transformer);

class Gpt final : public Model {
 public:
  explicit Gpt(const ModelSpec& spec)
      : context_(spec.input_shape[0]),
        transformer_(register_module("transformer", Transformer(spec, context_, sample_randomness_))) {
    if (!spec.tie_embeddings)
      lm_head_ =
          register_module("lm_head", FusedBiasLinear(nn::LinearOptions(spec.hidden, spec.num_outputs).bias(false)));
    initialise(spec);
  }

  // Token ids [B, T] (T <= context) -> logits [B, T, vocab].
  at::Tensor forward(at::Tensor tokens) override {
    const auto length = tokens.size(1);
    const at::Tensor positions = at::arange(length, tokens.options().dtype(at::kLong));
    at::Tensor x =
        transformer_->drop->forward(transformer_->wte->forward(tokens) + transformer_->wpe->forward(positions));
    for (const auto& block : *transformer_->h) x = block->as<BlockImpl>()->forward(x);
    x = transformer_->ln_f->forward(x);
    return lm_head_ ? lm_head_->forward(x) : at::linear(x, transformer_->wte->weight);
  }

 private:
  void initialise(const ModelSpec& spec) {
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * spec.layers);
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      at::Tensor& parameter = item.value();
      if (name.ends_with(".bias")) {
        parameter.zero_();
      } else if (name.find("ln_") != std::string::npos) {
        parameter.fill_(1.0);  // LayerNorm weights
      } else {
        parameter.normal_(0.0, name.ends_with("c_proj.weight") ? residual_std : 0.02);
      }
    }
  }

  std::int64_t context_;
  Transformer transformer_;
  FusedBiasLinear lm_head_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_gpt(const ModelSpec& spec) { return std::make_shared<Gpt>(spec); }

std::int64_t gpt_parameter_formula(std::int64_t vocab, std::int64_t context, std::int64_t d_model, std::int64_t layers,
                                   bool tied) {
  const std::int64_t d = d_model;
  return vocab * d + context * d + layers * (12 * d * d + 13 * d) + 2 * d + (tied ? 0 : vocab * d);
}

}  // namespace mnddp
