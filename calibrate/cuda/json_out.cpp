// The measurement file writer. Keys and units follow calibrate/measurements.hpp exactly, since
// `Measurements::from_json` in the simulator reads what this writes.
#include <cstdio>
#include <fstream>
#include <string>

#include "common.hpp"
#include "results.hpp"

namespace moesim::calib {

namespace {

/// Format tag that from_json checks before reading anything else.
constexpr const char* kFormat = "moesim-measurements/1";

nlohmann::json gemm_json(const GemmRecord& g) {
  nlohmann::json j = {{"dtype", g.dtype}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"time_us", g.time_us}};
  if (!g.group_m.empty()) j["group_m"] = g.group_m;
  return j;
}

nlohmann::json memcpy_json(const MemcpyRecord& c) {
  return {{"kind", c.kind}, {"src", c.src}, {"dst", c.dst}, {"bytes", c.bytes}, {"time_us", c.time_us}};
}

nlohmann::json collective_json(const CollectiveRecord& c) {
  return {{"op", c.op},           {"gpus", c.gpus},           {"nodes", c.nodes},
          {"bytes", c.bytes},     {"time_us", c.time_us},     {"algbw_GBps", c.algbw_GBps},
          {"busbw_GBps", c.busbw_GBps}};
}

}  // namespace

nlohmann::json to_json(const Results& results) {
  nlohmann::json j = nlohmann::json::object();
  j["format"] = kFormat;
  j["source"] = "moesim-calibrate";
  j["device"] = results.device;
  j["environment"] = results.environment.is_null() ? nlohmann::json::object() : results.environment;
  nlohmann::json gemm = nlohmann::json::array();
  for (const GemmRecord& g : results.gemm) gemm.push_back(gemm_json(g));
  nlohmann::json copies = nlohmann::json::array();
  for (const MemcpyRecord& c : results.memcpy) copies.push_back(memcpy_json(c));
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectiveRecord& c : results.collectives) collectives.push_back(collective_json(c));
  j["gemm"] = std::move(gemm);
  j["memcpy"] = std::move(copies);
  j["collectives"] = std::move(collectives);
  j["skipped"] = results.skipped;
  return j;
}

void write_json(const Results& results, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(kExitIoError, "cannot write '" + tmp + "'");
    out << to_json(results).dump(1) << '\n';
    out.flush();
    if (!out) fail(kExitIoError, "error writing '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(kExitIoError, "cannot rename '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace moesim::calib
