#pragma once
// Request traces: a CSV with one request per row, in the Splitwise / Azure LLM inference trace
// convention that Vidur replays: columns `arrived_at_s,prompt_tokens,output_tokens` (any order;
// extra columns are allowed and ignored). Rows must be sorted by arrival time (ties allowed).
// Every problem is an InputError located at FILE:LINE:COL of the offending cell.
#include <cstdint>
#include <string>
#include <vector>

namespace moesim {

/// One row of a request trace.
struct TraceRequest {
  double arrived_at_s = 0.0;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  int line = 0;  ///< 1-based line in the CSV (for diagnostics)
};

/// Reads `path`. Throws InputError listing every problem (missing file or a directory: located
/// at the path with line 0; a missing column: at the header line; a bad cell: at its line and
/// column; no rows: at the end of the file).
std::vector<TraceRequest> read_request_trace(const std::string& path);
/// Same, from CSV text (tests); `file` names it in diagnostics.
std::vector<TraceRequest> parse_request_trace(const std::string& text, const std::string& file);

}  // namespace moesim
