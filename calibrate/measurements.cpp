// Measurement files: the moesim JSON format (write, validate, read), merging, and the loader
// that recognises each supported format by its content.
#include "calibrate/measurements.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/diagnostics.hpp"
#include "core/json_input.hpp"

namespace moesim::calibration {
namespace {

using nlohmann::json;

const std::vector<std::string> kDtypes = {"fp32", "fp16", "bf16", "fp8"};
const std::vector<std::string> kCopyKinds = {"h2d_pinned", "h2d_pageable", "d2h_pinned",
                                             "d2h_pageable", "d2d", "p2p"};
const std::vector<std::string> kCollectiveOps = {"all_reduce", "all_gather", "all_to_all", "send_recv"};

/// nccl-tests' bus-bandwidth factor, written beside each collective so a human reading the
/// file can compare it with nccl-tests output directly.
double bus_factor(const std::string& op, int gpus) {
  const double n = gpus;
  if (op == "all_reduce") return 2.0 * (n - 1.0) / n;
  if (op == "all_gather" || op == "all_to_all") return (n - 1.0) / n;
  return 1.0;
}

/// Reads the fields of one JSON object, recording every problem (prefixed with `where`, e.g.
/// "gemm[3]") instead of stopping at the first, so one run reports all of a file's mistakes.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string where, std::vector<std::string>& errors)
      : obj_(obj), where_(std::move(where)), errors_(errors) {}

  std::string choice(const char* key, const std::vector<std::string>& valid, const char* what) {
    const json* v = find(key, true);
    if (!v) return {};
    if (!v->is_string()) {
      fail(key, "must be a string");
      return {};
    }
    std::string s = v->get<std::string>();
    if (std::find(valid.begin(), valid.end(), s) == valid.end()) fail(key, unknown_name_message(what, s, valid));
    return s;
  }

  /// An integer in [min, max]; `fallback` makes the key optional.
  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max, std::optional<std::int64_t> fallback = {}) {
    const json* v = find(key, !fallback);
    if (!v) return fallback.value_or(0);
    return to_integer(*v, key, min, max);
  }

  /// A finite number > 0 (times, byte counts).
  double positive(const char* key) {
    const json* v = find(key, true);
    if (!v) return 0.0;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0.0) {
      fail(key, "must be a positive number, got " + v->dump());
      return 0.0;
    }
    return v->get<double>();
  }

  std::vector<std::int64_t> integers(const char* key, std::int64_t min, std::int64_t max) {
    std::vector<std::int64_t> out;
    const json* v = find(key, false);
    if (!v) return out;
    if (!v->is_array()) {
      fail(key, "must be an array of integers");
      return out;
    }
    for (std::size_t i = 0; i < v->size(); ++i)
      out.push_back(to_integer((*v)[i], std::string(key) + "[" + std::to_string(i) + "]", min, max));
    return out;
  }

  /// Unknown keys are errors: a misspelt optional field ("groupm") would otherwise vanish.
  void only(const std::vector<std::string>& allowed) {
    for (const auto& [key, value] : obj_.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        errors_.push_back(where_ + ": " + unknown_name_message("field", key, allowed));
  }

  void fail(const std::string& key, const std::string& message) {
    errors_.push_back(where_ + "." + key + ": " + message);
  }

 private:
  const json* find(const char* key, bool required) {
    const auto it = obj_.find(key);
    if (it != obj_.end()) return &*it;
    if (required) errors_.push_back(where_ + ": missing required field \"" + key + "\"");
    return nullptr;
  }

  std::int64_t to_integer(const json& v, const std::string& key, std::int64_t min, std::int64_t max) {
    // Accept 64.0 as well as 64: writers in other languages do not always keep the distinction.
    const bool integral = v.is_number_integer() ||
                          (v.is_number_float() && std::isfinite(v.get<double>()) &&
                           std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 9e15);
    if (!integral) {
      fail(key, "must be an integer, got " + v.dump());
      return 0;
    }
    // An unsigned value past int64's range is too large for any field (and would wrap).
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      fail(key, "must be at most " + std::to_string(max) + ", got " + v.dump());
      return 0;
    }
    const auto n = v.is_number_float() ? static_cast<std::int64_t>(v.get<double>()) : v.get<std::int64_t>();
    if (n < min) fail(key, "must be at least " + std::to_string(min) + ", got " + std::to_string(n));
    else if (n > max) fail(key, "must be at most " + std::to_string(max) + ", got " + std::to_string(n));
    return n;
  }

  const json& obj_;
  std::string where_;
  std::vector<std::string>& errors_;
};

/// Calls `read(element, reader)` for each object of the optional array `key`.
template <class Read>
void read_array(const json& j, const char* key, std::vector<std::string>& errors, Read read) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  if (!it->is_array()) {
    errors.push_back(std::string(key) + ": must be an array");
    return;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    if (!(*it)[i].is_object()) {
      errors.push_back(where + ": must be an object");
      continue;
    }
    FieldReader r((*it)[i], where, errors);
    read(r);
  }
}

std::string optional_string(const json& j, const char* key, std::vector<std::string>& errors) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  errors.push_back(std::string(key) + ": must be a string");
  return {};
}

Measurements parse(const json& j, std::vector<std::string>& errors) {
  Measurements m;
  if (!j.is_object()) {
    errors.push_back("the top level must be a JSON object");
    return m;
  }
  // A wrong format means the rest follows other rules: report that alone.
  const auto format = j.find("format");
  const std::string expected = std::string("(expected \"") + kMeasurementsFormat + "\")";
  if (format == j.end()) {
    errors.push_back("missing \"format\" " + expected);
    return m;
  }
  if (!format->is_string() || format->get<std::string>() != kMeasurementsFormat) {
    errors.push_back("unsupported format " + format->dump() + " " + expected);
    return m;
  }
  const std::vector<std::string> top = {"format", "source", "device", "environment",
                                        "gemm", "memcpy", "collectives", "skipped"};
  for (const auto& [key, value] : j.items())
    if (std::find(top.begin(), top.end(), key) == top.end())
      errors.push_back(unknown_name_message("top-level field", key, top));

  m.source = optional_string(j, "source", errors);
  m.device = optional_string(j, "device", errors);
  m.environment = json::object();
  if (const auto env = j.find("environment"); env != j.end() && !env->is_null()) {
    if (env->is_object()) m.environment = *env;
    else errors.push_back("environment: must be an object");
  }

  read_array(j, "gemm", errors, [&](FieldReader& r) {
    r.only({"dtype", "m", "n", "k", "group_m", "time_us"});
    GemmSample g;
    g.dtype = r.choice("dtype", kDtypes, "dtype");
    g.m = r.integer("m", 1, kMaxGemmDim);
    g.n = r.integer("n", 1, kMaxGemmDim);
    g.k = r.integer("k", 1, kMaxGemmDim);
    g.group_m = r.integers("group_m", 0, kMaxGemmDim);  // an expert that received no tokens is a 0-row group
    g.time_us = r.positive("time_us");
    std::int64_t sum = 0;
    for (auto rows : g.group_m) sum += rows;
    if (!g.group_m.empty() && sum != g.m)
      r.fail("group_m", "sums to " + std::to_string(sum) + " but m is " + std::to_string(g.m));
    m.gemm.push_back(std::move(g));
  });
  read_array(j, "memcpy", errors, [&](FieldReader& r) {
    r.only({"kind", "src", "dst", "bytes", "time_us"});
    MemcpySample c;
    c.kind = r.choice("kind", kCopyKinds, "copy kind");
    c.src = static_cast<int>(r.integer("src", 0, kMaxGpus - 1, 0));
    c.dst = static_cast<int>(r.integer("dst", 0, kMaxGpus - 1, 0));
    c.bytes = r.positive("bytes");
    c.time_us = r.positive("time_us");
    m.memcpy.push_back(std::move(c));
  });
  read_array(j, "collectives", errors, [&](FieldReader& r) {
    r.only({"op", "gpus", "nodes", "bytes", "time_us", "algbw_GBps", "busbw_GBps"});
    CollectiveSample c;
    c.op = r.choice("op", kCollectiveOps, "collective op");
    c.gpus = static_cast<int>(r.integer("gpus", 1, kMaxGpus));
    c.nodes = static_cast<int>(r.integer("nodes", 1, kMaxGpus));
    c.bytes = r.positive("bytes");
    c.time_us = r.positive("time_us");
    if (c.nodes > c.gpus && c.gpus >= 1)
      r.fail("nodes", std::to_string(c.nodes) + " nodes cannot hold " + std::to_string(c.gpus) + " GPUs");
    m.collectives.push_back(std::move(c));
  });
  if (const auto it = j.find("skipped"); it != j.end()) {
    if (!it->is_array()) errors.push_back("skipped: must be an array of strings");
    else
      for (std::size_t i = 0; i < it->size(); ++i) {
        if ((*it)[i].is_string()) m.skipped.push_back((*it)[i].get<std::string>());
        else errors.push_back("skipped[" + std::to_string(i) + "]: must be a string");
      }
  }
  return m;
}

/// Keeps `mine` when the two agree or `theirs` says nothing; otherwise joins them, so that a mix
/// of sources or devices stays visible to whoever fits the merged set.
void merge_label(std::string& mine, const std::string& theirs) {
  if (theirs.empty() || mine == theirs) return;
  if (mine.empty()) mine = theirs;
  else if (mine.find(theirs) == std::string::npos) mine += " + " + theirs;
}

constexpr const char* kUnrecognisedFormat =
    "unrecognised measurement format (expected moesim-measurements JSON, nccl-tests output, a vidur network "
    "(all_reduce/send_recv) or mlp profile CSV, an LLMCompass matmul CSV, or a collective sweep CSV "
    "size_bytes,latency_us,algbw_GBps,busbw_GBps)";

enum class Format { kJson, kNcclTests, kVidurNetwork, kVidurMlp, kLlmcompassMatmul, kCollectiveSweepCsv, kUnknown };

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s.size() >= suffix.size() && lower(std::string(s.substr(s.size() - suffix.size()))) == suffix;
}

Format detect_format(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return Format::kUnknown;
  if (text[first] == '{') return Format::kJson;  // from_json says what is wrong with it, if anything
  const std::string_view head = text.substr(first, text.find('\n', first) - first);
  if (head.find("time_stats.mlp_up_proj.median") != std::string_view::npos) return Format::kVidurMlp;
  if (head.find("time_stats.all_reduce.median") != std::string_view::npos ||
      head.find("time_stats.send_recv.median") != std::string_view::npos)
    return Format::kVidurNetwork;
  {
    // A collective sweep CSV may open with '#' comment lines (provenance); its header follows.
    std::size_t at = first;
    while (at < text.size() && text[at] == '#') {
      const auto nl = text.find('\n', at);
      at = nl == std::string_view::npos ? text.size() : text.find_first_not_of(" \t\r\n", nl);
      if (at == std::string_view::npos) at = text.size();
    }
    const std::string_view header = text.substr(at, text.find('\n', at) - at);
    if (header.find("size_bytes") != std::string_view::npos && header.find("latency_us") != std::string_view::npos &&
        header.find("algbw_GBps") != std::string_view::npos && header.find("busbw_GBps") != std::string_view::npos)
      return Format::kCollectiveSweepCsv;
  }
  // nccl-tests output is often wrapped in launcher noise (mpirun banners), so look at every line.
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    const auto hash = line.find_first_not_of(" \t");
    if (hash == std::string::npos || line[hash] != '#') continue;
    if (line.find("Collective test starting") != std::string::npos ||
        (line.find("nThread") != std::string::npos && line.find("nGpus") != std::string::npos) ||
        (line.find(" size ") != std::string::npos && line.find(" time ") != std::string::npos &&
         line.find("algbw") != std::string::npos))
      return Format::kNcclTests;
  }
  // LLMCompass, no header: "64, 12288, 12288, 0.1900ms, 101.7124Tflops".
  if (std::count(head.begin(), head.end(), ',') == 4) {
    const auto last = head.rfind(',');
    const std::string_view time = head.substr(0, last);
    if ((ends_with_ci(time, "ms") || ends_with_ci(time, "us")) && ends_with_ci(head.substr(last + 1), "flops"))
      return Format::kLlmcompassMatmul;
  }
  return Format::kUnknown;
}

Measurements load_json(const std::string& text, const std::string& path) {
  const json j = parse_json_input(text, path, "invalid JSON");
  std::vector<std::string> errors;
  Measurements m = parse(j, errors);
  if (!errors.empty()) {
    std::vector<Diagnostic> diags;
    for (auto& e : errors) diags.push_back({SourceLocation{path, 0, 0}, std::move(e)});
    throw InputError(std::move(diags));
  }
  return m;
}

}  // namespace

void Measurements::append(const Measurements& other) {
  merge_label(source, other.source);
  merge_label(device, other.device);
  if (environment.is_null()) environment = other.environment;
  else if (environment.is_object() && other.environment.is_object())
    for (const auto& [key, value] : other.environment.items())
      if (!environment.contains(key)) environment[key] = value;
  gemm.insert(gemm.end(), other.gemm.begin(), other.gemm.end());
  memcpy.insert(memcpy.end(), other.memcpy.begin(), other.memcpy.end());
  collectives.insert(collectives.end(), other.collectives.begin(), other.collectives.end());
  skipped.insert(skipped.end(), other.skipped.begin(), other.skipped.end());
}

json Measurements::to_json() const {
  json j;
  j["format"] = kMeasurementsFormat;
  j["source"] = source;
  j["device"] = device;
  j["environment"] = environment.is_null() ? json::object() : environment;
  j["gemm"] = json::array();
  for (const auto& g : gemm) {
    json e = {{"dtype", g.dtype}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"time_us", g.time_us}};
    if (!g.group_m.empty()) e["group_m"] = g.group_m;
    j["gemm"].push_back(std::move(e));
  }
  j["memcpy"] = json::array();
  for (const auto& c : memcpy)
    j["memcpy"].push_back(
        {{"kind", c.kind}, {"src", c.src}, {"dst", c.dst}, {"bytes", c.bytes}, {"time_us", c.time_us}});
  j["collectives"] = json::array();
  for (const auto& c : collectives) {
    json e = {{"op", c.op}, {"gpus", c.gpus}, {"nodes", c.nodes}, {"bytes", c.bytes}, {"time_us", c.time_us}};
    if (c.time_us > 0.0 && c.gpus > 0) {
      const double algbw = c.bytes / (c.time_us * 1e3);  // bytes/us → GB/s
      e["algbw_GBps"] = algbw;
      e["busbw_GBps"] = algbw * bus_factor(c.op, c.gpus);
    }
    j["collectives"].push_back(std::move(e));
  }
  j["skipped"] = skipped;
  return j;
}

Measurements Measurements::from_json(const json& j) {
  std::vector<std::string> errors;
  Measurements m = parse(j, errors);
  if (errors.empty()) return m;
  std::string message = "invalid measurements:";
  for (const auto& e : errors) message += "\n  " + e;
  throw std::runtime_error(message);
}

std::string collective_op_from_name(const std::string& name) {
  const std::string s = lower(name);
  const auto has = [&](const char* part) { return s.find(part) != std::string::npos; };
  // reduce_scatter first: it is not all_reduce although both contain "reduce".
  if (has("reduce_scatter") || has("reducescatter")) return {};
  if (has("all_reduce") || has("allreduce")) return "all_reduce";
  if (has("all_gather") || has("allgather")) return "all_gather";
  if (has("alltoall") || has("all_to_all") || has("all2all")) return "all_to_all";
  if (has("sendrecv") || has("send_recv")) return "send_recv";
  return {};
}

std::optional<Measurements> load_measurements_if_recognised(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(SourceLocation{path, 0, 0}, "measurement file not found");
  if (fs::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  if (in) buffer << in.rdbuf();
  if (!in || in.bad()) throw InputError(SourceLocation{path, 0, 0}, "cannot read measurement file");
  const std::string text = buffer.str();
  const std::string name = fs::path(path).filename().string();

  switch (detect_format(text)) {
    case Format::kJson: return load_json(text, path);
    case Format::kNcclTests: return import_nccl_tests(text, path, collective_op_from_name(name));
    case Format::kVidurNetwork: return import_vidur_network_csv(text, path);
    case Format::kVidurMlp: return import_vidur_mlp_csv(text, path);
    case Format::kLlmcompassMatmul: return import_llmcompass_matmul_csv(text, path);
    case Format::kCollectiveSweepCsv: return import_collective_sweep_csv(text, path, collective_op_from_name(name));
    case Format::kUnknown: break;
  }
  return std::nullopt;
}

Measurements load_measurements(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw InputError(SourceLocation{path, 0, 0}, "is a directory, not a measurement file");
  if (auto m = load_measurements_if_recognised(path)) return std::move(*m);
  throw InputError(SourceLocation{path, 0, 0}, kUnrecognisedFormat);
}

}  // namespace moesim::calibration
