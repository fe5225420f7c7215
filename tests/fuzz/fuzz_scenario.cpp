// libFuzzer target: scenario loading and `--set` parsing (issue 17, "Fuzzing").
//
// The input is a scenario file, optionally preceded by override lines: every leading line that
// starts with "--set " is one `--set key.path=value`, the rest is the YAML. The input goes through
// what `moesim validate` does (load_scenario_text, then check_scenario_fits) without simulating.
// A located input error (InputError, TimeRangeError) is the expected answer to bad input;
// anything else (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

struct Input {
  std::vector<std::string> overrides;
  std::string yaml;
};

Input split_input(std::string_view text) {
  constexpr std::string_view kSet = "--set ";
  Input in;
  while (text.starts_with(kSet)) {
    const auto nl = text.find('\n');
    in.overrides.emplace_back(text.substr(kSet.size(), nl == std::string_view::npos ? nl : nl - kSet.size()));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  in.yaml = std::string(text);
  return in;
}

/// check_scenario_fits sets every policy and predictor up, which profiles the workload: seconds
/// per input for the largest seeds under the sanitizers (HarMoEny's Qwen scenario at 512 x 128 x 3
/// tokens takes ~50 s). Past these sizes only loading is fuzzed, which keeps ~100 inputs/s.
bool small_enough_to_check(const moesim::Scenario& s) {
  const double tokens = static_cast<double>(s.workload.batch_size) * static_cast<double>(s.workload.seq_len) *
                        static_cast<double>(s.workload.batches);
  return tokens <= 65536 && s.hardware.num_gpus() <= 64 && s.serving_workload.requests <= 1024;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Input in = split_input(std::string_view(reinterpret_cast<const char*>(data), size));
  return moesim::fuzz::run_input("fuzz_scenario", [&] {
    // base_dir: a relative trace or profile path resolves against the seed scenarios' folder.
    const moesim::Scenario s = moesim::load_scenario_text(in.yaml, "fuzz.yaml", in.overrides, "scenarios");
    if (small_enough_to_check(s)) moesim::check_scenario_fits(s);
  });
}
