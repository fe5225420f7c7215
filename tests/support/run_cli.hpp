#pragma once
// Runs the moesim command line in-process with captured output (for CLI contract tests).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/cli.hpp"

namespace moesim::testing_support {

/// What one invocation printed and returned.
struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

/// Runs `moesim ARGS...` and captures stdout and stderr.
inline CliResult run_cli_captured(std::vector<std::string> args) {
  args.insert(args.begin(), "moesim");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CliResult r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data());
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

}  // namespace moesim::testing_support
