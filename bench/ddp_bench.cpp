// DDP engine benchmarks (run under mpirun; results go to docs/BENCHMARKS.md):
//   sync      gradient sync of the Reducer vs one raw MPI_Allreduce of the same bytes in one flat buffer
//   overlap   exposed communication: time finalize() waits, as a share of the all-reduce time
//   overhead  1 rank: a training step with DDP vs the same step without it
//   nonfinite 1 rank: the --on-nonfinite check (all_finite over every gradient) as a share of a
//             training step, against torch's isfinite().all() per gradient (the check before)
//   optimizer 1 rank: the optimizer step of the comparison's workloads, mnddp's one-pass FusedSgd and
//             FusedAdamW against torch::optim's SGD and AdamW, each as a share of the training step
//   scaling   N ranks: the comparison's workloads without DDP, with a raw in-place MPI_Allreduce of
//             each gradient, with DDP:
//             the weak scaling an MPI engine can reach here at best, and what mnddp reaches
// Each pair is measured alternately in one run; medians are reported.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <mpi.h>
#include <torch/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/ddp/ddp.hpp"
#include "mnddp/model/models.hpp"
#include "mnddp/optim/fused_adamw.hpp"
#include "mnddp/optim/fused_sgd.hpp"
#include "mnddp/train/gradient_check.hpp"

#include "bench_util.hpp"

using namespace mnddp;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {

struct BenchModel {
  std::string name;
  std::shared_ptr<Model> net;
  std::vector<std::int64_t> input_shape;
};

// mlp50m: 784-4096-4096-4096-4096-10, 53.6M parameters. convnet: the trainer's ConvNet on 3x32x32.
BenchModel make_bench_model(const std::string& name) {
  torch::manual_seed(1);
  ModelSpec spec;
  spec.num_outputs = 10;
  if (name == "mlp50m") {
    spec.kind = ModelKind::Mlp;
    spec.input_shape = {784};
    spec.hidden = 4096;
    spec.layers = 4;
  } else {
    spec.kind = ModelKind::ConvNet;
    spec.input_shape = {3, 32, 32};
    spec.hidden = 64;
    spec.layers = 4;
  }
  return {name, make_model(spec), spec.input_shape};
}

// As the trainer runs it: the loss is divided by the world size, buckets are summed.
DdpOptions trainer_options() {
  DdpOptions options;
  options.reducer.loss_prescaled = true;
  return options;
}

void fill_gradients(torch::nn::Module& net) {
  torch::NoGradGuard no_grad;
  for (auto& p : net.parameters()) p.mutable_grad() = at::randn_like(p);
}

// `single_bucket`: every gradient in one bucket, to separate the machinery's cost from that of
// splitting the all-reduce into buckets (which pays off only when backward overlaps).
void bench_sync(MpiComm& world, const std::string& model_name, int reps, bool single_bucket = false) {
  BenchModel model = make_bench_model(model_name);
  DdpOptions options = trainer_options();
  if (single_bucket) options.reducer.limits.first_cap_bytes = options.reducer.limits.cap_bytes = std::size_t{1} << 40;
  DistributedDataParallel ddp(model.net, world, options);
  Reducer& reducer = ddp.reducer();
  const auto params = model.net->parameters();
  std::int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();
  // First synchronised step establishes the gradients as bucket views.
  fill_gradients(*model.net);
  for (std::size_t i = params.size(); i-- > 0;) reducer.mark_ready(i);
  reducer.finalize();
  at::Tensor flat = at::randn({numel});

  std::vector<double> ours;
  std::vector<double> raw;
  for (int rep = 0; rep < reps + 2; ++rep) {
    world.barrier();
    auto t = Clock::now();
    for (std::size_t i = params.size(); i-- > 0;) reducer.mark_ready(i);  // what the hooks do in backward
    reducer.finalize();
    const double ours_s = seconds_since(t);
    world.barrier();
    t = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr<float>(), static_cast<int>(numel), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double raw_s = seconds_since(t);
    if (rep >= 2) {  // the first rounds fault pages in
      ours.push_back(ours_s);
      raw.push_back(raw_s);
    }
  }
  // Every rank's time counts: a collective is as slow as its slowest rank.
  double times[2] = {median(ours), median(raw)};
  MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (world.is_root()) {
    const double bytes = static_cast<double>(numel) * 4.0;
    const double bus = 2.0 * (world.size() - 1) / world.size();
    std::printf("%-8s %12.1f %10zu %12.2f %12.2f %10.2f %10.2f %8.3f\n", model.name.c_str(), bytes / 1e6,
                reducer.bucket_members().size(), times[0] * 1e3, times[1] * 1e3, bytes / times[0] / 1e9 * bus,
                bytes / times[1] / 1e9 * bus, times[1] / times[0]);
  }
}

// One training step: forward, loss, backward (buckets fly), finalize.
double train_step(Model& model, DistributedDataParallel* ddp, const at::Tensor& x, const at::Tensor& y) {
  const auto t = Clock::now();
  if (ddp != nullptr) {
    ddp->zero_grad();
  } else {
    for (auto& p : model.parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
  }
  at::Tensor loss = torch::nn::functional::cross_entropy(model.forward(x), y);
  if (ddp != nullptr) loss = ddp->scale_loss(loss);
  if (ddp != nullptr) ddp->prepare_for_backward(loss);
  loss.backward();
  if (ddp != nullptr) ddp->finalize();
  return seconds_since(t);
}

void bench_overlap(MpiComm& world, const std::string& model_name, std::int64_t batch, int reps) {
  BenchModel model = make_bench_model(model_name);
  DistributedDataParallel ddp(model.net, world, trainer_options());
  std::vector<std::int64_t> shape = {batch};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  const at::Tensor x = at::randn(shape);
  const at::Tensor y = at::randint(0, 10, {batch});
  std::vector<double> step;
  std::vector<double> exposed;
  std::vector<double> comm;
  std::vector<double> launched;
  for (int rep = 0; rep < reps + 2; ++rep) {
    const double s = train_step(*model.net, &ddp, x, y);
    if (rep < 2) continue;
    const ReducerStats& stats = ddp.reducer().last_stats();
    step.push_back(s);
    exposed.push_back(stats.finalize_wait_s);
    comm.push_back(ddp.reducer().last_comm_seconds());
    launched.push_back(static_cast<double>(stats.buckets_launched_in_backward));
  }
  if (world.is_root()) {
    const double share = median(exposed) / median(comm);
    std::printf("%-8s %6ld %10zu %10.0f %10.2f %12.2f %12.2f %10.1f%%\n", model.name.c_str(), static_cast<long>(batch),
                ddp.reducer().bucket_members().size(), median(launched), median(step) * 1e3, median(comm) * 1e3,
                median(exposed) * 1e3, share * 100.0);
  }
}

// The workloads of the PyTorch comparison (bench/compare.sh), as ModelSpecs.
struct Workload {
  std::string name;
  ModelSpec spec;
  std::int64_t batch;
};

std::vector<Workload> comparison_workloads() {
  const auto spec = [](ModelKind kind, std::vector<std::int64_t> shape, int hidden, int layers) {
    ModelSpec s;
    s.kind = kind;
    s.input_shape = std::move(shape);
    s.num_outputs = 10;
    s.hidden = hidden;
    s.layers = layers;
    return s;
  };
  ModelSpec gpt = spec(ModelKind::Gpt, {128}, 128, 4);  // configs/gpt-small.ini
  gpt.num_outputs = 512;
  gpt.heads = 4;
  gpt.dropout = 0.0;
  return {{"mlp-small", spec(ModelKind::Mlp, {784}, 128, 2), 32},
          {"mlp", spec(ModelKind::Mlp, {784}, 512, 2), 64},
          {"convnet", spec(ModelKind::ConvNet, {3, 32, 32}, 32, 3), 32},
          {"resnet18", spec(ModelKind::Resnet18, {3, 32, 32}, 64, 2), 32},
          {"gpt-small", gpt, 16}};
}

// One random batch of the workload: tokens and next tokens for GPT, samples and class labels otherwise.
std::pair<at::Tensor, at::Tensor> random_batch(const Workload& workload) {
  std::vector<std::int64_t> shape = {workload.batch};
  shape.insert(shape.end(), workload.spec.input_shape.begin(), workload.spec.input_shape.end());
  if (workload.spec.kind == ModelKind::Gpt)
    return {at::randint(0, workload.spec.num_outputs, shape), at::randint(0, workload.spec.num_outputs, shape)};
  return {at::randn(shape), at::randint(0, 10, {workload.batch})};
}

// The workload's loss on one batch: next-token cross-entropy for GPT, class cross-entropy otherwise.
at::Tensor workload_loss(Model& net, const Workload& workload, const at::Tensor& x, const at::Tensor& y) {
  const bool lm = workload.spec.kind == ModelKind::Gpt;
  at::Tensor out = net.forward(x);
  return torch::nn::functional::cross_entropy(lm ? out.flatten(0, 1) : out, lm ? y.flatten() : y);
}

// The step's forward and backward on one rank, as the trainer takes them (DDP alone: no copies).
double forward_backward(DistributedDataParallel& ddp, Model& net, const Workload& workload, const at::Tensor& x,
                        const at::Tensor& y) {
  const auto t = Clock::now();
  ddp.zero_grad();
  at::Tensor loss = ddp.scale_loss(workload_loss(net, workload, x, y));
  ddp.prepare_for_backward(loss);
  loss.backward();
  ddp.finalize();
  return seconds_since(t);
}

void bench_nonfinite(MpiComm& world, const Workload& workload, int reps) {
  torch::manual_seed(1);
  std::shared_ptr<Model> net = make_model(workload.spec);
  DistributedDataParallel ddp(net, world, trainer_options());
  const auto [x, y] = random_batch(workload);
  const auto params = net->parameters();
  std::vector<double> step_s, ours_s, torch_s;
  for (int rep = 0; rep < reps + 2; ++rep) {
    const double step = forward_backward(ddp, *net, workload, x, y);
    auto t = Clock::now();
    std::vector<at::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    const bool finite = all_finite(grads);
    const double ours = seconds_since(t);
    t = Clock::now();
    std::vector<at::Tensor> checks;
    for (const auto& g : grads) checks.push_back(at::isfinite(g).all());
    const bool torch_finite = at::stack(checks).all().item<bool>();
    const double theirs = seconds_since(t);
    if (finite != torch_finite) std::fprintf(stderr, "all_finite disagrees with torch\n");
    if (rep < 2) continue;
    step_s.push_back(step + ours);  // the trainer's step includes the check
    ours_s.push_back(ours);
    torch_s.push_back(theirs);
  }
  if (world.is_root()) {
    std::int64_t numel = 0;
    for (const auto& p : params) numel += p.numel();
    std::printf("%-10s %10.2f %10.2f %10.3f %9.2f%% %10.3f %9.2f%%\n", workload.name.c_str(),
                static_cast<double>(numel) * 4.0 / 1e6, median(step_s) * 1e3, median(ours_s) * 1e3,
                median(ours_s) / median(step_s) * 100.0, median(torch_s) * 1e3,
                median(torch_s) / median(step_s) * 100.0);
  }
}

// The comparison's optimizer on each side: SGD with momentum 0.9, AdamW for GPT (bench/compare.py).
struct OptimizerPair {
  std::unique_ptr<torch::optim::Optimizer> ours, torch;
};

OptimizerPair optimizers_for(const Workload& workload, const std::vector<at::Tensor>& ours,
                             const std::vector<at::Tensor>& theirs) {
  if (workload.spec.kind == ModelKind::Gpt) {
    const auto options = torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(0.1);
    return {std::make_unique<FusedAdamW>(ours, options), std::make_unique<torch::optim::AdamW>(theirs, options)};
  }
  const auto options = torch::optim::SGDOptions(0.05).momentum(0.9);
  return {std::make_unique<FusedSgd>(ours, options), std::make_unique<torch::optim::SGD>(theirs, options)};
}

void bench_optimizer(MpiComm& world, const Workload& workload, int reps) {
  torch::manual_seed(1);
  std::shared_ptr<Model> net = make_model(workload.spec);
  DistributedDataParallel ddp(net, world, trainer_options());
  const bool lm = workload.spec.kind == ModelKind::Gpt;
  const auto [x, y] = random_batch(workload);
  // The model's own parameters and gradients for ours; detached copies with the same gradients for
  // torch's (both drift apart over the repetitions: the arithmetic per element is what is timed).
  const auto params = net->parameters();
  std::vector<at::Tensor> copies;
  for (const auto& p : params) copies.push_back(p.detach().clone().set_requires_grad(true));
  OptimizerPair pair = optimizers_for(workload, params, copies);
  std::vector<double> step_s, ours_s, torch_s;
  for (int rep = 0; rep < reps + 2; ++rep) {
    const double step = forward_backward(ddp, *net, workload, x, y);
    for (std::size_t i = 0; i < params.size(); ++i) copies[i].mutable_grad() = params[i].grad().clone();
    auto t = Clock::now();
    pair.ours->step();
    const double ours = seconds_since(t);
    t = Clock::now();
    pair.torch->step();
    const double theirs = seconds_since(t);
    if (rep < 2) continue;
    step_s.push_back(step + ours);  // the trainer's step includes the optimizer
    ours_s.push_back(ours);
    torch_s.push_back(theirs);
  }
  if (world.is_root()) {
    std::int64_t numel = 0;
    for (const auto& p : params) numel += p.numel();
    std::printf("%-10s %-6s %10.2f %10.2f %10.3f %9.2f%% %10.3f %9.2f%% %8.2f\n", workload.name.c_str(),
                lm ? "adamw" : "sgd", static_cast<double>(numel) * 4.0 / 1e6, median(step_s) * 1e3,
                median(ours_s) * 1e3, median(ours_s) / median(step_s) * 100.0, median(torch_s) * 1e3,
                median(torch_s) / median(step_s) * 100.0, median(torch_s) / median(ours_s));
  }
}

// Weak scaling's ceiling on this machine: on every rank at once, the step without DDP (forward,
// backward, optimizer) against the same step plus a raw blocking MPI_Allreduce of each gradient in
// place (what an engine would take that cost nothing beyond MPI: no staging copy, no thread, no
// bucket) and against mnddp's DDP step. Per-rank throughput goes as 1/step, so local/ideal is the
// best weak scaling an MPI engine can reach here, local/ddp what mnddp reaches (no data loader).
void bench_scaling(MpiComm& world, const Workload& workload, int reps) {
  torch::manual_seed(1);
  std::shared_ptr<Model> net = make_model(workload.spec);
  torch::manual_seed(1);
  std::shared_ptr<Model> local = make_model(workload.spec);
  DistributedDataParallel ddp(net, world, trainer_options());
  const auto [x, y] = random_batch(workload);
  // The comparison's optimizer (mnddp's fused one) on each model; the torch halves are not used.
  OptimizerPair ddp_opt = optimizers_for(workload, net->parameters(), local->parameters());
  OptimizerPair local_opt = optimizers_for(workload, local->parameters(), net->parameters());
  std::int64_t numel = 0;
  for (const auto& p : local->parameters()) numel += p.numel();
  auto local_step = [&] {
    local_opt.ours->zero_grad();
    workload_loss(*local, workload, x, y).backward();
    local_opt.ours->step();
  };
  std::vector<double> local_s, ideal_s, ddp_s, wait_s, comm_s;
  for (int rep = 0; rep < reps + 2; ++rep) {
    world.barrier();
    auto t = Clock::now();
    local_step();
    const double a = seconds_since(t);
    world.barrier();
    t = Clock::now();
    local_step();
    for (auto& p : local->parameters())
      MPI_Allreduce(MPI_IN_PLACE, p.mutable_grad().data_ptr<float>(), static_cast<int>(p.numel()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    const double b = seconds_since(t);
    world.barrier();
    t = Clock::now();
    forward_backward(ddp, *net, workload, x, y);
    ddp_opt.ours->step();
    const double c = seconds_since(t);
    if (rep < 2) continue;
    wait_s.push_back(ddp.reducer().last_stats().finalize_wait_s);
    comm_s.push_back(ddp.reducer().last_comm_seconds());
    local_s.push_back(a);
    ideal_s.push_back(b);
    ddp_s.push_back(c);
  }
  // A step is as slow as its slowest rank.
  double times[3] = {median(local_s), median(ideal_s), median(ddp_s)};
  MPI_Allreduce(MPI_IN_PLACE, times, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (world.is_root())
    std::printf("%-10s %10.2f %10.3f %10.3f %10.3f %10.2f %10.2f\n", workload.name.c_str(),
                static_cast<double>(numel) * 4.0 / 1e6, times[0] * 1e3, times[1] * 1e3, times[2] * 1e3,
                times[0] / times[1], times[0] / times[2]);
  if (std::getenv("MNDDP_BENCH_VERBOSE") != nullptr)
    std::fprintf(stderr, "rank %d %s: finalize wait %.3f ms, all-reduce busy %.3f ms\n", world.rank(),
                 workload.name.c_str(), median(wait_s) * 1e3, median(comm_s) * 1e3);
}

void bench_overhead(MpiComm& world, const std::string& model_name, std::int64_t batch, int reps) {
  BenchModel with = make_bench_model(model_name);
  BenchModel without = make_bench_model(model_name);
  DistributedDataParallel ddp(with.net, world, trainer_options());
  std::vector<std::int64_t> shape = {batch};
  shape.insert(shape.end(), with.input_shape.begin(), with.input_shape.end());
  const at::Tensor x = at::randn(shape);
  const at::Tensor y = at::randint(0, 10, {batch});
  std::vector<double> ddp_s;
  std::vector<double> plain_s;
  for (int rep = 0; rep < reps + 2; ++rep) {
    const double a = train_step(*with.net, &ddp, x, y);
    const double b = train_step(*without.net, nullptr, x, y);
    if (rep < 2) continue;
    ddp_s.push_back(a);
    plain_s.push_back(b);
  }
  if (world.is_root())
    std::printf("%-8s %6ld %12.2f %12.2f %+10.2f%%\n", with.name.c_str(), static_cast<long>(batch), median(ddp_s) * 1e3,
                median(plain_s) * 1e3, (median(ddp_s) / median(plain_s) - 1.0) * 100.0);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string mode = argc > 1 ? argv[1] : "sync";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  at::set_num_threads(1);
  {
    MpiComm world;
    if (mode == "sync") {
      if (world.is_root())
        std::printf(
            "# gradient sync, %d ranks, median of %d: reducer (buckets, async) vs one raw "
            "MPI_Allreduce(SUM) of the same bytes\n%-8s %12s %10s %12s %12s %10s %10s %8s\n",
            world.size(), reps, "model", "size(MB)", "buckets", "ours(ms)", "raw(ms)", "busbw", "raw_busbw", "ratio");
      bench_sync(world, "convnet", reps);
      bench_sync(world, "convnet", reps, /*single_bucket=*/true);
      bench_sync(world, "mlp50m", reps);
    } else if (mode == "overlap") {
      if (world.is_root())
        std::printf(
            "# overlap, %d ranks, median of %d steps: exposed = time finalize() waits / all-reduce time\n"
            "%-8s %6s %10s %10s %10s %12s %12s %11s\n",
            world.size(), reps, "model", "batch", "buckets", "in_bwd", "step(ms)", "comm(ms)", "exposed(ms)",
            "exposed");
      bench_overlap(world, "convnet", 64, reps);
      bench_overlap(world, "mlp50m", 64, reps);
    } else if (mode == "overhead") {
      if (world.is_root())
        std::printf("# DDP machinery on %d rank(s), median of %d alternating steps\n%-8s %6s %12s %12s %11s\n",
                    world.size(), reps, "model", "batch", "ddp(ms)", "plain(ms)", "overhead");
      bench_overhead(world, "convnet", 64, reps);
      bench_overhead(world, "mlp50m", 64, reps);
    } else if (mode == "nonfinite") {
      if (world.is_root())
        std::printf(
            "# --on-nonfinite check on %d rank(s), median of %d steps: all_finite over every gradient vs torch's "
            "isfinite().all() per gradient\n%-10s %10s %10s %10s %10s %10s %10s\n",
            world.size(), reps, "model", "grads(MB)", "step(ms)", "ours(ms)", "share", "torch(ms)", "share");
      for (const Workload& workload : comparison_workloads()) bench_nonfinite(world, workload, reps);
    } else if (mode == "optimizer") {
      if (world.is_root())
        std::printf(
            "# optimizer step on %d rank(s), median of %d steps: mnddp's fused pass vs torch::optim's\n"
            "%-10s %-6s %10s %10s %10s %10s %10s %10s %8s\n",
            world.size(), reps, "model", "optim", "params(MB)", "step(ms)", "ours(ms)", "share", "torch(ms)", "share",
            "speedup");
      for (const Workload& workload : comparison_workloads()) bench_optimizer(world, workload, reps);
    } else if (mode == "scaling") {
      if (world.is_root())
        std::printf(
            "# weak scaling's ceiling on %d ranks, median of %d alternating steps (slowest rank): the step without "
            "DDP, plus a raw MPI_Allreduce of each gradient in place, and mnddp's DDP step\n"
            "%-10s %10s %10s %10s %10s %10s %10s\n",
            world.size(), reps, "model", "grads(MB)", "local(ms)", "ideal(ms)", "ddp(ms)", "bound", "mnddp");
      // Optional third argument: the workloads to run (default all but ResNet-18, whose steps are long).
      const std::string only = argc > 3 ? argv[3] : "mlp-small,mlp,convnet,gpt-small";
      for (const Workload& workload : comparison_workloads())
        if (("," + only + ",").find("," + workload.name + ",") != std::string::npos)
          bench_scaling(world, workload, reps);
    } else {
      if (world.is_root())
        std::fprintf(
            stderr,
            "usage: mnddp-bench-ddp sync|overlap|overhead|nonfinite|optimizer [reps] | scaling [reps] [models]\n");
    }
  }
  MPI_Finalize();
  return 0;
}
