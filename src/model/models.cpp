// The zoo's one entry: checks the sample shape against the chosen network and builds it.
#include "mnddp/model/models.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mnddp/error.hpp"
#include "mnddp/model/sync_batch_norm.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

// The spec with an image input [C, H, W] ([H, W] gets one channel), for the convolutional models.
ModelSpec as_image(const ModelSpec& spec) {
  ModelSpec image = spec;
  if (image.input_shape.size() == 2) image.input_shape.insert(image.input_shape.begin(), 1);
  if (image.input_shape.size() != 3)
    throw UsageError(fmt::format(
        "--model {} needs image samples shaped [C, H, W] or [H, W], but the data has samples shaped [{}]; use "
        "--model mlp for flat features",
        choice_name(spec.kind), fmt::join(spec.input_shape, ", ")));
  return image;
}

// The spec with a volume input [C, D, H, W] ([D, H, W] gets one channel), for cnn3d.
ModelSpec as_volume(const ModelSpec& spec) {
  ModelSpec volume = spec;
  if (volume.input_shape.size() == 3) volume.input_shape.insert(volume.input_shape.begin(), 1);
  if (volume.input_shape.size() != 4)
    throw UsageError(fmt::format(
        "--model cnn3d needs volumes shaped [C, D, H, W] or [D, H, W], but the data has samples shaped [{}]",
        fmt::join(spec.input_shape, ", ")));
  return volume;
}

}  // namespace

std::shared_ptr<Model> make_model(const ModelSpec& spec) {
  std::int64_t numel = spec.input_shape.empty() ? 0 : 1;
  for (auto d : spec.input_shape) numel *= d;
  if (numel <= 0) throw UsageError(fmt::format("--model {}: samples have an empty shape", choice_name(spec.kind)));
  switch (spec.kind) {
    case ModelKind::Mlp:
      return make_mlp(spec);
    case ModelKind::ConvNet:
      return make_convnet(as_image(spec));
    case ModelKind::Resnet18:
    case ModelKind::Resnet34:
    case ModelKind::Resnet50:
    case ModelKind::Resnet101:
    case ModelKind::Resnet152: {
      const ModelSpec image = as_image(spec);
      const bool small = image.input_shape[1] <= kCifarStemMaxSide && image.input_shape[2] <= kCifarStemMaxSide;
      return make_resnet(image, spec.stem == Stem::Cifar || (spec.stem == Stem::Auto && small));
    }
    case ModelKind::Cnn3d:
      return make_cnn3d(as_volume(spec));
    case ModelKind::Vit: {
      const ModelSpec image = as_image(spec);
      if (image.input_shape[1] % spec.patch_size != 0 || image.input_shape[2] % spec.patch_size != 0)
        throw UsageError(fmt::format("--patch-size {}: must divide the image's height and width ({}x{})",
                                     spec.patch_size, image.input_shape[1], image.input_shape[2]));
      if (spec.hidden % spec.heads != 0)
        throw UsageError(fmt::format("--heads {}: must divide --hidden {}", spec.heads, spec.hidden));
      return make_vit(image);
    }
    case ModelKind::Torchscript:
      return load_torchscript(spec);
    case ModelKind::Gpt:
      if (spec.input_shape.size() != 1)
        throw UsageError(fmt::format("--model gpt reads token sequences [T], but its input is shaped [{}]",
                                     fmt::join(spec.input_shape, ", ")));
      if (spec.hidden % spec.heads != 0)
        throw UsageError(fmt::format("--heads {}: must divide --hidden {}", spec.heads, spec.hidden));
      return make_gpt(spec);
  }
  throw std::logic_error("make_model: unknown model kind");
}

torch::nn::AnyModule batch_norm_2d(const ModelSpec& spec, std::int64_t channels) {
  if (spec.sync_batch_norm) return torch::nn::AnyModule(SyncBatchNorm2d(channels));
  return torch::nn::AnyModule(ThreadInvariantBatchNorm2d(channels));
}

std::int64_t parameter_count(const torch::nn::Module& module) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace mnddp
