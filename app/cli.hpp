#pragma once
// The moesim command line: run, validate, list, cost. Exit codes: 0 success, 2 bad input
// (every problem printed as file:line:col: error: ...), 1 internal error.
namespace moesim {

int run_cli(int argc, char** argv);

/// Subcommands implemented in their own files.
int cli_list(const char* what);
int cli_cost_gemm(const char* gpu, long long m, long long n, long long k, const char* dtype, bool json);
int cli_cost_collective(const char* kind, const char* hardware, int gpus, double bytes, bool json);

}  // namespace moesim
