// libFuzzer target: the serving request-trace reader (issue 30, "fuzz targets extended to serving
// traces").
//
// The input is a trace CSV (arrived_at_s,prompt_tokens,output_tokens). parse_request_trace must
// refuse it with every problem located at a line and column of the file, or return rows sorted by
// arrival, with finite times >= 0 and token counts >= 1; replayed as a serving workload, those
// rows must become requests in arrival order with the rows' lengths (tests/fuzz/fuzz_inputs.hpp).
// InputError is the expected answer to bad input (TimeRangeError to arrivals past simulated
// time's range); anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_inputs.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return moesim::fuzz::run_input("fuzz_trace", [&] { moesim::fuzz::trace_input(std::string(reinterpret_cast<const char*>(data), size)); });
}
