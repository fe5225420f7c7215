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
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/diagnostics.hpp"
#include "sim/tick.hpp"
#include "tests/fuzz/fuzz_inputs.hpp"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_trace: internal error: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    moesim::fuzz::trace_input(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const moesim::InputError&) {
  } catch (const moesim::TimeRangeError&) {
  } catch (const std::exception& e) {
    finding(e.what());
  } catch (...) {
    finding("a non-standard exception");
  }
  return 0;
}
