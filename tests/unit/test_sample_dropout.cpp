// Dropout keyed by sample (model/sample_randomness.hpp): a row's mask depends on (seed, step, sample
// id, layer) only, not on its batch; the hash matches a reference written in Python; torch's dropout
// semantics (fraction kept, scale, eval, gradient); GPT's written-out attention equals SDPA; whole
// models give a sample the same output in any batch; the CPU and CUDA draw the same masks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mnddp/error.hpp"
#include "mnddp/model/causal_attention.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/model/sample_randomness.hpp"
#include "mnddp/train/torch_cuda.hpp"

using namespace mnddp;

namespace {

// ATen settles at its first CUDA query whether CUDA exists: load its CUDA half before any test.
class LoadTorchCuda : public testing::Environment {
 public:
  void SetUp() override { (void)load_torch_cuda(DeviceRequest::Auto); }
};
[[maybe_unused]] testing::Environment* const kLoadTorchCuda = testing::AddGlobalTestEnvironment(new LoadTorchCuda);

// A training-mode dropout that is layer `layers - 1` of a fresh SampleRandomness.
struct Dropper {
  explicit Dropper(double p, int layers = 1) {
    for (int i = 0; i < layers; ++i) drop = SampleDropout(p, randomness);
    drop->train();
  }
  at::Tensor operator()(const at::Tensor& x) { return drop->forward(x); }

  std::shared_ptr<SampleRandomness> randomness = std::make_shared<SampleRandomness>();
  SampleDropout drop{nullptr};
};

std::string bits(const at::Tensor& keep) {
  std::string out;
  for (const bool kept : std::vector<bool>(keep.data_ptr<bool>(), keep.data_ptr<bool>() + keep.numel()))
    out += kept ? '1' : '0';
  return out;
}

TEST(SampleRowKey, IsSplitmix64ChainedOverSeedStepSampleAndLayer) {
  // Python: k = sm(seed); k = sm(k ^ step); k = sm(k ^ id); k = sm(k ^ layer) (mod 2^64), sm = splitmix64.
  EXPECT_EQ(sample_row_key(0, 0, 0, 0), 0x2130748aaac80268ULL);
  EXPECT_EQ(sample_row_key(1, 2, 5, 0), 0x214d4c07ecfeaac5ULL);
  EXPECT_EQ(sample_row_key(1, 2, 5, 3), 0x55a9945ec71fbcd3ULL);
  EXPECT_EQ(sample_row_key(~0ULL, -1, 123456789, 1), 0x5c552eb98ce39d57ULL);
}

TEST(SampleRandomness, MasksMatchTheReferenceHash) {
  // Python: h = fmix32(i ^ (k & 0xffffffff)); h = fmix32(h ^ (k >> 32)); kept = (h >> 8) >= ceil(p * 2**24).
  SampleRandomness randomness;
  for (int i = 0; i < 4; ++i) randomness.add_layer();
  randomness.set_batch(1, 2, {5});
  EXPECT_EQ(bits(randomness.keep_mask(0, at::zeros({1, 32}), 0.5)), "10101001001100010010101101011001");
  EXPECT_EQ(bits(randomness.keep_mask(3, at::zeros({1, 4, 8}), 0.25)), "00011011001110100111001100111111");
}

TEST(SampleDropout, RowMaskDependsOnTheSampleNotItsBatch) {
  Dropper drop(0.5);
  const at::Tensor x = at::randn({4, 40000});  // rows of 40000: hashed one row per block on the CPU
  drop.randomness->set_batch(3, 7, {10, 11, 12, 13});
  const at::Tensor all = drop(x);
  drop.randomness->set_batch(3, 7, {12, 10});
  const at::Tensor some = drop(at::stack({x[2], x[0]}));
  EXPECT_TRUE(at::equal(some[0], all[2]));
  EXPECT_TRUE(at::equal(some[1], all[0]));
  EXPECT_FALSE(at::equal(all[0], all[1]));                      // and samples differ from each other
  EXPECT_TRUE(at::equal(drop(at::stack({x[2], x[0]})), some));  // a second forward: the same masks
}

TEST(SampleDropout, MaskChangesWithStepSeedSampleAndLayer) {
  Dropper drop(0.5, 2);  // layer 1
  Dropper first(0.5);    // layer 0
  const at::Tensor ones = at::ones({1, 256});
  auto mask = [&](Dropper& d, std::uint64_t seed, std::int64_t step, std::int64_t id) {
    d.randomness->set_batch(seed, step, {id});
    return d(ones);
  };
  const at::Tensor base = mask(drop, 1, 2, 3);
  EXPECT_EQ(drop.drop->layer(), 1);
  EXPECT_FALSE(at::equal(mask(drop, 1, 3, 3), base)) << "step";
  EXPECT_FALSE(at::equal(mask(drop, 2, 2, 3), base)) << "seed";
  EXPECT_FALSE(at::equal(mask(drop, 1, 2, 4), base)) << "sample";
  EXPECT_FALSE(at::equal(mask(first, 1, 2, 3), base)) << "layer";
  EXPECT_TRUE(at::equal(mask(drop, 1, 2, 3), base)) << "the same key again";
}

TEST(SampleDropout, KeepsOneMinusPAndScalesByItsInverse) {
  for (const double p : {0.1, 0.5, 0.9}) {
    Dropper drop(p);
    const at::Tensor y = drop(at::ones({16, 65536}));
    const at::Tensor kept = y.ne(0);
    // 1M draws: the standard deviation of the fraction is at most 0.0005; each row's (65536) 0.002.
    EXPECT_NEAR(kept.to(at::kDouble).mean().item<double>(), 1.0 - p, 0.003) << "p = " << p;
    const at::Tensor per_row = kept.to(at::kDouble).mean(1);
    EXPECT_LT((per_row - (1.0 - p)).abs().max().item<double>(), 0.012) << "p = " << p;
    const at::Tensor values = y.masked_select(kept);
    EXPECT_NEAR(values.min().item<double>(), 1.0 / (1.0 - p), 1e-6 / (1.0 - p)) << "p = " << p;
    EXPECT_EQ(values.min().item<float>(), values.max().item<float>()) << "p = " << p;
  }
}

TEST(SampleDropout, EvalAndZeroAreTheIdentityAndOneGivesZeros) {
  const at::Tensor x = at::randn({3, 5});
  Dropper drop(0.5);
  drop.drop->eval();
  EXPECT_TRUE(drop(x).is_same(x));
  Dropper zero(0.0);
  EXPECT_TRUE(zero(x).is_same(x));
  Dropper one(1.0);
  EXPECT_TRUE(at::equal(one(x), at::zeros_like(x)));
  EXPECT_THROW(SampleDropout(1.5, std::make_shared<SampleRandomness>()), UsageError);
  EXPECT_THROW(SampleDropout(-0.1, std::make_shared<SampleRandomness>()), UsageError);
}

TEST(SampleDropout, GradientIsTheMaskTimesTheScale) {
  Dropper drop(0.3);
  const at::Tensor x = at::randn({4, 50}).requires_grad_();
  const at::Tensor upstream = at::randn({4, 50});
  drop(x).backward(upstream);
  const at::Tensor noise = drop.randomness->keep_mask(0, x, 0.3).to(at::kFloat).div_(0.7);
  EXPECT_TRUE(at::allclose(x.grad(), upstream * noise, 1e-6, 0.0));
  EXPECT_GT(noise.eq(0).sum().item<int>(), 0);
}

TEST(SampleDropout, ChannelsLastGetsTheSameMaskAsContiguous) {
  Dropper drop(0.5);
  const at::Tensor x = at::randn({2, 3, 4, 5});
  const at::Tensor channels_last = x.contiguous(at::MemoryFormat::ChannelsLast);
  ASSERT_FALSE(channels_last.is_contiguous());
  EXPECT_TRUE(at::equal(drop(channels_last), drop(x)));
}

TEST(SampleDropout, RowsOtherThanTheBatchsIdsAreAnInternalError) {
  Dropper drop(0.5);
  drop.randomness->set_batch(0, 0, {1, 2, 3});
  try {
    drop(at::ones({2, 4}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("internal error: a dropout layer got a tensor of 2 rows (dim 0), but "
                                         "set_batch named 3 samples"),
              std::string::npos)
        << e.what();
  }
}

TEST(SampleDropout, WithoutABatchRowsAreKeyedByPositionAtStepZeroSeedZero) {
  Dropper drop(0.5);
  const at::Tensor x = at::ones({3, 64});
  const at::Tensor unset = drop(x);
  EXPECT_TRUE(at::equal(drop(at::ones({5, 64})).slice(0, 0, 3), unset));  // any batch size
  drop.randomness->set_batch(0, 0, {0, 1, 2});
  EXPECT_TRUE(at::equal(drop(x), unset));
  drop.randomness->set_batch(0, 1, {0, 1, 2});
  EXPECT_FALSE(at::equal(drop(x), unset));
  drop.randomness->clear_batch();
  EXPECT_TRUE(at::equal(drop(x), unset));
}

TEST(CausalAttention, WithoutDropoutEqualsScaledDotProductAttention) {
  Dropper none(0.0);
  const at::Tensor q = at::randn({2, 3, 7, 8}), k = at::randn({2, 3, 7, 8}), v = at::randn({2, 3, 7, 8});
  const at::Tensor expected = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  EXPECT_LT((causal_attention(q, k, v, *none.drop) - expected).abs().max().item<double>(), 1e-5);
}

TEST(CausalAttention, DropsAttentionProbabilitiesPerSample) {
  Dropper drop(0.5);
  const at::Tensor q = at::randn({2, 3, 7, 8}), k = at::randn({2, 3, 7, 8}), v = at::randn({2, 3, 7, 8});
  const at::Tensor future = at::ones({7, 7}, at::kBool).triu(1);
  const at::Tensor probabilities = at::softmax((at::matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0))
                                                   .masked_fill(future, -std::numeric_limits<double>::infinity()),
                                               -1);
  const at::Tensor noise = drop(at::ones({2, 3, 7, 7}));  // the mask of the same layer, keyed the same
  EXPECT_LT((causal_attention(q, k, v, *drop.drop) - at::matmul(probabilities * noise, v)).abs().max().item<double>(),
            1e-5);
}

// A model in training mode gives a sample the same output in a batch of 4 and in a batch of 2. A
// different mask would move outputs by O(1); the tolerance allows only GEMMs of another row count.
void expect_outputs_follow_samples(ModelSpec spec, const at::Tensor& inputs) {
  torch::manual_seed(0);
  const auto model = make_model(spec);
  model->train();
  model->sample_randomness().set_batch(42, 9, {100, 101, 102, 103});
  const at::Tensor all = model->forward(inputs);
  model->sample_randomness().set_batch(42, 9, {102, 100});
  const at::Tensor some = model->forward(at::stack({inputs[2], inputs[0]}));
  EXPECT_TRUE(at::allclose(some[0], all[2], 1e-5, 1e-6)) << (some[0] - all[2]).abs().max();
  EXPECT_TRUE(at::allclose(some[1], all[0], 1e-5, 1e-6)) << (some[1] - all[0]).abs().max();
  model->eval();
  EXPECT_FALSE(at::allclose(model->forward(inputs), all, 1e-3, 1e-3)) << "dropout did nothing";
}

TEST(SampleDropoutModels, MlpOutputFollowsTheSample) {
  ModelSpec spec;
  spec.kind = ModelKind::Mlp;
  spec.input_shape = {20};
  spec.hidden = 64;
  spec.dropout = 0.5;
  expect_outputs_follow_samples(spec, at::randn({4, 20}));
}

TEST(SampleDropoutModels, GptOutputFollowsTheSample) {
  ModelSpec spec;
  spec.kind = ModelKind::Gpt;
  spec.input_shape = {8};
  spec.num_outputs = 16;
  spec.hidden = 16;
  spec.layers = 2;
  spec.heads = 2;
  spec.dropout = 0.2;
  expect_outputs_follow_samples(spec, at::randint(16, {4, 8}, at::kLong));
}

}  // namespace
