// mnddp plan's answer: for 1, 2, 4, ... nodes, the predicted step, throughput, scaling efficiency,
// exposed communication and memory per rank at each --zero stage; then the advice (bucket size,
// ZeRO stage, the node count past which efficiency falls under 80%, the checkpoint interval by
// Young and Daly's rule). Text, JSON. Pure: the measurement is the torch half's
// (src/train/plan_command.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mnddp/plan/memory_model.hpp"
#include "mnddp/plan/step_model.hpp"

namespace mnddp {

struct PlanInputs {
  MeasuredStep step;
  MeasuredMemory memory;
  NetworkProfile network;
  StepOptions options;              // the run's own settings (buckets, --zero, compression)
  std::string model;                // for the header: "resnet18, batch 64 per rank, sgd"
  std::string device;               // where it was measured
  std::int64_t batch_per_rank = 1;  // samples of one rank's optimizer step (batch x accumulation)
  int gpus_per_node = 8;
  int max_nodes = 128;
  double device_memory = 0;      // bytes a rank may use
  double checkpoint_cost_s = 0;  // the snapshot's time for this rank's whole state (--zero 0)
  double mtbf_hours = 24;
  double efficiency_floor = 0.8;  // "efficient up to" is the largest node count at or above this
};

struct PlanRow {
  int nodes = 1;
  Topology topology;
  StepPrediction step;
  double samples_per_s = 0;
  double efficiency = 1;              // samples/s against ranks x one rank's alone
  MemoryPrediction memory[3];         // --zero 0, 1, 2
  bool fits[3] = {true, true, true};  // within device_memory
};

struct PlanAdvice {
  double bucket_cap_mb = 25;      // the fastest candidate at the largest node count
  double bucket_gain = 0;         // its step time saved against the run's own, a fraction
  int zero_stage = 0;             // the lowest stage that fits at every node count (3: none fits)
  int efficient_up_to = 0;        // nodes; 0 when even one node is under the floor
  double checkpoint_every_s = 0;  // Young and Daly at efficient_up_to nodes (or one)
  std::int64_t checkpoint_every_steps = 0;
};

struct ScalingPlan {
  PlanInputs inputs;
  double single_rank_step_s = 0;  // one rank alone: no communication, no sharing
  std::vector<PlanRow> rows;
  PlanAdvice advice;
};

// Node counts 1, 2, 4, ... up to max_nodes (max_nodes itself last when not a power of two).
std::vector<int> plan_node_counts(int max_nodes);

ScalingPlan make_scaling_plan(const PlanInputs& inputs);
std::string scaling_plan_text(const ScalingPlan& plan);
std::string scaling_plan_json(const ScalingPlan& plan);

}  // namespace mnddp
