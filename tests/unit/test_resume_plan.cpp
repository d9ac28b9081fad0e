// Resuming on another world size: the batch shape that keeps the checkpoint's global batch, the
// refusal where none can, --allow-batch-change, and the epoch position restated in the new shape.
#include <gtest/gtest.h>

#include <string>

#include "mnddp/error.hpp"
#include "mnddp/train/resume_plan.hpp"
#include "test_support.hpp"

namespace mnddp {
namespace {

using testing_support::usage_error_of;

ResumeBatch plan(BatchShape written, BatchShape asked, bool allow = false) {
  return plan_resume_batch(written, asked, allow, "ck/step-40.h5");
}

TEST(ResumePlan, TheSameGlobalBatchKeepsWhatWasAsked) {
  const ResumeBatch same = plan({4, 8, 1}, {2, 16, 1});
  EXPECT_EQ(same.batch_size, 16);
  EXPECT_EQ(same.grad_accum_steps, 1);
  EXPECT_TRUE(same.message.empty());
  EXPECT_FALSE(same.global_batch_changed);
}

TEST(ResumePlan, FewerRanksAccumulateWithTheSameBatch) {
  const ResumeBatch fewer = plan({4, 6, 1}, {2, 6, 1});
  EXPECT_EQ(fewer.batch_size, 6);
  EXPECT_EQ(fewer.grad_accum_steps, 2);
  EXPECT_NE(fewer.message.find("--grad-accum-steps 1 -> 2"), std::string::npos) << fewer.message;
  EXPECT_NE(fewer.message.find("global batch of 24"), std::string::npos) << fewer.message;
  EXPECT_EQ(fewer.message.find("--batch-size 6 ->"), std::string::npos) << fewer.message;
}

TEST(ResumePlan, MoreRanksTakeTheLargestBatchThatDividesNoLargerThanAsked) {
  const ResumeBatch more = plan({2, 6, 1}, {3, 6, 1});  // 12 = 3 x 4
  EXPECT_EQ(more.batch_size, 4);
  EXPECT_EQ(more.grad_accum_steps, 1);
  EXPECT_NE(more.message.find("--batch-size 6 -> 4"), std::string::npos) << more.message;
  const ResumeBatch both = plan({2, 6, 2}, {3, 6, 1});  // 24 = 3 x 8 = 3 x 4 x 2
  EXPECT_EQ(both.batch_size, 4);
  EXPECT_EQ(both.grad_accum_steps, 2);
  EXPECT_NE(both.message.find("--batch-size 6 -> 4 and --grad-accum-steps 1 -> 2"), std::string::npos) << both.message;
  const ResumeBatch prime = plan({1, 7, 2}, {2, 7, 1});  // 14 = 2 x 7
  EXPECT_EQ(prime.batch_size, 7);
  EXPECT_EQ(prime.grad_accum_steps, 1);
  const ResumeBatch ones = plan({1, 1, 10}, {5, 4, 1});  // 10 = 5 x 2: never above what was asked
  EXPECT_EQ(ones.batch_size, 2);
  EXPECT_EQ(ones.grad_accum_steps, 1);
  const ResumeBatch small = plan({2, 9, 1}, {3, 2, 1});  // 18 = 3 x 6 = 3 x 2 x 3
  EXPECT_EQ(small.batch_size, 2);
  EXPECT_EQ(small.grad_accum_steps, 3);
}

TEST(ResumePlan, AWorldSizeThatCannotShareTheGlobalBatchIsRefused) {
  const std::string message = usage_error_of([] { plan({4, 6, 1}, {5, 6, 1}); });
  EXPECT_NE(message.find("--resume 'ck/step-40.h5'"), std::string::npos) << message;
  EXPECT_NE(message.find("global batch of 24 samples (4 ranks x --batch-size 6 x --grad-accum-steps 1)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("run on 1, 2, 3, 4, 6, 8, 12, 24 ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("--allow-batch-change to train on with 30 samples per step"), std::string::npos) << message;
}

TEST(ResumePlan, AllowBatchChangeTrainsOnWithTheAskedBatchAndSaysSo) {
  const ResumeBatch changed = plan({4, 6, 1}, {5, 6, 1}, /*allow=*/true);
  EXPECT_EQ(changed.batch_size, 6);
  EXPECT_EQ(changed.grad_accum_steps, 1);
  EXPECT_TRUE(changed.global_batch_changed);
  EXPECT_NE(changed.message.find("from 24"), std::string::npos) << changed.message;
  EXPECT_NE(changed.message.find("to 30"), std::string::npos) << changed.message;
  // Allowed but not needed: nothing changes.
  EXPECT_TRUE(plan({4, 6, 1}, {2, 12, 1}, true).message.empty());
}

TEST(ResumePlan, TheEpochPositionIsRestatedInTheNewShape) {
  TrainingPosition written;
  written.world_size = 4;
  written.batch_size = 6;
  written.grad_accum_steps = 1;
  written.global_batches_done = 3;  // 72 samples of the epoch
  std::int64_t repeated = -1;
  EXPECT_EQ(micro_batches_done_in(written, {2, 6, 2}, &repeated), 6);  // 3 steps of 2 micro-batches
  EXPECT_EQ(repeated, 0);
  EXPECT_EQ(micro_batches_done_in(written, {3, 4, 2}, &repeated), 6);
  EXPECT_EQ(repeated, 0);
  EXPECT_EQ(micro_batches_done_in(written, {5, 6, 1}, &repeated), 2);  // 60 of 72 samples: 12 again
  EXPECT_EQ(repeated, 12);
  EXPECT_EQ(micro_batches_done_in(written, {1, 10, 4}, &repeated), 4);  // one step of 40
  EXPECT_EQ(repeated, 32);
}

}  // namespace
}  // namespace mnddp
