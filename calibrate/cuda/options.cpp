// Parsing of moesim-calibrate's command line; every malformed value is named in the error.
#include "options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace moesim::calib {

namespace {

[[noreturn]] void usage_error(const std::string& message) {
  fail(kExitUsage, message + " (see moesim-calibrate --help)");
}

/// Splits "a,b,c" into its comma-separated fields (empty fields are kept and rejected later).
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

/// A positive integer, or a usage error naming the option.
std::int64_t parse_positive(std::string_view text, const std::string& option) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value <= 0) {
    usage_error(option + ": expected a positive integer, got '" + std::string(text) + "'");
  }
  return value;
}

/// A byte count with an optional binary suffix: 4096, 64K, 16M, 1G (KiB, MiB, GiB accepted).
std::int64_t parse_bytes(std::string_view text, const std::string& option) {
  std::int64_t scale = 1;
  for (const auto& [suffix, factor] : {std::pair<std::string_view, std::int64_t>{"KiB", 1LL << 10},
                                       {"MiB", 1LL << 20}, {"GiB", 1LL << 30}, {"K", 1LL << 10},
                                       {"M", 1LL << 20}, {"G", 1LL << 30}}) {
    if (text.size() > suffix.size() && text.substr(text.size() - suffix.size()) == suffix) {
      scale = factor;
      text.remove_suffix(suffix.size());
      break;
    }
  }
  const std::int64_t value = parse_positive(text, option);
  if (value > (std::int64_t{1} << 40) / scale) usage_error(option + ": more than 1 TiB");
  return value * scale;
}

/// --sizes: "LO:HI" (powers of two from LO to HI) or a comma list of byte counts.
std::vector<std::int64_t> parse_sizes(std::string_view text) {
  std::vector<std::int64_t> sizes;
  if (const std::size_t colon = text.find(':'); colon != std::string_view::npos) {
    const std::int64_t lo = parse_bytes(text.substr(0, colon), "--sizes");
    const std::int64_t hi = parse_bytes(text.substr(colon + 1), "--sizes");
    if (lo > hi) usage_error("--sizes: LO must not exceed HI in '" + std::string(text) + "'");
    for (std::int64_t s = lo; s <= hi; s *= 2) sizes.push_back(s);
    return sizes;
  }
  for (std::string_view part : split(text, ',')) sizes.push_back(parse_bytes(part, "--sizes"));
  return sizes;
}

/// The value after an option, or a usage error if the command line ends there.
std::string_view next_value(int& i, int argc, char** argv) {
  if (i + 1 >= argc) usage_error(std::string(argv[i]) + ": missing value");
  return argv[++i];
}

}  // namespace

std::string usage() {
  return R"(usage: moesim-calibrate COMMAND [options]

Measures cuBLAS GEMMs, memory copies and NCCL collectives on this machine's GPUs and writes
one JSON measurement file ("moesim-measurements/1") for `moesim calibrate fit`.

commands:
  gemm            cuBLAS GEMM C[m,n] = A[m,k]·W[k,n] over the M sweep for every N:K and dtype
                  (fp8 through cuBLASLt on compute capability >= 8.9)
  grouped-gemm    one grouped GEMM over E experts with a skewed token split per total M
  memcpy          host<->device (pinned and pageable), device->device, peer-to-peer pairs
  nccl            all_reduce, all_gather, all_to_all, send_recv over all visible GPUs
  all             everything above

options:
  --out FILE          output file (default calibration.json); rewritten after each section
  --dtypes LIST       GEMM types among fp16,bf16,fp32,fp8 (default fp16,bf16,fp32,fp8)
  --nk N:K,...        weight shapes (default 4096:14336,14336:4096,4096:4096,2048:1408,
                      1408:2048,768:3072,3072:768)
  --m-sweep M,...     token counts (default 1,2,4,...,16384, dense at the small end)
  --repeats N         timed repeats, the median is reported (default 20)
  --warmup N          untimed launches first (default 5)
  --experts E         grouped GEMM experts (default 8)
  --skew S            grouped GEMM: p_i ~ 1/E + S for the first max(1, E/10) experts (default 0.6)
  --sizes LO:HI|LIST  memcpy and NCCL bytes, e.g. 1K:1G or 4096,1M (default 1K:1G)
  --gpus N            use only the first N GPUs for p2p and NCCL (default: all)
  --help              this text

exit status: 0 success, 2 bad command line, 3 no CUDA device, 4 CUDA/cuBLAS/NCCL error,
             1 output file not writable
)";
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.sizes.clear();
  for (std::int64_t s = 1LL << 10; s <= 1LL << 30; s *= 2) o.sizes.push_back(s);

  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--out") {
      o.out = std::string(next_value(i, argc, argv));
    } else if (arg == "--dtypes") {
      o.dtypes.clear();
      for (std::string_view part : split(next_value(i, argc, argv), ',')) {
        Dtype t{};
        if (!parse_dtype(part, t)) {
          usage_error("--dtypes: unknown dtype '" + std::string(part) + "' (valid: fp16, bf16, fp32, fp8)");
        }
        o.dtypes.push_back(t);
      }
    } else if (arg == "--nk") {
      o.nk.clear();
      for (std::string_view part : split(next_value(i, argc, argv), ',')) {
        const std::size_t colon = part.find(':');
        if (colon == std::string_view::npos) usage_error("--nk: expected N:K, got '" + std::string(part) + "'");
        o.nk.emplace_back(parse_positive(part.substr(0, colon), "--nk"),
                          parse_positive(part.substr(colon + 1), "--nk"));
      }
    } else if (arg == "--m-sweep") {
      o.m_sweep.clear();
      for (std::string_view part : split(next_value(i, argc, argv), ',')) {
        o.m_sweep.push_back(parse_positive(part, "--m-sweep"));
      }
    } else if (arg == "--repeats") {
      o.repeats = static_cast<int>(parse_positive(next_value(i, argc, argv), "--repeats"));
    } else if (arg == "--warmup") {
      const std::string_view v = next_value(i, argc, argv);
      o.warmup = v == "0" ? 0 : static_cast<int>(parse_positive(v, "--warmup"));
    } else if (arg == "--experts") {
      o.experts = static_cast<int>(parse_positive(next_value(i, argc, argv), "--experts"));
    } else if (arg == "--skew") {
      const std::string v(next_value(i, argc, argv));
      char* end = nullptr;
      o.skew = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !std::isfinite(o.skew) || o.skew < 0.0) {
        usage_error("--skew: expected a non-negative number, got '" + v + "'");
      }
    } else if (arg == "--sizes") {
      o.sizes = parse_sizes(next_value(i, argc, argv));
    } else if (arg == "--gpus") {
      o.gpus = static_cast<int>(parse_positive(next_value(i, argc, argv), "--gpus"));
    } else if (!arg.empty() && arg[0] == '-') {
      usage_error("unknown option '" + std::string(arg) + "'");
    } else if (o.command.empty()) {
      o.command = std::string(arg);
    } else {
      usage_error("unexpected argument '" + std::string(arg) + "'");
    }
  }
  if (o.help) return o;
  if (o.command.empty()) usage_error("missing COMMAND (gemm, grouped-gemm, memcpy, nccl or all)");
  if (o.command != "gemm" && o.command != "grouped-gemm" && o.command != "memcpy" && o.command != "nccl" &&
      o.command != "all") {
    usage_error("unknown command '" + o.command + "' (valid: gemm, grouped-gemm, memcpy, nccl, all)");
  }
  // cuBLAS takes int dimensions; these bounds also keep every buffer size far from overflow.
  for (std::int64_t m : o.m_sweep) {
    if (m > (1LL << 24)) usage_error("--m-sweep: " + std::to_string(m) + " is larger than 16777216");
  }
  for (const auto& [n, k] : o.nk) {
    if (n > (1LL << 20) || k > (1LL << 20)) usage_error("--nk: N and K must not exceed 1048576");
  }
  if (o.experts > 4096) usage_error("--experts: at most 4096");
  return o;
}

bool wants(const Options& options, const std::string& section) {
  return options.command == "all" || options.command == section;
}

}  // namespace moesim::calib
