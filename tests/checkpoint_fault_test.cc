// Checkpoint faults on real daemons (coordinator and ps on loopback): a
// checkpoint volume that fills up shows in the ps's Status (counters and the
// last error) and as DEGRADED in `psctl health`, while the ps keeps serving;
// once space is back, both clear. Decisions read Status and psctl's output,
// never the daemons' logs.
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Makes a checkpoint folder fail writes, and heals it again, the most real way
// this machine allows: a full tiny tmpfs (root that may mount), a folder
// without write permission (not root), or, for root that may not mount, the
// shard's folder replaced by a regular file.
class BrokenDisk {
 public:
  // Prepares `dir` (which must not exist yet) as the checkpoint folder.
  explicit BrokenDisk(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir_);
    if (::geteuid() == 0 &&
        ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=4m") == 0) {
      how_ = How::kFullTmpfs;
    } else {
      how_ = ::geteuid() == 0 ? How::kFileInTheWay : How::kReadOnlyFolder;
    }
  }
  ~BrokenDisk() {
    Heal();
    if (how_ == How::kFullTmpfs) ::umount2(dir_.c_str(), MNT_DETACH);
  }

  std::string description() const {
    switch (how_) {
      case How::kFullTmpfs:
        return "a full 4 MiB tmpfs";
      case How::kReadOnlyFolder:
        return "a folder without write permission";
      case How::kFileInTheWay:
        return "a regular file in place of the folder";
    }
    return "";
  }
  // What the ps's error says.
  std::string expected_error() const {
    switch (how_) {
      case How::kFullTmpfs:
        return "No space left on device";
      case How::kReadOnlyFolder:
        return "Permission denied";
      case How::kFileInTheWay:
        return "Not a directory";
    }
    return "";
  }

  // Writes into the folder fail from now on.
  void Break() {
    const std::string shard = dir_ + "/ps-0";
    switch (how_) {
      case How::kFullTmpfs: {
        // Fill every free byte.
        std::ofstream filler(dir_ + "/filler", std::ios::binary);
        const std::string chunk(64 << 10, '\0');
        struct statvfs fs_info;
        while (::statvfs(dir_.c_str(), &fs_info) == 0 && fs_info.f_bavail > 0 &&
               filler.write(chunk.data(), chunk.size())) {
          filler.flush();
        }
        break;
      }
      case How::kReadOnlyFolder:
        fs::permissions(shard, fs::perms::owner_read | fs::perms::owner_exec);
        break;
      case How::kFileInTheWay:
        fs::rename(shard, dir_ + "/ps-0.moved");
        std::ofstream(shard) << "not a folder";
        break;
    }
    broken_ = true;
  }

  void Heal() {
    if (!broken_) return;
    const std::string shard = dir_ + "/ps-0";
    switch (how_) {
      case How::kFullTmpfs:
        fs::remove(dir_ + "/filler");
        break;
      case How::kReadOnlyFolder:
        fs::permissions(shard, fs::perms::owner_all);
        break;
      case How::kFileInTheWay:
        fs::remove(shard);
        fs::rename(dir_ + "/ps-0.moved", shard);
        break;
    }
    broken_ = false;
  }

 private:
  enum class How { kFullTmpfs, kReadOnlyFolder, kFileInTheWay };
  const std::string dir_;
  How how_;
  bool broken_ = false;
};

class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    disk_ = std::make_unique<BrokenDisk>(dir_ + "/ckpt");
    config_ = testing::WriteConfig(
        "cluster.yaml",
        testing::LoopbackConfig(
            1, 1,
            absl::StrCat("model:\n  layers: [784, 8, 10]\n  block_size: 4096\n"
                         "data:\n  source: synthetic\n"
                         "optimizer:\n  type: sgd\n"
                         "checkpoint:\n  dir: ",
                         dir_, "/ckpt\n  interval_s: 0.2\n  keep: 2\n")));
    auto coordinator = testing::StartDaemon(
        "coordinator", "coordinator/coordinator",
        {"--config", config_, "--port_file", dir_ + "/coordinator.port"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    auto address =
        testing::WaitForPort(*coordinator_, dir_ + "/coordinator.port");
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_address_ = *address;
    auto ps = testing::StartDaemon(
        "ps-0", "server/ps_server",
        {"--config", config_, "--index", "0", "--coordinator",
         coordinator_address_, "--port_file", dir_ + "/ps.port"});
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_ = *std::move(ps);
    auto ps_address = testing::WaitForPort(*ps_, dir_ + "/ps.port");
    ASSERT_TRUE(ps_address.ok()) << ps_address.status();
    ps_address_ = *ps_address;
  }

  void TearDown() override {
    ps_.reset();  // SIGKILL: no final checkpoint into a healed folder
    coordinator_.reset();
    disk_.reset();
  }

  // The ps's Status; an empty reply when it does not answer.
  proto::GetStatusResponse PsStatus() {
    auto stub = proto::Status::NewStub(MakeChannel(ps_address_));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(2));
    proto::GetStatusResponse response;
    if (!stub->GetStatus(&context, proto::GetStatusRequest(), &response).ok()) {
      return proto::GetStatusResponse();
    }
    return response;
  }
  static double Counter(const proto::GetStatusResponse& status,
                        const std::string& name) {
    auto it = status.counters().find(name);
    return it == status.counters().end() ? -1 : it->second;
  }

  struct Exit {
    int status = -1;
    std::string output;
  };
  Exit Psctl(const std::string& name, std::vector<std::string> args) {
    auto process = testing::StartDaemon(name, "tools/psctl", std::move(args));
    EXPECT_TRUE(process.ok()) << process.status();
    if (!process.ok()) return {};
    const std::optional<int> status = (*process)->Wait(absl::Seconds(60));
    EXPECT_TRUE(status.has_value()) << "psctl " << name << " did not finish";
    return {status.value_or(-1), ReadFile((*process)->log_path()).value_or("")};
  }
  // psctl health's line about ps 0.
  std::string PsHealthLine(const std::string& name) {
    const Exit health =
        Psctl(name, {"health", "--coordinator", coordinator_address_});
    for (absl::string_view line : absl::StrSplit(health.output, '\n')) {
      if (absl::StartsWith(line, "ps 0 ")) return std::string(line);
    }
    ADD_FAILURE() << "no line for ps 0 in:\n" << health.output;
    return "";
  }

  std::string dir_;
  std::unique_ptr<BrokenDisk> disk_;
  std::string config_;
  std::unique_ptr<Subprocess> coordinator_;
  std::string coordinator_address_;
  std::unique_ptr<Subprocess> ps_;
  std::string ps_address_;
};

TEST_F(CheckpointFaultTest, FailingCheckpointsShowInStatusAndHealthUntilFixed) {
  SCOPED_TRACE(disk_->description());
  proto::GetStatusResponse status;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        status = PsStatus();
        return Counter(status, "checkpoints_written") >= 1;
      },
      absl::Seconds(30)))
      << "no checkpoint written: " << status.DebugString();
  EXPECT_EQ(status.last_checkpoint_error(), "");
  EXPECT_EQ(Counter(status, "checkpoint_failures"), 0);
  EXPECT_EQ(Counter(status, "checkpoint_fallbacks"), 0);
  EXPECT_GE(Counter(status, "checkpoint_age_s"), 0);
  EXPECT_THAT(PsHealthLine("health-fine"), Not(HasSubstr("DEGRADED")));

  disk_->Break();
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        status = PsStatus();
        return Counter(status, "checkpoint_failures") >= 2;
      },
      absl::Seconds(30)))
      << "no failure counted: " << status.DebugString();
  EXPECT_THAT(status.last_checkpoint_error(),
              HasSubstr(disk_->expected_error()));
  EXPECT_THAT(status.last_checkpoint_error(), HasSubstr(dir_ + "/ckpt/ps-0"));
  // The last good checkpoint is older than the failures since.
  EXPECT_GT(Counter(status, "checkpoint_age_s"), 0.2);

  const std::string degraded = PsHealthLine("health-degraded");
  EXPECT_THAT(degraded, HasSubstr("DEGRADED (serving, but its last checkpoint "
                                  "failed: "));
  EXPECT_THAT(degraded, HasSubstr(disk_->expected_error()));
  // grpc health stays SERVING: a probe must not restart a ps whose memory
  // holds the only copy of its newest updates.
  const Exit probe =
      Psctl("health-probe", {"health", "--address", ps_address_});
  EXPECT_EQ(probe.status, 0) << probe.output;
  EXPECT_THAT(probe.output, HasSubstr("DEGRADED"));

  disk_->Heal();
  const double written = Counter(status, "checkpoints_written");
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        status = PsStatus();
        return Counter(status, "checkpoints_written") > written &&
               status.last_checkpoint_error().empty();
      },
      absl::Seconds(30)))
      << "checkpoints did not recover: " << status.DebugString();
  EXPECT_LT(Counter(status, "checkpoint_age_s"), 5);
  EXPECT_THAT(PsHealthLine("health-healed"), Not(HasSubstr("DEGRADED")));
  EXPECT_EQ(ps_->Poll(), std::nullopt) << "the ps kept running throughout";
}

}  // namespace
}  // namespace downpour
