// The checkpoint directory as a place others can write to (a group-shared project or scratch
// directory): `latest` leads nowhere but to a committed file of the directory, no temporary is
// written through a symlink planted under its name, and the start-up sweep removes only mnddp's own
// temporaries that a dead run left. On 1 and 2 ranks (the sweep and `latest` are root's work, the
// save is collective).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "mnddp/ckpt/checkpoint_file.hpp"
#include "mnddp/ckpt/checkpoint_manager.hpp"
#include "mnddp/comm/mpi_comm.hpp"
#include "mnddp/safe_files.hpp"
#include "test_support.hpp"

using namespace mnddp;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// A scratch root on rank 0, shared by name: "ckpt" is the checkpoint directory, the rest of the
// root stands for the files beside it an attacker would aim at.
class CheckpointDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path;
    if (comm.is_root()) {
      owner.emplace("mnddp-ckpt-dir");
      path = owner->path().string();
      fs::create_directories(fs::path(path) / "ckpt");
    }
    broadcast_string(comm, path, 0);
    root = path;
    directory = (root / "ckpt").string();
  }
  void TearDown() override { comm.barrier(); }

  std::string save(CheckpointManager& manager, std::int64_t step) {
    const std::vector<float> values(16, static_cast<float>(step));
    return manager.save(
        step, values.size() * sizeof(float),
        [&](ParallelCheckpointWriter& writer) {
          writer.write({"model/w", DType::F32, {16}, values.data()});
          writer.close();
        },
        comm);
  }

  MpiComm comm;
  std::optional<testing_support::TempDir> owner;
  fs::path root;
  std::string directory;
};

TEST_F(CheckpointDirectoryTest, LatestNamingAPathIsIgnoredAndWhatItNamesIsUntouched) {
  for (const std::string& named :
       {std::string("../victim.h5"), (root / "victim.h5").string(), std::string("step-1.h5/..")}) {
    if (comm.is_root()) {
      write_file(root / "victim.h5", "training data, not a checkpoint");
      write_file(fs::path(directory) / "latest", named + "\n");
    }
    comm.barrier();
    EXPECT_EQ(CheckpointManager::resolve_resume(comm, directory, ResumeFrom{}), "") << named;
    if (comm.is_root()) {
      EXPECT_EQ(read_all(root / "victim.h5"), "training data, not a checkpoint") << named;
      EXPECT_FALSE(fs::exists(root / "victim.h5.corrupt")) << named;
    }
  }
}

TEST_F(CheckpointDirectoryTest, NoTemporaryIsWrittenThroughAPlantedSymlink) {
  CheckpointManager manager(directory, 3, comm);
  // Planted after the start-up sweep, under every name a temporary had before.
  const std::vector<std::string> planted = {"latest.tmp", "step-00000001.h5.tmp", "best.h5.tmp", "best.json.tmp",
                                            "stop-reason.tmp"};
  if (comm.is_root()) {
    for (const auto& name : planted) {
      write_file(root / ("victim-" + name), "keep me");
      fs::create_symlink(root / ("victim-" + name), fs::path(directory) / name);
    }
    write_file(root / "victim-latest", "keep me");
    fs::create_symlink(root / "victim-latest", fs::path(directory) / "latest");
  }
  comm.barrier();
  const std::string committed = save(manager, 1);
  if (comm.is_root()) {
    manager.keep_as_best(committed, "loss", 0.5, 1);
    replace_file(directory, "stop-reason", "deadline\n");
    for (const auto& name : planted) EXPECT_EQ(read_all(root / ("victim-" + name)), "keep me") << name;
    EXPECT_EQ(read_all(root / "victim-latest"), "keep me");
    // `latest` itself was replaced, the symlink with it: a plain file naming the checkpoint.
    EXPECT_EQ(fs::symlink_status(fs::path(directory) / "latest").type(), fs::file_type::regular);
    EXPECT_EQ(read_all(fs::path(directory) / "latest"), "step-00000001.h5\n");
    EXPECT_EQ(fs::symlink_status(fs::path(directory) / "best.json").type(), fs::file_type::regular);
  }
  if (comm.is_root()) {
    EXPECT_EQ(CheckpointManager::committed_in(directory), std::vector<std::string>{committed});
  }
}

TEST_F(CheckpointDirectoryTest, TheSweepTakesOnlyOurTemporariesThatADeadRunLeft) {
  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  const std::vector<std::string> ours = {"step-00000003.h5.tmp", "step-00000004.h5.0123456789abcdef.tmp",
                                         "latest.tmp",           "latest.fedcba9876543210.tmp",
                                         "best.json.tmp",        "stop-reason.00000000000000ff.tmp"};
  const std::vector<std::string> not_ours = {"notes.tmp", "step-x.h5.tmp", "latest.0123.tmp", "data.h5.tmp"};
  if (comm.is_root()) {
    for (const auto& name : ours) write_file(fs::path(directory) / name, "old");
    for (const auto& name : not_ours) write_file(fs::path(directory) / name, "a user's");
    for (const auto& name : ours) fs::last_write_time(fs::path(directory) / name, an_hour_ago);
    for (const auto& name : not_ours) fs::last_write_time(fs::path(directory) / name, an_hour_ago);
    // A live writer's temporary (written after this process started) and a symlink are left alone.
    write_file(fs::path(directory) / "step-00000005.h5.aaaaaaaaaaaaaaaa.tmp", "being written");
    write_file(root / "target", "keep me");
    fs::create_symlink(root / "target", fs::path(directory) / "latest.bbbbbbbbbbbbbbbb.tmp");
  }
  comm.barrier();
  CheckpointManager manager(directory, 3, comm);
  if (comm.is_root()) {
    for (const auto& name : ours) EXPECT_FALSE(fs::exists(fs::path(directory) / name)) << name;
    for (const auto& name : not_ours) EXPECT_TRUE(fs::exists(fs::path(directory) / name)) << name;
    EXPECT_TRUE(fs::exists(fs::path(directory) / "step-00000005.h5.aaaaaaaaaaaaaaaa.tmp"));
    EXPECT_TRUE(fs::is_symlink(fs::path(directory) / "latest.bbbbbbbbbbbbbbbb.tmp"));
    EXPECT_EQ(read_all(root / "target"), "keep me");
  }
}

TEST_F(CheckpointDirectoryTest, NamesWithoutAStepNumberAreNotCheckpoints) {
  if (comm.is_root()) {
    write_file(fs::path(directory) / "step-foo.h5", "x");
    write_file(fs::path(directory) / "step-.h5", "x");
  }
  comm.barrier();
  CheckpointManager manager(directory, 3, comm);
  const std::string committed = save(manager, 2);
  if (comm.is_root()) {
    EXPECT_EQ(CheckpointManager::committed_in(directory), std::vector<std::string>{committed});
  }
  EXPECT_NO_THROW(CheckpointManager::set_aside_newer(comm, directory, 1));
  if (comm.is_root()) {
    EXPECT_TRUE(fs::exists(fs::path(directory) / "step-foo.h5"));
  }
}

TEST(SafeFiles, TemporariesAreUniqueAndRecognised) {
  const std::string a = fs::path(temporary_path("/d", "latest")).filename().string();
  const std::string b = fs::path(temporary_path("/d", "latest")).filename().string();
  EXPECT_NE(a, b);
  EXPECT_TRUE(is_temporary_of(a, "latest"));
  EXPECT_TRUE(is_temporary_of("latest.tmp", "latest"));
  EXPECT_FALSE(is_temporary_of(a, "best.json"));
  EXPECT_FALSE(is_temporary_of("latest.0123456789abcdeg.tmp", "latest"));
}

}  // namespace
