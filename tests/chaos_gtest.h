// gtest steps shared by the chaos tests (tests/chaos_test.cc,
// tests/chaos_net_test.cc): the undisturbed run that sets the judge, and one
// seeded run held to every invariant, printed with its seed.
//
//   Judge judge;
//   double seconds = 0;
//   ASSERT_NO_FATAL_FAILURE(RunUndisturbed(harness, "undisturbed", &judge,
//                                          &seconds));
//   RunSeed(harness, 1, MakeSchedule(1, 4, span, layout), judge, span);
#ifndef DOWNPOUR_TESTS_CHAOS_GTEST_H_
#define DOWNPOUR_TESTS_CHAOS_GTEST_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/chaos.h"
#include "tests/daemon_harness.h"

namespace downpour::chaos {

// The suite's runs: this test's binaries and folder, MNIST when fetched, 30
// epochs, a 3-minute bound. Full-disk faults and the lab are the caller's.
inline Options SuiteOptions() {
  Options options;
  options.bin_dir = testing::BinDir();
  options.work_dir = testing::TestDir();
  options.mnist_dir = testing::MnistDir();
  options.epochs = 30;
  options.bound = absl::Minutes(3);
  return options;
}

// Runs the job without faults; it must keep the invariants (nothing lost at
// all). Sets judge->reference_accuracy and *seconds from it.
inline void RunUndisturbed(Harness& harness, const char* what, Judge* judge,
                           double* seconds) {
  absl::StatusOr<Outcome> reference = harness.Run(0, {});
  ASSERT_TRUE(reference.ok()) << reference.status();
  judge->reference_accuracy = reference->observed.accuracy;
  ASSERT_THAT(CheckInvariants(reference->observed, *judge),
              ::testing::IsEmpty())
      << "the undisturbed run; its folder " << reference->run_dir;
  *seconds = reference->observed.seconds;
  std::printf("%s: accuracy %.4f in %.1f s\n", what,
              reference->observed.accuracy, reference->observed.seconds);
}

// Runs `faults` as seed `seed`; every invariant must hold. The run's faults
// as carried out are printed, and with a broken invariant its folder.
// With `lossless` (no fault of the schedule kills a shard's server, so
// every shard always has its acknowledged pushes somewhere), the run must
// also report no loss: the invariants allow a loss from a checkpoint
// recovery, not whether that recovery was needed.
inline void RunSeed(Harness& harness, uint64_t seed,
                    const std::vector<Fault>& faults, const Judge& judge,
                    double span, bool lossless = false) {
  absl::StatusOr<Outcome> run = harness.Run(seed, faults);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::string summary = Summarize(seed, *run);
  std::printf("%s\n", summary.c_str());
  EXPECT_THAT(CheckInvariants(run->observed, judge), ::testing::IsEmpty())
      << summary << "\n(span " << span << " s) run folder " << run->run_dir;
  if (lossless) {
    EXPECT_EQ(run->observed.acked_pushes_lost, 0u)
        << "acknowledged pushes were lost where the schedule allows no "
           "loss: "
        << summary << "\nrun folder " << run->run_dir;
  }
}

}  // namespace downpour::chaos

#endif  // DOWNPOUR_TESTS_CHAOS_GTEST_H_
