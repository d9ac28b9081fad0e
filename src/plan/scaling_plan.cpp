// The plan's rows and advice, and their text and JSON forms.
#include "mnddp/plan/scaling_plan.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "mnddp/observe/checkpoint_advice.hpp"
#include "mnddp/plan/plan_inputs.hpp"

namespace mnddp {

std::vector<int> plan_node_counts(int max_nodes) {
  std::vector<int> counts;
  for (int n = 1; n <= max_nodes; n *= 2) {
    counts.push_back(n);
    if (n > max_nodes / 2) break;
  }
  if (counts.back() != max_nodes) counts.push_back(max_nodes);
  return counts;
}

namespace {

constexpr double kMiB = 1 << 20;
constexpr double kGiB = 1 << 30;
const double kBucketCandidatesMb[] = {1, 2, 5, 10, 25, 50, 100, 200};

PlanRow plan_row(const PlanInputs& in, int nodes, double single_step) {
  PlanRow row;
  row.nodes = nodes;
  row.topology = {nodes, in.gpus_per_node};
  row.step = predict_step(in.step, in.network, row.topology, in.options);
  const int ranks = row.topology.ranks();
  row.samples_per_s = static_cast<double>(in.batch_per_rank) * ranks / row.step.step_s;
  row.efficiency = single_step / row.step.step_s;
  for (int z = 0; z < 3; ++z) {
    row.memory[z] = predict_memory(in.memory, ranks, z);
    row.fits[z] = in.device_memory <= 0 || row.memory[z].total() <= in.device_memory;
  }
  return row;
}

PlanAdvice advise(const ScalingPlan& plan) {
  const PlanInputs& in = plan.inputs;
  PlanAdvice a;
  // The node count the user can use efficiently, and the interval at that size.
  for (const auto& row : plan.rows)
    if (row.efficiency >= in.efficiency_floor) a.efficient_up_to = row.nodes;
  // The bucket size: the fastest candidate at the largest node count planned.
  const Topology largest = plan.rows.back().topology;
  const double own = plan.rows.back().step.step_s;
  a.bucket_cap_mb = static_cast<double>(in.options.buckets.cap_bytes) / kMiB;
  double best = own;
  for (double mb : kBucketCandidatesMb) {
    StepOptions options = in.options;
    options.buckets.cap_bytes = static_cast<std::size_t>(mb * kMiB);
    const double s = predict_step(in.step, in.network, largest, options).step_s;
    if (s < best * 0.99) {  // a gain under 1% is noise in the measurement: keep the run's own
      best = s;
      a.bucket_cap_mb = mb;
    }
  }
  a.bucket_gain = own > 0 ? 1.0 - best / own : 0.0;
  // The lowest ZeRO stage that fits at every planned size (stages 1 and 2 shrink as ranks grow,
  // so "every size" is the smallest with more than one rank, and one rank alone at stage 0).
  a.zero_stage = 3;
  for (int z = 2; z >= 0; --z)
    if (std::ranges::all_of(plan.rows,
                            [&](const PlanRow& r) { return r.fits[z] || (z > 0 && r.topology.ranks() == 1); }))
      a.zero_stage = z;
  // Young and Daly at the efficient size: the snapshot's cost (1/N of it under ZeRO, which the
  // checkpoint writes as shares) against --mtbf.
  const int nodes = std::max(1, a.efficient_up_to);
  const auto row = std::ranges::find_if(plan.rows, [&](const PlanRow& r) { return r.nodes == nodes; });
  const double step_s = row != plan.rows.end() ? row->step.step_s : plan.rows.front().step.step_s;
  const int ranks = nodes * in.gpus_per_node;
  CheckpointCosts::Level level;
  level.count = 1;
  level.blocked_s = in.checkpoint_cost_s / (in.options.zero_stage > 0 ? ranks : 1);
  const IntervalAdvice interval = advise_interval(level, in.mtbf_hours, step_s);
  a.checkpoint_every_s = interval.seconds;
  a.checkpoint_every_steps = interval.steps;
  return a;
}

std::string duration(double s) {
  if (s < 1e-3) return fmt::format("{:.0f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  if (s < 120) return fmt::format("{:.2f} s", s);
  return fmt::format("{:.1f} min", s / 60);
}

// Each --zero stage's memory per rank split into its parts, on one node and, where ZeRO's shares make
// it smaller (by 1% or more), at the largest node count: what decides the stage and the node count to ask for.
std::string memory_split_text(const ScalingPlan& plan) {
  const PlanInputs& in = plan.inputs;
  std::string text = fmt::format("plan: memory per rank{:>8} {:>11} {:>10} {:>10} {:>12} {:>9} {:>10}\n", "",
                                 "parameters", "gradients", "optimizer", "activations", "buffers", "total");
  for (int z = 0; z < 3; ++z) {
    const PlanRow& one = plan.rows.front();
    const PlanRow& most = plan.rows.back();
    const bool shrinks = most.nodes > one.nodes && most.memory[z].total() < 0.99 * one.memory[z].total();
    for (const PlanRow* r : {&one, &most}) {
      if (r == &most && !shrinks) break;
      const auto& m = r->memory[z];
      const std::string where = fmt::format("--zero {}, {} node{}", z, r->nodes, r->nodes == 1 ? "" : "s");
      // Small parts in KiB, or MiB with a decimal: a small model's parts are not all "0 MiB".
      const auto mib = [](double bytes) {
        if (bytes < kMiB) return fmt::format("{:.0f} KiB", bytes / 1024);
        return fmt::format("{:.{}f} MiB", bytes / kMiB, bytes < 10 * kMiB ? 1 : 0);
      };
      text += fmt::format("  {:<27} {:>11} {:>10} {:>10} {:>12} {:>9} {:>6.2f} GiB{}\n", where, mib(m.parameters),
                          mib(m.gradients), mib(m.optimizer_state), mib(m.activations), mib(m.buffers),
                          m.total() / kGiB, r->fits[z] ? "" : "  does not fit");
    }
  }
  if (in.device_memory > 0)
    text += fmt::format("plan: a rank may use {:.1f} GiB (--device-memory; '!' in the table: does not fit)\n",
                        in.device_memory / kGiB);
  return text;
}

}  // namespace

ScalingPlan make_scaling_plan(const PlanInputs& inputs) {
  ScalingPlan plan;
  plan.inputs = inputs;
  plan.single_rank_step_s = predict_step(inputs.step, inputs.network, Topology{1, 1}, inputs.options).step_s;
  for (int nodes : plan_node_counts(inputs.max_nodes))
    plan.rows.push_back(plan_row(inputs, nodes, plan.single_rank_step_s));
  plan.advice = advise(plan);
  return plan;
}

std::string scaling_plan_text(const ScalingPlan& plan) {
  const PlanInputs& in = plan.inputs;
  std::string text = fmt::format(
      "plan: {} measured on {}: step {} alone (data wait {}, forward {}, backward {}, optimizer {})\n"
      "plan: network {} ({}), {} ranks a node, --zero {}, buckets {:g} MiB\n",
      in.model, in.device, duration(plan.single_rank_step_s), duration(in.step.data_wait_s),
      duration(in.step.forward_s), duration(in.step.backward_s), duration(in.step.optimizer_s), in.network.name,
      in.network.description, in.gpus_per_node, in.options.zero_stage,
      static_cast<double>(in.options.buckets.cap_bytes) / kMiB);
  text += fmt::format("{:>6} {:>6} {:>10} {:>12} {:>6} {:>10} {:>10}  {:>22}  {}\n", "nodes", "ranks", "step",
                      "samples/s", "eff.", "exposed", "all-gather", "memory/rank zero 0|1|2", "algorithm");
  for (const auto& r : plan.rows) {
    std::string memory;
    for (int z = 0; z < 3; ++z)
      memory += fmt::format("{}{:.2f}{}", z == 0 ? "" : "|", r.memory[z].total() / kGiB, r.fits[z] ? "" : "!");
    text +=
        fmt::format("{:>6} {:>6} {:>10} {:>12.0f} {:>5.0f}% {:>10} {:>10}  {:>18} GiB  {}\n", r.nodes,
                    r.topology.ranks(), duration(r.step.step_s), r.samples_per_s, r.efficiency * 100,
                    duration(r.step.exposed_s), duration(r.step.allgather_s), memory, algorithm_name(r.step.algorithm));
  }
  text += memory_split_text(plan);
  const PlanAdvice& a = plan.advice;
  text += fmt::format("advice: --bucket-cap-mb {:g}{}\n", a.bucket_cap_mb,
                      a.bucket_gain > 0
                          ? fmt::format(" ({:.1f}% faster at {} nodes)", a.bucket_gain * 100, plan.rows.back().nodes)
                          : " (the run's own; no candidate is 1% faster)");
  text += a.zero_stage <= 2
              ? fmt::format("advice: --zero {} (the lowest stage that fits at every size)\n", a.zero_stage)
              : "advice: no --zero stage fits: a smaller batch per rank, or a smaller model\n";
  text += a.efficient_up_to > 0
              ? fmt::format("advice: up to {} nodes ({} ranks) at {:.0f}% efficiency or more\n", a.efficient_up_to,
                            a.efficient_up_to * in.gpus_per_node, in.efficiency_floor * 100)
              : fmt::format("advice: under {:.0f}% efficiency even on one node\n", in.efficiency_floor * 100);
  text += fmt::format("advice: checkpoint every {} steps ({}) for an MTBF of {:g} h: sqrt(2 x cost x MTBF)\n",
                      a.checkpoint_every_steps, duration(a.checkpoint_every_s), in.mtbf_hours);
  return text;
}

std::string scaling_plan_json(const ScalingPlan& plan) {
  const PlanInputs& in = plan.inputs;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : plan.rows) {
    nlohmann::json memory = nlohmann::json::array();
    for (int z = 0; z < 3; ++z)
      memory.push_back({{"zero", z},
                        {"parameters", r.memory[z].parameters},
                        {"gradients", r.memory[z].gradients},
                        {"optimizer_state", r.memory[z].optimizer_state},
                        {"activations", r.memory[z].activations},
                        {"buffers", r.memory[z].buffers},
                        {"total", r.memory[z].total()},
                        {"fits", r.fits[z]}});
    rows.push_back({{"nodes", r.nodes},
                    {"ranks", r.topology.ranks()},
                    {"step_s", r.step.step_s},
                    {"samples_per_s", r.samples_per_s},
                    {"efficiency", r.efficiency},
                    {"compute_s", r.step.compute_s},
                    {"comm_s", r.step.comm_s},
                    {"exposed_s", r.step.exposed_s},
                    {"allgather_s", r.step.allgather_s},
                    {"buckets", r.step.buckets},
                    {"algorithm", std::string(algorithm_name(r.step.algorithm))},
                    {"memory_bytes", memory}});
  }
  const nlohmann::json doc = {{"model", in.model},
                              {"device", in.device},
                              {"network", in.network.name},
                              {"gpus_per_node", in.gpus_per_node},
                              {"zero", in.options.zero_stage},
                              {"bucket_cap_mb", static_cast<double>(in.options.buckets.cap_bytes) / kMiB},
                              {"measured",
                               {{"data_wait_s", in.step.data_wait_s},
                                {"forward_s", in.step.forward_s},
                                {"backward_s", in.step.backward_s},
                                {"optimizer_s", in.step.optimizer_s},
                                {"peak_bytes", in.memory.peak},
                                {"checkpoint_cost_s", in.checkpoint_cost_s}}},
                              {"single_rank_step_s", plan.single_rank_step_s},
                              {"rows", rows},
                              {"advice",
                               {{"bucket_cap_mb", plan.advice.bucket_cap_mb},
                                {"bucket_gain", plan.advice.bucket_gain},
                                {"zero", plan.advice.zero_stage},
                                {"efficient_up_to_nodes", plan.advice.efficient_up_to},
                                {"efficiency_floor", in.efficiency_floor},
                                {"checkpoint_every_s", plan.advice.checkpoint_every_s},
                                {"checkpoint_every_steps", plan.advice.checkpoint_every_steps},
                                {"mtbf_hours", in.mtbf_hours}}},
                              // What `mnddp train --plan FILE` predicts its own configuration from.
                              {"inputs", nlohmann::json::parse(plan_inputs_json(in))}};
  return doc.dump(2) + "\n";
}

}  // namespace mnddp
