// Training state <-> checkpoint arrays: everything by name, nothing by pointer.
#include "mnddp/ckpt/training_state.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include "mnddp/build_config.hpp"
#include "mnddp/ckpt/array_tensor.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"
#include "mnddp/optim/device_gated_optimizer.hpp"
#include "mnddp/optim/lamb.hpp"
#include "mnddp/optim/lars.hpp"

namespace mnddp {
namespace {

// This rank's RNG states: the CPU generator, and the CUDA generator of its device when it has one.
at::Generator cuda_generator(c10::Device device) {
  if (device.is_cuda()) return at::globalContext().defaultGenerator(device);
  return at::Generator();
}

at::Tensor generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(at::Generator generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state.clone());  // own storage: set_state ignores a view's offset
}

// Gathers one state per rank into a [world, bytes] array.
at::Tensor gather_states(Communicator& comm, const at::Tensor& mine) {
  at::Tensor all = at::empty({comm.size(), mine.numel()}, at::kByte);
  comm.allgather(mine.data_ptr(), all.data_ptr(), static_cast<std::size_t>(mine.numel()), DType::U8);
  return all;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string mpi_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(length));
  return version.substr(0, version.find_first_of(",\n"));
}

// Rank 0 reads, everyone receives; a missing array is nullopt on every rank.
class RootFetcher {
 public:
  RootFetcher(const std::string& path, Communicator& comm) : path_(path), comm_(comm) {
    on_root_then_agree(comm_, [&] { reader_.emplace(path_); });
  }

  // Collective: rank 0's answer, so that no rank's own view of the file (a transient read error)
  // decides alone whether it enters the collectives that follow.
  bool has(const std::string& name) {
    std::int64_t present = 0;
    on_root_then_agree(comm_, [&] { present = reader_->has_array(name) ? 1 : 0; });
    comm_.broadcast(&present, 1, DType::I64, 0);
    return present != 0;
  }

  std::optional<at::Tensor> fetch(const std::string& name) {
    ArrayData data;
    std::int64_t present = 0;
    on_root_then_agree(comm_, [&] {
      present = reader_->has_array(name) ? 1 : 0;
      if (present) data = reader_->read(name);
    });
    comm_.broadcast(&present, 1, DType::I64, 0);
    if (!present) return std::nullopt;
    std::int64_t header[2] = {static_cast<std::int64_t>(data.dtype), static_cast<std::int64_t>(data.shape.size())};
    comm_.broadcast(header, 2, DType::I64, 0);
    data.dtype = static_cast<DType>(header[0]);
    data.shape.resize(static_cast<std::size_t>(header[1]));
    if (!data.shape.empty()) comm_.broadcast(data.shape.data(), data.shape.size(), DType::I64, 0);
    // Rank 0's tensor takes over the bytes it read; the others receive into theirs.
    at::Tensor out = comm_.is_root() ? to_tensor(std::move(data))
                                     : at::empty(data.shape, at::TensorOptions().dtype(to_scalar_type(data.dtype)));
    if (out.numel() > 0) broadcast(comm_, out, 0);
    return out;
  }

  at::Tensor require(const std::string& name, at::IntArrayRef expected_shape) {
    auto tensor = fetch(name);
    if (!tensor)
      throw UsageError(fmt::format("checkpoint '{}' has no '{}': it was written for a different model", path_, name));
    if (tensor->sizes() != expected_shape)
      throw UsageError(fmt::format("checkpoint '{}': '{}' has shape [{}] but the model has [{}]", path_, name,
                                   fmt::join(tensor->sizes(), ", "), fmt::join(expected_shape, ", ")));
    return *tensor;
  }

  std::int64_t integer_attribute(const std::string& name) { return std::stoll(text_attribute(name)); }

  bool has_attribute(const std::string& name) {
    std::int64_t present = 0;
    on_root_then_agree(comm_, [&] { present = reader_->has_attribute(name) ? 1 : 0; });
    comm_.broadcast(&present, 1, DType::I64, 0);
    return present != 0;
  }

  std::string text_attribute(const std::string& name) {
    std::string value;
    on_root_then_agree(comm_, [&] { value = reader_->attribute(name); });
    broadcast_string(comm_, value, 0);
    return value;
  }

 private:
  std::string path_;
  Communicator& comm_;
  std::optional<CheckpointReader> reader_;  // rank 0 only
};

// The position attributes, and this rank's interval loss (the mean of the old ranks' on another
// world size).
TrainingPosition read_position(RootFetcher& file, Communicator& comm) {
  TrainingPosition position;
  position.step = file.integer_attribute("step");
  position.epoch = file.integer_attribute("epoch");
  position.global_batches_done = file.integer_attribute("global_batches_done");
  position.world_size = file.integer_attribute("world_size");
  position.batch_size = file.integer_attribute("batch_size");
  position.grad_accum_steps = file.has_attribute("grad_accum_steps") ? file.integer_attribute("grad_accum_steps") : 0;
  const at::Tensor interval = file.require("progress/interval_loss", {position.world_size});
  position.interval_loss =
      comm.size() == position.world_size ? interval[comm.rank()].item<double>() : interval.mean().item<double>();
  position.interval_steps = file.integer_attribute("interval_steps");
  return position;
}

}  // namespace

StateSnapshot take_snapshot(Communicator& comm, const TrainingStateRefs& state, const TrainingPosition& position,
                            const std::string& config_ini, bool copy) {
  StateSnapshot snapshot;
  // With `copy`, host copies that stay valid while training goes on (a GPU tensor's .to(kCPU) is a
  // copy already); without, CPU tensors are shared and the snapshot must be written at once.
  auto add = [&](const std::string& path, const at::Tensor& tensor) {
    at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    if (copy && host.storage().is_alias_of(tensor.storage())) host = host.clone();
    snapshot.arrays.push_back({path, std::move(host)});
  };
  for (const auto& item : state.model.named_parameters()) add("model/" + item.key(), item.value());
  for (const auto& item : state.model.named_buffers()) add("buffers/" + item.key(), item.value());

  // Step counts a GPU's kernels keep on the device come home first.
  if (auto* gated = dynamic_cast<DeviceGatedOptimizer*>(&state.optimizer)) gated->sync_state_to_host();
  if (state.sharded != nullptr) {
    ShardedOptimizerState::ForCheckpoint sharded = state.sharded->for_checkpoint(state.optimizer_kind);
    for (const auto& [path, tensor] : sharded.whole) add(path, tensor);
    for (auto& share : sharded.shares)
      snapshot.shares.push_back({share.path, share.shape, share.first, share.values.contiguous()});
  }
  auto& optimizer_state = state.optimizer.state();
  for (const auto& item : state.model.named_parameters()) {
    if (state.sharded != nullptr) break;
    const auto found = optimizer_state.find(item.value().unsafeGetTensorImpl());
    if (found == optimizer_state.end()) continue;  // no step taken yet for this parameter
    const std::string prefix = "optimizer/" + item.key() + "/";
    switch (state.optimizer_kind) {
      case OptimizerKind::Sgd: {
        const auto& sgd = static_cast<const torch::optim::SGDParamState&>(*found->second);
        if (sgd.momentum_buffer().defined()) add(prefix + "momentum_buffer", sgd.momentum_buffer());
        break;
      }
      case OptimizerKind::AdamW: {
        const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*found->second);
        add(prefix + "exp_avg", adamw.exp_avg());
        add(prefix + "exp_avg_sq", adamw.exp_avg_sq());
        add(prefix + "step", at::scalar_tensor(adamw.step(), at::kLong));
        break;
      }
      case OptimizerKind::Lars: {
        const auto& lars = static_cast<const LarsParamState&>(*found->second);
        add(prefix + "momentum_buffer", lars.momentum_buffer());
        break;
      }
      case OptimizerKind::Lamb: {
        const auto& lamb = static_cast<const LambParamState&>(*found->second);
        add(prefix + "exp_avg", lamb.exp_avg());
        add(prefix + "exp_avg_sq", lamb.exp_avg_sq());
        add(prefix + "step", at::scalar_tensor(lamb.step(), at::kLong));
        break;
      }
    }
  }
  const auto [scale, growth] = state.scaler.state();
  add("scaler/scale", scale);
  add("scaler/growth_tracker", growth);

  // Per-rank RNG (a TorchScript model's dropout draws from it): gathered into one [world, bytes] array each.
  add("rng/cpu", gather_states(comm, generator_state(at::detail::getDefaultCPUGenerator())));
  if (at::Generator cuda = cuda_generator(state.device); cuda.defined())
    add("rng/cuda", gather_states(comm, generator_state(cuda)));

  // The log interval in progress differs by rank (each its own samples): one value per rank.
  at::Tensor interval = at::empty({comm.size()}, at::kDouble);
  comm.allgather(&position.interval_loss, interval.data_ptr(), 1, DType::F64);
  add("progress/interval_loss", interval);

  auto attribute = [&](const std::string& name, std::string value) {
    snapshot.attributes.emplace_back(name, std::move(value));
  };
  attribute("format_version", std::to_string(kCheckpointFormatVersion));
  attribute("step", std::to_string(position.step));
  attribute("epoch", std::to_string(position.epoch));
  attribute("global_batches_done", std::to_string(position.global_batches_done));
  attribute("world_size", std::to_string(position.world_size));
  attribute("batch_size", std::to_string(position.batch_size));
  attribute("grad_accum_steps", std::to_string(position.grad_accum_steps));
  attribute("interval_steps", std::to_string(position.interval_steps));
  attribute("optimizer", std::string(choice_name(state.optimizer_kind)));
  attribute("sample_shape", fmt::format("{}", fmt::join(state.sample_shape, ",")));
  attribute("config", config_ini);
  attribute("mnddp_version", build::kVersion);
  attribute("torch_version", build::kTorchVersion);
  attribute("hdf5_version", build::kHdf5Version);
  attribute("mpi_version", mpi_version());
  // Every rank writes the same attribute value, so rank 0's clock decides.
  std::string created = comm.is_root() ? utc_now() : std::string();
  broadcast_string(comm, created, 0);
  attribute("created", created);
  return snapshot;
}

CheckpointOrigin read_checkpoint_origin(const std::string& path, Communicator& comm) {
  RootFetcher file(path, comm);
  CheckpointOrigin origin;
  origin.position = read_position(file, comm);
  if (file.has_attribute("config")) origin.config_ini = file.text_attribute("config");
  return origin;
}

TrainingPosition read_training_state(const std::string& path, Communicator& comm, const TrainingStateRefs& state) {
  RootFetcher file(path, comm);
  torch::NoGradGuard no_grad;
  // --zero 1|2: the dense parameters are read in pieces, each rank its own, then all-gathered.
  std::set<std::string> in_pieces;
  if (state.sharded != nullptr)
    for (auto& name : state.sharded->parameters_read_in_pieces()) in_pieces.insert("model/" + name);
  for (auto& item : state.model.named_parameters()) {
    at::Tensor& param = item.value();
    if (!in_pieces.contains("model/" + item.key())) param.copy_(file.require("model/" + item.key(), param.sizes()));
  }
  for (auto& item : state.model.named_buffers()) {
    at::Tensor& buffer = item.value();
    buffer.copy_(file.require("buffers/" + item.key(), buffer.sizes()));
  }

  if (state.sharded != nullptr) {
    // Each rank reads its own pieces (the file was verified by every rank together before).
    std::optional<CheckpointReader> own;
    on_all_then_agree(comm, [&] { own.emplace(path); });
    ShardedOptimizerState::Source source;
    source.whole = [&](const std::string& name) { return file.fetch(name); };
    source.has = [&](const std::string& name) { return file.has(name); };
    source.share = [&](const std::string& name, std::int64_t first, std::int64_t count, at::IntArrayRef shape) {
      if (!own->has_array(name))
        throw UsageError(fmt::format("checkpoint '{}' has no '{}': it was written for a different model", path, name));
      std::vector<std::int64_t> stored;
      ArrayData data = own->read_share(name, first, count, &stored);
      if (at::IntArrayRef(stored) != shape)
        throw UsageError(fmt::format("checkpoint '{}': '{}' has shape [{}] but the model has [{}]", path, name,
                                     fmt::join(stored, ", "), fmt::join(shape, ", ")));
      return to_tensor(std::move(data));
    };
    on_all_then_agree(comm, [&] {
      state.sharded->restore(state.optimizer_kind, source);  // collective reads first, then its own
      state.sharded->read_parameter_pieces(source);
    });
    state.sharded->gather_parameters();
  }
  auto& optimizer_state = state.optimizer.state();
  if (state.sharded == nullptr) optimizer_state.clear();
  for (const auto& item : state.model.named_parameters()) {
    if (state.sharded != nullptr) break;
    const at::Tensor& param = item.value();
    const std::string prefix = "optimizer/" + item.key() + "/";
    // On the parameter's device and in its layout (a channels-last weight has channels-last state).
    auto on_device = [&](const at::Tensor& t) {
      return at::empty_like(param, t.options().device(param.device()), at::MemoryFormat::Preserve).copy_(t);
    };
    // The state is keyed by the parameter itself, so it is found whichever param group holds it.
    auto& slot = optimizer_state[param.unsafeGetTensorImpl()];
    switch (state.optimizer_kind) {
      case OptimizerKind::Sgd:
      case OptimizerKind::Lars: {
        auto momentum = file.fetch(prefix + "momentum_buffer");
        if (!momentum) break;
        if (state.optimizer_kind == OptimizerKind::Sgd) {
          slot = std::make_unique<torch::optim::SGDParamState>();
          static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer(on_device(*momentum));
        } else {
          slot = std::make_unique<LarsParamState>();
          static_cast<LarsParamState&>(*slot).momentum_buffer(on_device(*momentum));
        }
        break;
      }
      case OptimizerKind::AdamW:
      case OptimizerKind::Lamb: {
        auto exp_avg = file.fetch(prefix + "exp_avg");
        if (!exp_avg) break;
        const at::Tensor exp_avg_sq = on_device(file.require(prefix + "exp_avg_sq", param.sizes()));
        const auto step = file.require(prefix + "step", {}).item<std::int64_t>();
        if (state.optimizer_kind == OptimizerKind::AdamW) {
          auto restored = std::make_unique<torch::optim::AdamWParamState>();
          restored->exp_avg(on_device(*exp_avg)).exp_avg_sq(exp_avg_sq).step(step);
          slot = std::move(restored);
        } else {
          auto restored = std::make_unique<LambParamState>();
          restored->exp_avg(on_device(*exp_avg)).exp_avg_sq(exp_avg_sq).step(step);
          slot = std::move(restored);
        }
        break;
      }
    }
    if (!slot) optimizer_state.erase(param.unsafeGetTensorImpl());  // no step taken yet for it
  }
  const at::Tensor scale = file.require("scaler/scale", {1});
  const at::Tensor growth = file.require("scaler/growth_tracker", {1});
  state.scaler.load_state(scale.item<double>(), growth.item<int>());

  const TrainingPosition position = read_position(file, comm);

  // Each rank continues its own RNG stream; ranks the old run did not have start a fresh,
  // deterministic one.
  auto rng = file.fetch("rng/cpu");
  auto cuda_rng = file.fetch("rng/cuda");
  if (rng && comm.rank() < rng->size(0)) {
    set_generator_state(at::detail::getDefaultCPUGenerator(), (*rng)[comm.rank()]);
    at::Generator cuda = cuda_generator(state.device);
    if (cuda.defined() && cuda_rng && comm.rank() < cuda_rng->size(0))
      set_generator_state(cuda, (*cuda_rng)[comm.rank()]);
  } else {
    at::manual_seed(static_cast<std::uint64_t>(position.step) * 7919ULL + static_cast<std::uint64_t>(comm.rank()));
  }
  return position;
}

}  // namespace mnddp
