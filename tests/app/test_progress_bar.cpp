// The progress bar of `run`, `sweep` and `guideline`: what it draws, and that it draws only
// when enabled (the CLI enables it for a terminal; tests/app/test_progress_tty.sh runs one).
#include <gtest/gtest.h>

#include "app/run/progress_bar.hpp"

namespace moesim {
namespace {

TEST(ProgressBar, RendersBarCountsElapsedAndEta) {
  EXPECT_EQ(ProgressBar::render("run", "batches", 10, 0, 5, 20.0),
            "run [###############---------------] 5/10 batches  elapsed 0:00:20  ETA 0:00:20");
  // A resumed sweep's ETA counts only the units done in this invocation: 2 in 10 s, 6 to go.
  EXPECT_EQ(ProgressBar::render("sweep", "points", 12, 4, 6, 10.0),
            "sweep [###############---------------] 6/12 points  elapsed 0:00:10  ETA 0:00:30");
  EXPECT_EQ(ProgressBar::render("guideline", "cells", 4, 0, 0, 0.0),
            "guideline [------------------------------] 0/4 cells  elapsed 0:00:00  ETA --:--:--");
  EXPECT_EQ(ProgressBar::render("run", "batches", 3, 0, 3, 3725.0),
            "run [##############################] 3/3 batches  elapsed 1:02:05  ETA 0:00:00");
}

TEST(ProgressBar, DrawsOnStderrOnlyWhenEnabledAndEndsItsLine) {
  testing::internal::CaptureStderr();
  {
    ProgressBar off("run", "batches", 2, 0, false);
    off.advance();
    off.advance();
    off.finish();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  ProgressBar on("run", "batches", 2, 0, true);
  on.advance();  // the first draw is immediate
  on.advance();  // the last is always drawn
  on.finish();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("\rrun [###############---------------] 1/2 batches", 0), 0u) << err;
  EXPECT_NE(err.find("\rrun [##############################] 2/2 batches"), std::string::npos) << err;
  EXPECT_TRUE(err.ends_with("\n")) << err;
}

}  // namespace
}  // namespace moesim
