// --model torchscript:PATH: the user's own network, scripted or traced in Python (torch.jit) and
// loaded with torch::jit::load. The scripted module keeps its own parameters and buffers; this
// wrapper registers the same tensors (not copies) in an nn::Module tree of the same names, so the
// DDP engine, the optimizer, checkpoints and `mnddp export` see them as "features.0.weight", exactly
// as the Python module's state_dict() names them. train()/eval() reach the scripted module, so its
// BatchNorm and dropout switch modes with the run.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>

#include <filesystem>
#include <unordered_set>

#include "mnddp/error.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

// One line of a torch error. c10::Error: the first (a C++ backtrace follows). An error raised in the
// TorchScript interpreter ends with the Python exception ("RuntimeError: Expected 4D input ..."),
// after a serialized-code traceback: the last.
std::string summary(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = torch_error ? torch_error->what_without_backtrace() : e.what();
  if (text.find("Traceback of TorchScript") != std::string::npos) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text.substr(text.rfind('\n') + 1);
  }
  return text.substr(0, text.find('\n'));
}

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, std::string path) : module_(std::move(module)), path_(std::move(path)) {
    std::unordered_set<const c10::TensorImpl*> seen;
    mirror(module_, *this, seen);
  }

  at::Tensor forward(at::Tensor x) override {
    const c10::IValue output = module_.forward({std::move(x)});
    if (!output.isTensor())
      throw UsageError(fmt::format("--model torchscript:{}: forward() returned a {}, but mnddp needs one tensor", path_,
                                   output.type()->str()));
    return output.toTensor();
  }

  void train(bool on) override {
    nn::Module::train(on);
    module_.train(on);
  }

 private:
  // Registers `from`'s own parameters and buffers in `to`, then each child's in a child module of
  // the same name. A tensor seen before (weights tied in Python) is registered once, under its first
  // name, as nn.Module.named_parameters() lists it: else DDP would reduce it, and the optimizer
  // step it, twice.
  static void mirror(const torch::jit::Module& from, nn::Module& to, std::unordered_set<const c10::TensorImpl*>& seen) {
    for (const auto& item : from.named_parameters(/*recurse=*/false))
      if (seen.insert(item.value.unsafeGetTensorImpl()).second)
        to.register_parameter(item.name, item.value, item.value.requires_grad());
    for (const auto& item : from.named_buffers(/*recurse=*/false))
      if (seen.insert(item.value.unsafeGetTensorImpl()).second) to.register_buffer(item.name, item.value);
    for (const auto& child : from.named_children()) {
      auto mirrored = std::make_shared<nn::Module>(child.name);
      mirror(child.value, *mirrored, seen);
      to.register_module(child.name, mirrored);
    }
  }

  torch::jit::Module module_;
  std::string path_;
};

// One forward pass on zeros in eval mode: a module whose output does not fit the task fails here,
// with the shapes, and not as a cryptic loss error at the first step.
void check_output(Model& model, const ModelSpec& spec) {
  std::vector<std::int64_t> input_shape = {2};
  input_shape.insert(input_shape.end(), spec.input_shape.begin(), spec.input_shape.end());
  std::vector<std::int64_t> expected = {2};
  expected.insert(expected.end(), spec.output_shape.begin(), spec.output_shape.end());
  const auto dtype = spec.token_input ? at::kLong : at::kFloat;
  const std::string call = fmt::format("--model torchscript:{}: forward(x [{}] {})", spec.torchscript_path,
                                       fmt::join(input_shape, ", "), spec.token_input ? "int64" : "float32");
  at::Tensor output;
  {
    torch::NoGradGuard no_grad;
    model.eval();
    try {
      output = model.forward(at::zeros(input_shape, at::TensorOptions().dtype(dtype)));
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {  // c10::Error, or torch::jit::JITException from the interpreter
      throw UsageError(fmt::format("{} failed: {}", call, summary(e)));
    }
    model.train();
  }
  if (output.sizes().vec() != expected)
    throw UsageError(fmt::format("{} returned [{}], but {} needs [{}]", call, fmt::join(output.sizes(), ", "),
                                 spec.output_meaning, fmt::join(expected, ", ")));
  if (!output.is_floating_point())
    throw UsageError(fmt::format("{} returned {} values, but the loss needs floating point", call,
                                 c10::toString(output.scalar_type())));
}

}  // namespace

std::shared_ptr<Model> load_torchscript(const ModelSpec& spec) {
  const std::string& path = spec.torchscript_path;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw UsageError(fmt::format("--model torchscript:{}: no such file", path));
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, at::kCPU);
  } catch (const std::exception& e) {  // c10::Error for a zip that is not a module, or no zip at all
    const std::string why = summary(e);
    // torch.save writes the same zip format, without TorchScript's constants.
    const bool saved = why.find("constants.pkl") != std::string::npos;
    throw UsageError(fmt::format(
        "--model torchscript:{}: not a TorchScript module{} (write it with torch.jit.script(model).save(PATH) or "
        "torch.jit.trace; torch.jit.load says: {})",
        path, saved ? " but a torch.save file (a state dict or a pickled module)" : "", why));
  }
  auto model = std::make_shared<TorchScriptModel>(std::move(module), path);
  check_output(*model, spec);
  return model;
}

}  // namespace mnddp
