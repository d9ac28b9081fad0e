// Which communicator carries the gradients, decided from every rank's GPU identity (host and PCI bus
// id), with made-up identities: the layouts Slurm and containers produce, where counting visible
// devices gets it wrong (F2 of the GPU review).
#include <gtest/gtest.h>

#include "mnddp/comm/backend.hpp"
#include "mnddp/error.hpp"

using namespace mnddp;

namespace {

DeviceIdentity gpu(const std::string& host, const std::string& bus) { return {host, bus}; }
DeviceIdentity cpu_only(const std::string& host) { return {host, ""}; }

}  // namespace

// srun --gpus-per-task=1 (or per-task cgroups, one-GPU containers): four ranks on a node, each seeing
// one device as its device 0, each a different GPU. Counting gave "4 ranks on 1 visible GPU": MPI.
TEST(BackendChoice, OneGpuPerTaskOnOneNodeIsNccl) {
  const std::vector<DeviceIdentity> ranks{gpu("node1", "0000:07:00.0"), gpu("node1", "0000:0B:00.0"),
                                          gpu("node1", "0000:48:00.0"), gpu("node1", "0000:4C:00.0")};
  const BackendChoice choice = decide_gradient_backend(Backend::Auto, ranks, /*have_nccl=*/true);
  EXPECT_EQ(choice.backend, Backend::Nccl) << choice.reason;
  EXPECT_NE(choice.reason.find("4 GPUs on 1 host"), std::string::npos) << choice.reason;
  EXPECT_EQ(decide_gradient_backend(Backend::Nccl, ranks, true).backend, Backend::Nccl);
}

// The same bus id on two nodes is two GPUs.
TEST(BackendChoice, SameBusIdOnTwoHostsIsTwoGpus) {
  const std::vector<DeviceIdentity> ranks{gpu("node1", "0000:07:00.0"), gpu("node2", "0000:07:00.0")};
  const BackendChoice choice = decide_gradient_backend(Backend::Auto, ranks, true);
  EXPECT_EQ(choice.backend, Backend::Nccl) << choice.reason;
  EXPECT_NE(choice.reason.find("2 GPUs on 2 hosts"), std::string::npos) << choice.reason;
}

// NCCL_HOSTID stands in for the host where it is set (as NCCL's duplicate check reads it): two ranks
// of one GPU with their own ids are two hosts to NCCL (the device check's two-rank world on one GPU).
TEST(BackendChoice, NcclHostIdSeparatesRanksAsNcclDoes) {
  Environment env{{"NCCL_HOSTID", "rank-a"}};
  EXPECT_EQ(device_identity(-1, "node1", env).host, "rank-a");
  EXPECT_EQ(device_identity(-1, "node1", {}).host, "node1");
  EXPECT_EQ(device_identity(-1, "node1", {}).device, "");
}

// Two ranks on one GPU: auto falls back to MPI and says why; --backend nccl names both ranks.
TEST(BackendChoice, SharedGpuIsMpiForAutoAndAnErrorForNccl) {
  const std::vector<DeviceIdentity> ranks{gpu("node1", "0000:07:00.0"), gpu("node1", "0000:0B:00.0"),
                                          gpu("node1", "0000:07:00.0")};
  const BackendChoice choice = decide_gradient_backend(Backend::Auto, ranks, true);
  EXPECT_EQ(choice.backend, Backend::Mpi);
  EXPECT_NE(choice.reason.find("ranks 0 and 2 share GPU 0000:07:00.0 on node1"), std::string::npos) << choice.reason;
  try {
    decide_gradient_backend(Backend::Nccl, ranks, true);
    FAIL() << "--backend nccl accepted two ranks on one GPU";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend nccl: ranks 0 and 2 share GPU 0000:07:00.0"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

TEST(BackendChoice, ARankWithoutGpuOrABuildWithoutNcclIsMpi) {
  const std::vector<DeviceIdentity> mixed{gpu("node1", "0000:07:00.0"), cpu_only("node2")};
  const BackendChoice choice = decide_gradient_backend(Backend::Auto, mixed, true);
  EXPECT_EQ(choice.backend, Backend::Mpi);
  EXPECT_NE(choice.reason.find("rank 1 (node2) has no GPU"), std::string::npos) << choice.reason;
  EXPECT_THROW(decide_gradient_backend(Backend::Nccl, mixed, true), UsageError);

  const std::vector<DeviceIdentity> gpus{gpu("node1", "0000:07:00.0"), gpu("node1", "0000:0B:00.0")};
  const BackendChoice unbuilt = decide_gradient_backend(Backend::Auto, gpus, /*have_nccl=*/false);
  EXPECT_EQ(unbuilt.backend, Backend::Mpi);
  EXPECT_NE(unbuilt.reason.find("built without NCCL"), std::string::npos) << unbuilt.reason;
  EXPECT_EQ(decide_gradient_backend(Backend::Mpi, gpus, true).backend, Backend::Mpi);
}
