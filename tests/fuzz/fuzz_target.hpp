#pragma once
// What every libFuzzer target does with the verdict on one input: a located input error (or an
// input too extreme to simulate) is the expected answer to bad input and ends the input; any other
// exception is a finding, reported and aborted on so that libFuzzer saves the input.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/diagnostics.hpp"
#include "sim/tick.hpp"

namespace moesim::fuzz {

[[noreturn]] inline void finding(const char* target, const char* what) {
  std::fprintf(stderr, "%s: internal error: %s\n", target, what);
  std::abort();
}

/// Runs `one_input()` for libFuzzer target `target`; returns LLVMFuzzerTestOneInput's 0.
template <typename F>
int run_input(const char* target, F&& one_input) {
  try {
    one_input();
  } catch (const InputError&) {
  } catch (const TimeRangeError&) {
  } catch (const std::exception& e) {
    finding(target, e.what());
  } catch (...) {
    finding(target, "a non-standard exception");
  }
  return 0;
}

}  // namespace moesim::fuzz
