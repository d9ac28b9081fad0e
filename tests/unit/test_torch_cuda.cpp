// LibTorch's CUDA half loaded at run time (train/torch_cuda.hpp): after load_torch_cuda(), ATen has
// its real CUDA hooks and CUDA's device guard, though this binary links only LibTorch's CPU half;
// asked about CUDA before the load, ATen keeps "no CUDA" and the load says so instead of a GPU run
// failing later in a kernel launch.
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include "mnddp/build_config.hpp"
#include "mnddp/comm/tensor_comm.hpp"
#include "mnddp/error.hpp"
#include "mnddp/train/torch_cuda.hpp"

namespace mnddp {
namespace {

// Runs first (gtest runs *DeathTest suites first) and in a fresh process (threadsafe style re-executes
// the binary): ATen asked about CUDA before the load.
TEST(TorchCudaDeathTest, ATenAskedFirstIsReported) {
  if (!MNDDP_HAVE_CUDA) GTEST_SKIP() << "this build has no CUDA";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        (void)at::detail::getCUDAHooks().isBuilt();  // settles ATen's answer: the CPU-only stub
        try {
          (void)load_torch_cuda(DeviceRequest::Cuda);
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3), "ATen was asked about CUDA before libtorch_cuda.so was loaded");
}

TEST(TorchCuda, CpuRequestLoadsNothing) {
  const TorchCuda cpu = load_torch_cuda(DeviceRequest::Cpu);
  EXPECT_FALSE(cpu.loaded);
  EXPECT_NE(cpu.detail.find("--device cpu"), std::string::npos) << cpu.detail;
  EXPECT_FALSE(current_stream_of(at::zeros({2})).has_value());  // a host tensor has no stream
}

TEST(TorchCuda, CudaRequestGivesATenItsCudaHalf) {
  if (!MNDDP_HAVE_CUDA) GTEST_SKIP() << "this build has no CUDA";
  const TorchCuda cuda = load_torch_cuda(DeviceRequest::Cuda);
  ASSERT_TRUE(cuda.loaded) << cuda.detail;
  EXPECT_NE(cuda.detail.find("libtorch_cuda.so"), std::string::npos) << cuda.detail;
  EXPECT_TRUE(at::detail::getCUDAHooks().isBuilt());
  EXPECT_GT(at::detail::getCUDAHooks().versionCUDART(), 0);  // the stub throws here
  EXPECT_TRUE(c10::impl::hasDeviceGuardImpl(c10::kCUDA));    // streams, guards: c10_cuda registered
  // Once loaded it stays loaded, whatever a later caller asks.
  EXPECT_TRUE(load_torch_cuda(DeviceRequest::Cpu).loaded);
}

}  // namespace
}  // namespace mnddp
