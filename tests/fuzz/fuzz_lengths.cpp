// libFuzzer target: the length distributions of the serving workload (issue 30, "fuzz targets
// extended to ... length distributions").
//
// The first byte's low bit picks `workload.prompt_tokens` (0) or `output_tokens` (1); the rest is
// its YAML value (an integer, {dist: fixed|uniform|normal|zipf, ...}, or anything else), loaded
// in a minimal serving scenario by load_scenario_text. A distribution that loads must keep its
// bounds and mean within [1, 1e8] tokens (docs/design.md, "Input limits"), and 64 requests drawn from it
// (the workload only: nothing is simulated) must have lengths within those bounds
// (tests/fuzz/fuzz_inputs.hpp). InputError is the expected answer to bad input (TimeRangeError
// to arrivals past simulated time's range); anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_inputs.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return moesim::fuzz::run_input("fuzz_lengths", [&] { moesim::fuzz::length_input(std::string_view(reinterpret_cast<const char*>(data), size)); });
}
