// Control messages (strings, scalars, the failure agreement) are host values: a device communicator
// (NCCL) would take their host pointers as device pointers. The helpers refuse one (F11 of the GPU
// review) before any byte reaches it.
#include <gtest/gtest.h>

#include "mnddp/comm/communicator.hpp"

using namespace mnddp;

namespace {

// A device communicator that records whether anything reached it.
class DeviceOnly final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend_name() const override { return "device-only"; }
  bool uses_device_memory() const override { return true; }
  void allreduce(void*, std::size_t, DType, ReduceOp) override { ++calls; }
  void broadcast(void*, std::size_t, DType, int) override { ++calls; }
  void allgather(const void*, void*, std::size_t, DType) override { ++calls; }
  void barrier() override { ++calls; }
  std::shared_ptr<CommWork> allreduce_async(void*, std::size_t, DType, ReduceOp, std::optional<CudaStream>) override {
    ++calls;
    return nullptr;
  }
  std::shared_ptr<CommWork> reduce_scatter_async(void*, std::size_t, DType, ReduceOp,
                                                 std::optional<CudaStream>) override {
    ++calls;
    return nullptr;
  }
  std::uint64_t collective_count() const override { return 0; }
  int calls = 0;
};

}  // namespace

TEST(ControlMessages, RefuseADeviceCommunicator) {
  DeviceOnly device;
  std::string text = "hello";
  EXPECT_THROW(broadcast_string(device, text), std::logic_error);
  EXPECT_THROW(allreduce_sum(device, std::int64_t{1}), std::logic_error);
  EXPECT_THROW(allreduce_max(device, std::int64_t{1}), std::logic_error);
  EXPECT_THROW(allreduce_min(device, std::int64_t{1}), std::logic_error);
  EXPECT_THROW(allreduce_sum(device, 1.0), std::logic_error);
  EXPECT_THROW(allgather_strings(device, text), std::logic_error);
  EXPECT_THROW(agree_on_failure(device, std::nullopt), std::logic_error);
  EXPECT_THROW(on_all_then_agree(device, [] {}), std::logic_error);
  EXPECT_EQ(device.calls, 0) << "a host pointer reached the device communicator";
  try {
    broadcast_string(device, text);
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("device-only"), std::string::npos) << e.what();
  }
}
