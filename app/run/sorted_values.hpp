#pragma once
// Sorting a run's latency samples for their percentiles. A serving run keeps one inter-token gap
// per output token (1.2 M at EP72 decode), and sorting them was a fifth of a fast run's time.
// Latencies are never negative, and non-negative IEEE doubles order as their bit patterns do as
// unsigned integers, so a radix sort on those bits gives std::sort's sequence, bit for bit.
#include <vector>

namespace moesim {

/// Sorts `v` ascending: the same sequence std::sort gives. Least-significant-digit radix sort on
/// the bit patterns when every value is a non-negative number (+0 included, -0 and NaN not),
/// std::sort otherwise and for short vectors.
void sort_values(std::vector<double>& v);

}  // namespace moesim
