// TrainingConfig -> the modules' options (train/module_options.cpp): the rules that tie options
// together there.
#include <gtest/gtest.h>

#include "mnddp/train/module_options.hpp"

using namespace mnddp;

// SyncBatchNorm's backward all-reduces share the gradient communicator with the buckets; with
// --find-unused-parameters a rank that used fewer parameters would complete a bucket at another
// point among them, so the buckets wait for finalize() (F10 of the GPU review). Either alone keeps
// the overlap.
TEST(ModuleOptions, SyncBatchNormWithFindUnusedParametersTurnsTheOverlapOff) {
  TrainingConfig config;
  EXPECT_TRUE(ddp_options(config).reducer.overlap);
  config.sync_batch_norm = true;
  EXPECT_TRUE(ddp_options(config).reducer.overlap);
  config.find_unused_parameters = true;
  EXPECT_FALSE(ddp_options(config).reducer.overlap);
  config.sync_batch_norm = false;
  EXPECT_TRUE(ddp_options(config).reducer.overlap);
}
