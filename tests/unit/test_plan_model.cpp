// mnddp plan's model against cases computed by hand: the collectives' hop counts and bandwidth
// terms, NCCL's choice of algorithm, the bucket queue, the step, memory per --zero stage, the
// network profile's file form, and the plan's rows and advice.
#include <gtest/gtest.h>

#include <cmath>

#include "mnddp/error.hpp"
#include "mnddp/plan/collective_model.hpp"
#include "mnddp/plan/memory_model.hpp"
#include "mnddp/plan/scaling_plan.hpp"
#include "mnddp/plan/step_model.hpp"

using namespace mnddp;

namespace {

// 10 us a hop and 1 GB/s within a node; 100 us and 0.2 GB/s a rank across nodes; no launch cost.
NetworkProfile simple_network() {
  NetworkProfile n;
  n.name = "test";
  n.gpus_per_node = 2;
  n.intra = {10e-6, 1e9, 0, {}};
  n.inter = {100e-6, 0.2e9, 0, {}};
  return n;
}

// A 30 ms step (forward 10, backward 20) with one 4 MB bucket ready at its end, on simple_network.
PlanInputs simple_plan_inputs(int max_nodes) {
  PlanInputs in;
  in.network = simple_network();
  in.gpus_per_node = 2;
  in.max_nodes = max_nodes;
  in.batch_per_rank = 10;
  in.step.forward_s = 0.01;
  in.step.backward_s = 0.02;
  in.step.gradient_bytes = {4'000'000};
  in.step.keys = {0};
  in.step.ready_s = {0.02};
  return in;
}

}  // namespace

TEST(PlanCollectives, RingWithinANodeIsTwoNMinusOneHopsOfAChunk) {
  // 4 ranks, 4 MB: 6 steps of 1 MB at 1 GB/s and 10 us.
  EXPECT_NEAR(ring_allreduce_seconds(simple_network(), {1, 4}, 4e6), 6 * 10e-6 + 6 * 1e-3, 1e-12);
  EXPECT_EQ(ring_allreduce_seconds(simple_network(), {1, 1}, 4e6), 0.0);
}

TEST(PlanCollectives, RingAcrossNodesPaysTheNetworkOnTwoHopsPerNode) {
  // 2 nodes of 2: the ring's bandwidth is min(1 GB/s, 2 x 0.2 GB/s) = 0.4 GB/s; of its 6 steps,
  // 2(k-1) = 2 pay the network's latency (NCCL's count), 4 the node's.
  const double expected = 4 * 10e-6 + 2 * 100e-6 + 6 * 1e6 / 0.4e9;
  EXPECT_NEAR(ring_allreduce_seconds(simple_network(), {2, 2}, 4e6), expected, 1e-12);
  EXPECT_DOUBLE_EQ(ring_bandwidth_Bps(simple_network(), {2, 2}), 0.4e9);
}

TEST(PlanCollectives, TreeHasLogarithmicLatencyAndHalfTheBandwidth) {
  // 2 nodes of 2: 2 x (1 intra hop + log2(2) = 1 inter hop), then 2 x bytes at 92% of 0.4 GB/s.
  const double expected = 2 * (10e-6 + 100e-6) + 2 * 4e6 / (0.92 * 0.4e9);
  EXPECT_NEAR(tree_allreduce_seconds(simple_network(), {2, 2}, 4e6), expected, 1e-12);
}

TEST(PlanCollectives, NcclPicksTheTreeForSmallMessagesOnManyNodesAndTheRingForLargeOnes) {
  const NetworkProfile net = simple_network();
  EXPECT_EQ(allreduce(net, {64, 2}, 1024).algorithm, Algorithm::Tree);
  EXPECT_EQ(allreduce(net, {64, 2}, 1e9).algorithm, Algorithm::Ring);
  EXPECT_EQ(allreduce(net, {1, 8}, 1024).algorithm, Algorithm::Ring);  // no tree within one node
}

TEST(PlanCollectives, NcclPicksTheLowLatencyProtocolForSmallMessages) {
  const NetworkProfile net = simple_network();
  // 8 ranks, 8 bytes: LL's 14 hops of 0.18 x 10 us against Simple's 14 of 10 us.
  const CollectiveTime small = allreduce(net, {1, 8}, 8);
  EXPECT_EQ(small.protocol, Protocol::LowLatency);
  EXPECT_NEAR(small.seconds, 14 * 1.8e-6 + 14 * 1.0 / (0.5 * 1e9), 1e-12);
  EXPECT_EQ(allreduce(net, {1, 8}, 1e9).protocol, Protocol::Simple);  // LL's half bandwidth loses
}

TEST(PlanCollectives, MpiConsidersRecursiveDoubling) {
  NetworkProfile net = simple_network();
  net.library = CollectiveLibrary::Mpi;
  // 4 ranks on one node, 8 bytes: 2 rounds of one hop (20 us) against the ring's 6 hops (60 us).
  const CollectiveTime t = allreduce(net, {1, 4}, 8);
  EXPECT_EQ(t.algorithm, Algorithm::RecursiveDoubling);
  EXPECT_NEAR(t.seconds, 2 * (10e-6 + 8 / 1e9), 1e-12);
}

TEST(PlanCollectives, ReduceScatterIsHalfTheRingWithoutLatency) {
  NetworkProfile net = simple_network();
  net.intra.latency_s = 0;
  EXPECT_NEAR(reduce_scatter_seconds(net, {1, 4}, 4e6) * 2, ring_allreduce_seconds(net, {1, 4}, 4e6), 1e-12);
  EXPECT_DOUBLE_EQ(allgather_seconds(net, {1, 4}, 4e6), reduce_scatter_seconds(net, {1, 4}, 4e6));
}

TEST(PlanCollectives, MeasuredHopsAreInterpolated) {
  LinkLevel level{1e-6, 1e9, 0, {{1e3, 2e-6}, {1e6, 1e-3}}};
  EXPECT_DOUBLE_EQ(level.hop_seconds(10), 2e-6);                     // below: the smallest's time
  EXPECT_NEAR(level.hop_seconds(500500), (2e-6 + 1e-3) / 2, 1e-12);  // halfway
  EXPECT_NEAR(level.hop_seconds(2e6), 1e-3 + 1e6 / 1e9, 1e-12);      // beyond: at the bandwidth
}

TEST(PlanStep, TheBucketQueueRunsOneCollectiveAtATime) {
  // Ready at 1, 2, 3 s, 1.5 s each: 1 -> 2.5, 2.5 -> 4, 4 -> 5.5.
  const std::vector<BucketEvent> buckets = {{1, 0}, {2, 0}, {3, 0}};
  EXPECT_DOUBLE_EQ(simulate_bucket_queue(buckets, [](double) { return 1.5; }), 5.5);
  EXPECT_DOUBLE_EQ(simulate_bucket_queue(buckets, [](double) { return 0.5; }), 3.5);
}

TEST(PlanStep, BucketsFollowTheReducersPlanAndTheirLastGradient) {
  MeasuredStep step;
  step.gradient_bytes = {400, 400, 400};  // registration order; buckets go in reverse
  step.keys = {0, 0, 0};
  step.ready_s = {0.3, 0.2, 0.1};
  const auto events = bucket_events(step, BucketLimits{400, 800}, 0.5);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_DOUBLE_EQ(events[0].ready_s, 0.1);  // the first bucket: the last parameter alone (400 bytes cap)
  EXPECT_DOUBLE_EQ(events[0].bytes, 200);    // compressed to half
  EXPECT_DOUBLE_EQ(events[1].ready_s, 0.3);
  EXPECT_DOUBLE_EQ(events[1].bytes, 400);
}

TEST(PlanStep, ExposedCommunicationIsWhatOutlastsBackward) {
  MeasuredStep step;
  step.data_wait_s = 0.01;
  step.forward_s = 0.1;
  step.backward_s = 0.2;
  step.optimizer_s = 0.05;
  step.gradient_bytes = {4'000'000};
  step.keys = {0};
  step.ready_s = {0.2};
  const NetworkProfile net = simple_network();
  StepOptions options;
  const StepPrediction one = predict_step(step, net, {1, 1}, options);
  EXPECT_DOUBLE_EQ(one.step_s, 0.36);
  EXPECT_EQ(one.exposed_s, 0.0);
  const StepPrediction four = predict_step(step, net, {1, 4}, options);
  EXPECT_NEAR(four.exposed_s, ring_allreduce_seconds(net, {1, 4}, 4e6), 1e-12);
  EXPECT_NEAR(four.step_s, 0.36 + four.exposed_s, 1e-12);
  options.zero_stage = 2;  // the optimizer on a quarter, and the parameters all-gathered after it
  const StepPrediction zero = predict_step(step, net, {1, 4}, options);
  EXPECT_NEAR(zero.optimizer_s, 0.0125, 1e-12);
  EXPECT_NEAR(zero.exposed_s, reduce_scatter_seconds(net, {1, 4}, 4e6), 1e-12);
  EXPECT_NEAR(zero.allgather_s, allgather_seconds(net, {1, 4}, 4e6), 1e-12);
}

TEST(PlanStep, CpuRanksSharingCoresComputeSlower) {
  NetworkProfile net = simple_network();
  net.cores_per_node = 2;
  EXPECT_DOUBLE_EQ(compute_sharing_factor(net, {1, 2}, 1), 1.0);
  EXPECT_DOUBLE_EQ(compute_sharing_factor(net, {1, 3}, 1), 1.5);
  EXPECT_DOUBLE_EQ(compute_sharing_factor(net, {1, 4}, 1), 2.0);
  net.cores_per_node = 0;  // GPUs: no sharing
  EXPECT_DOUBLE_EQ(compute_sharing_factor(net, {1, 8}, 4), 1.0);
}

TEST(PlanStep, CpuRanksWithoutASpareCoreHideNoCommunication) {
  MeasuredStep step;
  step.forward_s = 0.1;
  step.backward_s = 0.2;
  step.gradient_bytes = {4'000'000};
  step.keys = {0};
  step.ready_s = {0.0};  // ready at once: the whole all-reduce could hide behind backward
  NetworkProfile net = simple_network();
  net.cores_per_node = 8;  // 2 ranks of 1 thread and their communication threads: 4 cores, hidden
  EXPECT_EQ(predict_step(step, net, {1, 2}, {}).exposed_s, 0.0);
  net.cores_per_node = 2;  // no core to spare: every collective adds to the step
  const StepPrediction shared = predict_step(step, net, {1, 2}, {});
  EXPECT_NEAR(shared.exposed_s, ring_allreduce_seconds(net, {1, 2}, 4e6), 1e-12);
  EXPECT_NEAR(shared.step_s, 0.3 + shared.exposed_s, 1e-12);
}

// The loader's CPU time ran on a spare core beside the measured step; ranks with none to spare
// pay it, scaled as their compute is.
TEST(PlanStep, HelperThreadsCostTheStepOnlyWhereNoCoreIsSpare) {
  MeasuredStep step;
  step.forward_s = 0.1;
  step.backward_s = 0.2;
  step.helper_cpu_s = 0.05;
  step.gradient_bytes = {1000};
  step.keys = {0};
  step.ready_s = {0.2};
  NetworkProfile net = simple_network();
  net.cores_per_node = 8;
  EXPECT_NEAR(predict_step(step, net, {1, 2}, {}).compute_s, 0.3, 1e-12) << "a core each to spare";
  net.cores_per_node = 0;
  EXPECT_NEAR(predict_step(step, net, {1, 2}, {}).compute_s, 0.3, 1e-12) << "GPU ranks";
  net.cores_per_node = 2;
  EXPECT_NEAR(predict_step(step, net, {1, 2}, {}).compute_s, 0.35, 1e-12) << "no core to spare";
  EXPECT_NEAR(predict_step(step, net, {1, 4}, {}).compute_s, 2 * 0.35, 1e-12) << "two ranks a core";
  EXPECT_NEAR(predict_step(step, net, {1, 1}, {}).compute_s, 0.3, 1e-12) << "one rank: as measured";
}

TEST(PlanMemory, ZeroStagesSplitOptimizerStateAndGradients) {
  MeasuredMemory m;
  m.parameters = 400;
  m.gradients = 400;
  m.optimizer_state = 800;
  m.baseline = 100;
  m.peak = 100 + 400 + 400 + 800 + 300;
  m.bucket_cap = 10;
  const MemoryPrediction zero0 = predict_memory(m, 4, 0);
  EXPECT_DOUBLE_EQ(zero0.activations, 300);
  EXPECT_DOUBLE_EQ(zero0.total(), m.peak);
  const MemoryPrediction zero1 = predict_memory(m, 4, 1);
  EXPECT_DOUBLE_EQ(zero1.optimizer_state, 200);
  EXPECT_DOUBLE_EQ(zero1.gradients, 400);
  EXPECT_DOUBLE_EQ(zero1.buffers, 110);
  const MemoryPrediction zero2 = predict_memory(m, 4, 2);
  EXPECT_DOUBLE_EQ(zero2.gradients, 100 + 30);
  EXPECT_DOUBLE_EQ(predict_memory(m, 1, 2).total(), m.peak);  // one rank: nothing to split
}

TEST(PlanNetwork, AProfileRoundTripsThroughItsFile) {
  NetworkProfile n = simple_network();
  n.library = CollectiveLibrary::Mpi;
  n.cores_per_node = 2;
  n.launch_latency_s = 5e-6;
  n.inter.measured = {{8, 3e-6}, {1 << 20, 1e-3}};
  const NetworkProfile back = parse_network_profile(network_profile_json(n), "test");
  EXPECT_EQ(back.library, CollectiveLibrary::Mpi);
  EXPECT_EQ(back.gpus_per_node, 2);
  EXPECT_EQ(back.cores_per_node, 2);
  EXPECT_NEAR(back.launch_latency_s, 5e-6, 1e-15);
  EXPECT_NEAR(back.inter.latency_s, 100e-6, 1e-15);
  EXPECT_NEAR(back.inter.bandwidth_Bps, 0.2e9, 1e-3);
  ASSERT_EQ(back.inter.measured.size(), 2u);
  EXPECT_DOUBLE_EQ(back.inter.measured[1].second, 1e-3);
}

TEST(PlanNetwork, BadProfilesAreUsageErrorsNamingTheField) {
  EXPECT_THROW(parse_network_profile("{", "f.json"), UsageError);
  EXPECT_THROW(parse_network_profile("[1]", "f.json"), UsageError);
  try {
    parse_network_profile(R"({"gpus_per_node": 0, "launch_latency_us": 1, "intra": {}, "inter": {}})", "f.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'gpus_per_node' is 0"), std::string::npos) << e.what();
  }
  try {
    load_network_profile("no-such-profile");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--network 'no-such-profile'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h200-nvlink-ib400"), std::string::npos) << e.what();
  }
  EXPECT_EQ(load_network_profile("h200-nvlink-ib400").gpus_per_node, 8);
}

TEST(PlanRows, NodeCountsDoubleUpToTheMaximum) {
  EXPECT_EQ(plan_node_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(plan_node_counts(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(plan_node_counts(100), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 100}));
}

TEST(PlanRows, EfficiencyFallsWithCommunicationAndTheAdviceSaysWhere) {
  const PlanInputs in = simple_plan_inputs(64);
  const ScalingPlan plan = make_scaling_plan(in);
  ASSERT_EQ(plan.rows.size(), 7u);
  EXPECT_DOUBLE_EQ(plan.single_rank_step_s, 0.03);
  for (std::size_t i = 1; i < plan.rows.size(); ++i) EXPECT_LE(plan.rows[i].efficiency, plan.rows[i - 1].efficiency);
  // One node of 2: 2 steps of 2 MB at 1 GB/s and 10 us = 4.02 ms exposed: 0.03 / 0.03402.
  EXPECT_NEAR(plan.rows[0].efficiency, 0.03 / 0.03402, 1e-9);
  // Across nodes the ring gets 0.4 GB/s: ~20 ms exposed, 60% efficiency: efficient on one node only.
  EXPECT_EQ(plan.advice.efficient_up_to, 1);
  EXPECT_NE(scaling_plan_text(plan).find("advice: up to 1 nodes"), std::string::npos);
  EXPECT_NE(scaling_plan_json(plan).find("\"efficient_up_to_nodes\": 1"), std::string::npos);
}

TEST(PlanRows, TheMemoryLinesSplitEveryStageAndShowTheLargestSizeWhereZeroShrinksIt) {
  PlanInputs in = simple_plan_inputs(8);
  constexpr double MiB = 1 << 20;
  in.memory = {400 * MiB, 400 * MiB, 800 * MiB, 2000 * MiB, 100 * MiB, 10 * MiB};
  const std::string text = scaling_plan_text(make_scaling_plan(in));
  // --zero 0: 400 + 400 + 800 + 300 activations + 100 baseline.
  EXPECT_NE(
      text.find("  --zero 0, 1 node                400 MiB    400 MiB    800 MiB      300 MiB   100 MiB   1.95 GiB"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("--zero 0, 8 nodes"), std::string::npos) << "nothing shrinks at --zero 0:\n" << text;
  // --zero 1 on 8 nodes of 2: a sixteenth of the optimizer state.
  EXPECT_NE(text.find("  --zero 1, 8 nodes               400 MiB    400 MiB     50 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("  --zero 2, 8 nodes"), std::string::npos) << text;
}
