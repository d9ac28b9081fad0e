// The model zoo: ResNets with torchvision's parameter counts and names, both stems; ViT-B/16's
// count and names (torchvision's); CNN3D's layout on volumes; GPT's size (the published formula,
// GPT-2 small's 124,439,808) and causality; the transformers' linear layers add their bias inside the
// GEMM, as PyTorch's nn.Linear does, for their [B, T, d] inputs too.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/csrc/autograd/function.h>

#include <map>
#include <set>
#include <string>

#include "mnddp/model/memory_layout.hpp"
#include "mnddp/model/models.hpp"
#include "test_support.hpp"

using namespace mnddp;
using testing_support::usage_error_of;

namespace {

ModelSpec resnet(ModelKind kind, std::vector<std::int64_t> shape, std::int64_t classes, Stem stem = Stem::Auto) {
  ModelSpec spec;
  spec.kind = kind;
  spec.input_shape = std::move(shape);
  spec.num_outputs = classes;
  spec.stem = stem;
  return spec;
}

TEST(ResNet, ParameterCountsEqualTorchvisions) {
  // torchvision.models.resnet18/34/50(num_classes=1000), ImageNet stem.
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet18, {3, 224, 224}, 1000))), 11689512);
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet34, {3, 224, 224}, 1000))), 21797672);
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet50, {3, 224, 224}, 1000))), 25557032);
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet101, {3, 224, 224}, 1000))), 44549160);
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet152, {3, 224, 224}, 1000))), 60192808);
  // The CIFAR stem (3x3 instead of 7x7 on 3 channels: 7680 fewer weights), chosen for 32x32 images:
  // the well-known 11,173,962 of ResNet-18 on CIFAR-10.
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet18, {3, 32, 32}, 10))), 11173962);
  EXPECT_EQ(parameter_count(*make_model(resnet(ModelKind::Resnet18, {3, 32, 32}, 10, Stem::Imagenet))),
            11173962 + 7680);
}

TEST(ResNet, NamesAreTorchvisions) {
  const auto model = make_model(resnet(ModelKind::Resnet50, {3, 64, 64}, 10));
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) names.insert(item.key());
  for (const auto& item : model->named_buffers()) names.insert(item.key());
  EXPECT_EQ(names.size(), 320u);  // len(torchvision.models.resnet50().state_dict())
  for (const char* name : {"conv1.weight", "bn1.running_var", "layer1.0.conv3.weight", "layer1.0.downsample.0.weight",
                           "layer2.0.downsample.1.num_batches_tracked", "layer4.2.bn3.bias", "fc.weight", "fc.bias"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(ResNet, ClassifiesImagesOfEitherStemAndGreyscale) {
  torch::manual_seed(0);
  auto small = make_model(resnet(ModelKind::Resnet18, {1, 28, 28}, 7));
  small->eval();
  EXPECT_EQ(small->forward(at::randn({2, 28, 28})).sizes(), (at::IntArrayRef{2, 7}));  // [N, H, W]
  auto large = make_model(resnet(ModelKind::Resnet18, {3, 96, 96}, 5));
  large->eval();
  EXPECT_EQ(large->forward(at::randn({2, 3, 96, 96})).sizes(), (at::IntArrayRef{2, 5}));
  const auto message = usage_error_of([] { make_model(resnet(ModelKind::Resnet34, {64}, 3)); });
  EXPECT_NE(message.find("--model resnet34 needs image samples shaped [C, H, W] or [H, W]"), std::string::npos)
      << message;
}

TEST(Gpt, ParameterCountFollowsThePublishedFormula) {
  // GPT-2 small (tied embeddings): 124,439,808 parameters, as published and as nanoGPT counts them.
  EXPECT_EQ(gpt_parameter_formula(50257, 1024, 768, 12, true), 124439808);
  for (const bool tied : {true, false}) {
    ModelSpec spec;
    spec.kind = ModelKind::Gpt;
    spec.input_shape = {24};
    spec.num_outputs = 97;
    spec.hidden = 32;
    spec.heads = 4;
    spec.layers = 3;
    spec.tie_embeddings = tied;
    EXPECT_EQ(parameter_count(*make_model(spec)), gpt_parameter_formula(97, 24, 32, 3, tied)) << "tied " << tied;
  }
}

TEST(Gpt, Gpt2SmallHasItsPublishedSize) {
  ModelSpec spec;
  spec.kind = ModelKind::Gpt;
  spec.input_shape = {1024};
  spec.num_outputs = 50257;
  spec.hidden = 768;
  spec.heads = 12;
  spec.layers = 12;
  EXPECT_EQ(parameter_count(*make_model(spec)), 124439808);
}

// A GPT of context 12, vocabulary 50, width 32, 4 heads.
ModelSpec small_gpt(int layers) {
  ModelSpec spec;
  spec.kind = ModelKind::Gpt;
  spec.input_shape = {12};
  spec.num_outputs = 50;
  spec.hidden = 32;
  spec.heads = 4;
  spec.layers = layers;
  return spec;
}

TEST(Gpt, APredictionDependsOnlyOnEarlierTokens) {
  torch::manual_seed(1);
  auto model = make_model(small_gpt(2));
  model->eval();
  const at::Tensor tokens = at::randint(50, {2, 12}, at::kLong);
  at::Tensor changed = tokens.clone();
  changed.narrow(1, 7, 5).fill_(3);  // positions 7.. differ
  const at::Tensor a = model->forward(tokens), b = model->forward(changed);
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{2, 12, 50}));
  EXPECT_TRUE(at::allclose(a.narrow(1, 0, 7), b.narrow(1, 0, 7), 1e-6, 1e-6));
  EXPECT_FALSE(at::allclose(a.narrow(1, 7, 5), b.narrow(1, 7, 5), 1e-3, 1e-3));
  // Shorter inputs than the context work (the positions are a prefix).
  EXPECT_TRUE(at::allclose(model->forward(tokens.narrow(1, 0, 5)), a.narrow(1, 0, 5), 1e-5, 1e-5));
}

// How often each kind of autograd node occurs in the graph that produced `output`.
std::map<std::string, int> graph_nodes(const at::Tensor& output) {
  std::map<std::string, int> counts;
  std::set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo = {output.grad_fn().get()};
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    ++counts[node->name()];
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return counts;
}

// PyTorch's nn.Linear on [B, T, d] is one addmm over the flattened rows, the bias inside the GEMM;
// torch::nn::Linear's C++ forward runs a matmul and then adds the bias in a second pass (an
// AddBackward0 node per layer, and no AddmmBackward0).
TEST(Gpt, LinearLayersAddTheirBiasInsideTheGemm) {
  const ModelSpec spec = small_gpt(3);
  const auto nodes = graph_nodes(make_model(spec)->forward(at::randint(50, {2, 12}, at::kLong)));
  EXPECT_EQ(nodes.count("AddmmBackward0") ? nodes.at("AddmmBackward0") : 0, 4 * spec.layers)
      << "c_attn, attn.c_proj, c_fc, mlp.c_proj per block";
  // The embeddings' sum and the two residual sums per block: no bias additions.
  EXPECT_EQ(nodes.at("AddBackward0"), 1 + 2 * spec.layers);
}

TEST(Gpt, RefusesAHeadCountThatDoesNotDivideTheWidth) {
  ModelSpec spec;
  spec.kind = ModelKind::Gpt;
  spec.input_shape = {8};
  spec.hidden = 30;
  spec.heads = 4;
  const auto message = usage_error_of([&] { make_model(spec); });
  EXPECT_NE(message.find("--heads 4: must divide --hidden 30"), std::string::npos) << message;
}

TEST(Vit, VitB16HasTorchvisionsParameterCountAndNames) {
  ModelSpec spec = resnet(ModelKind::Vit, {3, 224, 224}, 1000);
  spec.patch_size = 16;
  spec.hidden = 768;
  spec.layers = 12;
  spec.heads = 12;
  const auto model = make_model(spec);
  EXPECT_EQ(parameter_count(*model), 86567656);  // torchvision.models.vit_b_16()
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) names.insert(item.key());
  for (const char* name : {"class_token", "conv_proj.weight", "encoder.pos_embedding",
                           "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
                           "encoder.layers.encoder_layer_11.self_attention.out_proj.bias",
                           "encoder.layers.encoder_layer_3.mlp.3.weight", "encoder.ln.weight", "heads.head.weight"})
    EXPECT_EQ(names.count(name), 1U) << name;
}

TEST(Vit, LinearLayersAddTheirBiasInsideTheGemm) {
  ModelSpec spec = resnet(ModelKind::Vit, {8, 8}, 5);
  spec.hidden = 32;
  spec.heads = 4;
  spec.patch_size = 4;
  spec.layers = 2;
  const auto nodes = graph_nodes(make_model(spec)->forward(at::randn({3, 1, 8, 8})));
  // Per block: the attention's input projection (at::linear already), out_proj, mlp.0, mlp.3; and the head.
  EXPECT_EQ(nodes.count("AddmmBackward0") ? nodes.at("AddmmBackward0") : 0, 4 * spec.layers + 1);
}

TEST(Vit, ClassifiesNonSquareGreyscaleImagesAndRefusesAPatchThatDoesNotDivide) {
  ModelSpec spec = resnet(ModelKind::Vit, {12, 8}, 5);
  spec.hidden = 32;
  spec.heads = 4;
  spec.patch_size = 4;
  EXPECT_EQ(make_model(spec)->forward(at::randn({3, 12, 8})).sizes(), at::IntArrayRef({3, 5}));
  spec.patch_size = 5;
  EXPECT_EQ(usage_error_of([&] { make_model(spec); }),
            "--patch-size 5: must divide the image's height and width (12x8)");
}

TEST(Cnn3d, MapsVolumesToTargetsWithTheCosmoFlowLayout) {
  ModelSpec spec = resnet(ModelKind::Cnn3d, {2, 16, 16, 8}, 3);
  spec.hidden = 8;
  spec.layers = 3;
  const auto model = make_model(spec);
  EXPECT_EQ(model->forward(at::randn({4, 2, 16, 16, 8})).sizes(), at::IntArrayRef({4, 3}));
  // Conv3d 3x3x3 with channels 8, 16, 32, pooled to 2x2x1; dense 128, 64, 3.
  const std::int64_t convs = (2 * 27 * 8 + 8) + (8 * 27 * 16 + 16) + (16 * 27 * 32 + 32);
  const std::int64_t dense = (32 * 4 * 128 + 128) + (128 * 64 + 64) + (64 * 3 + 3);
  EXPECT_EQ(parameter_count(*model), convs + dense);
  // [D, H, W] gets one channel; images do not fit.
  spec.input_shape = {8, 8, 8};
  EXPECT_EQ(make_model(spec)->forward(at::randn({2, 8, 8, 8})).sizes(), at::IntArrayRef({2, 3}));
  spec.input_shape = {8, 8};
  EXPECT_NE(usage_error_of([&] { make_model(spec); }).find("--model cnn3d needs volumes shaped [C, D, H, W]"),
            std::string::npos);
}

}  // namespace

// --memory-format: auto picks channels-last for the zoo's 2-D convolution models on CPU, and on a GPU
// under half-precision autocast, not under --deterministic; explicit values are obeyed.
TEST(MemoryLayout, AutoMeansChannelsLastForConvolutionModelsOnCpuAndHalfPrecisionGpus) {
  for (ModelKind kind : {ModelKind::ConvNet, ModelKind::Resnet18, ModelKind::Resnet34, ModelKind::Resnet50}) {
    EXPECT_TRUE(wants_channels_last(MemoryLayout::Auto, kind, /*on_cpu=*/true, /*deterministic=*/false));
    EXPECT_FALSE(wants_channels_last(MemoryLayout::Auto, kind, /*on_cpu=*/false, false));
    EXPECT_TRUE(wants_channels_last(MemoryLayout::Auto, kind, false, false, /*half_precision=*/true));
    EXPECT_FALSE(wants_channels_last(MemoryLayout::Auto, kind, false, /*deterministic=*/true, true));
    EXPECT_FALSE(wants_channels_last(MemoryLayout::Auto, kind, true, /*deterministic=*/true));
    EXPECT_FALSE(wants_channels_last(MemoryLayout::Contiguous, kind, true, false));
  }
  for (ModelKind kind : {ModelKind::Mlp, ModelKind::Gpt, ModelKind::Vit, ModelKind::Cnn3d, ModelKind::Torchscript})
    EXPECT_FALSE(wants_channels_last(MemoryLayout::Auto, kind, true, false));
  EXPECT_TRUE(wants_channels_last(MemoryLayout::ChannelsLast, ModelKind::Vit, false, true));
}

// The same values in NHWC order, in the same parameter objects (the optimizer holds them); a model
// without a 4-D weight is refused with the option and the model named.
TEST(MemoryLayout, ChannelsLastKeepsValuesAndRefusesModelsWithoutConvolutions) {
  const auto model = make_model(resnet(ModelKind::Resnet18, {3, 32, 32}, 10));
  std::vector<at::Tensor> before;
  std::vector<const void*> identity;
  for (const auto& p : model->parameters()) {
    before.push_back(p.detach().clone());
    identity.push_back(p.unsafeGetTensorImpl());
  }
  EXPECT_EQ(make_channels_last(*model, "resnet18"), 20);  // the stem, 16 in the blocks, 3 downsampling
  const auto after = model->parameters();
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].unsafeGetTensorImpl(), identity[i]);
    EXPECT_TRUE(at::equal(after[i], before[i]));
    if (after[i].dim() == 4) {
      EXPECT_TRUE(after[i].is_contiguous(at::MemoryFormat::ChannelsLast));
      // (A 1x1 kernel's two orders coincide.)
      if (after[i].size(2) * after[i].size(3) > 1) {
        EXPECT_FALSE(after[i].is_contiguous()) << "parameter " << i << " kept the NCHW order";
      }
    }
  }
  ModelSpec mlp;
  mlp.input_shape = {12};
  const std::string message = usage_error_of([&] { make_channels_last(*make_model(mlp), "mlp"); });
  EXPECT_NE(message.find("--memory-format channels-last"), std::string::npos) << message;
  EXPECT_NE(message.find("--model mlp"), std::string::npos) << message;
}
