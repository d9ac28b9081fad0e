// The host-wait counter (host_waits.hpp): mnddp's own waits, and with libmnddp_host_waits.so
// preloaded every blocking CUDA runtime call of the process, whoever makes it. Run twice by CTest:
// with the library preloaded (MNDDP_EXPECT_INTERPOSED=1) and without. No GPU needed: without a driver
// the runtime's calls return an error at once, and the interposer has counted them by then.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "mnddp/build_config.hpp"
#include "mnddp/host_waits.hpp"

#if MNDDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace mnddp;

namespace {

bool expect_interposed() {
  const char* value = std::getenv("MNDDP_EXPECT_INTERPOSED");
  return value != nullptr && std::string(value) == "1";
}

}  // namespace

TEST(HostWaits, OwnWaitsAreCounted) {
  const std::uint64_t before = host_waits();
  note_host_wait();
  note_host_wait();
  EXPECT_EQ(host_waits() - before, 2u);
}

TEST(HostWaits, BlockingCudaCallsAreCountedWhereTheInterposerIsLoaded) {
  ASSERT_EQ(host_waits_interposed(), expect_interposed());
#if MNDDP_HAVE_CUDA
  const std::uint64_t before = host_waits();
  (void)cudaStreamSynchronize(nullptr);
  (void)cudaDeviceSynchronize();
  (void)cudaEventSynchronize(nullptr);
  int value = 0;
  (void)cudaMemcpy(&value, &value, sizeof(value), cudaMemcpyHostToHost);
  (void)cudaStreamQuery(nullptr);  // a query is no wait
  EXPECT_EQ(host_waits() - before, expect_interposed() ? 4u : 0u);
#else
  GTEST_SKIP() << "this build has no CUDA runtime to interpose";
#endif
}
