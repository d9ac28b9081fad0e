// Checkpoint -> torch.load-able file, through torch::pickle_save (the format torch.save writes).
#include "mnddp/ckpt/export.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/serialize.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "mnddp/ckpt/array_tensor.hpp"
#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/error.hpp"

namespace mnddp {
void export_checkpoint(const std::string& checkpoint, const std::string& out) {
  CheckpointReader reader(checkpoint);
  c10::Dict<std::string, at::Tensor> state;
  for (const char* group : {"model", "buffers"}) {
    // Names hold dots ("body.0.weight"), never slashes, so one level of listing finds them all.
    for (const auto& name : reader.list(group))
      state.insert(name, to_tensor(reader.read(fmt::format("{}/{}", group, name))));
  }
  if (state.empty()) throw UsageError(fmt::format("--checkpoint '{}': no model arrays in it", checkpoint));
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert(std::string("state_dict"), state);
  root.insert(std::string("config"), reader.attribute("config"));
  root.insert(std::string("sample_shape"), reader.attribute("sample_shape"));
  root.insert(std::string("step"), static_cast<std::int64_t>(std::stoll(reader.attribute("step"))));
  const std::vector<char> bytes = torch::pickle_save(root);
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) throw UsageError(fmt::format("--out: cannot write '{}': {}", out, std::strerror(errno)));
}

}  // namespace mnddp
