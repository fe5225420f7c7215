// `moesim sweep merge`: the shard folders of one sweep, run on several machines with
// `--shard K/N`, joined into the folder one machine running the whole sweep would have written.
#include <algorithm>
#include <filesystem>
#include <map>

#include "app/run/staged_output.hpp"
#include "app/sweep/sweep.hpp"
#include "app/sweep/sweep_log.hpp"
#include "core/diagnostics.hpp"
#include "core/json_input.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// The definition fields that must agree between shards. "file" may differ: machines may keep the
// scenario at different paths, and its hash already says it is the same scenario.
constexpr const char* kSameSweep[] = {"file_fnv1a", "grid", "zip", "set"};

// One input folder: its stored definition and its shard.
struct ShardDir {
  std::string dir;
  nlohmann::json definition;
  SweepShard shard;
};

ShardDir read_shard_dir(const std::string& dir) {
  const fs::path def_path = fs::path(dir) / "sweep.json";
  if (!fs::is_directory(dir)) throw InputError(SourceLocation{dir, 0, 0}, "not a directory");
  if (!fs::exists(def_path))
    throw InputError(SourceLocation{dir, 0, 0}, "no sweep.json here: not a folder written by `moesim sweep --out`");
  ShardDir s{dir, parse_json_or_discarded(read_text_file(def_path.string())), {}};
  sweep_spec_from_definition(s.definition, def_path.string());  // throws if it is not a definition
  if (s.definition.contains("shard")) {
    const SourceLocation at{def_path.string(), 0, 0};
    if (!s.definition["shard"].is_string()) throw InputError(at, "'shard' must be \"K/N\"");
    try {
      s.shard = parse_sweep_shard(s.definition["shard"].get<std::string>());
    } catch (const InputError& e) {  // located at the file, not at a --shard the user did not give
      throw InputError(at, "'shard': " + e.diagnostics().front().message);
    }
  }
  return s;
}

/// The shard folders, each read once and all of one sweep (same scenario, axes and sets).
std::vector<ShardDir> read_shards(const std::vector<std::string>& dirs, const std::string& out_dir) {
  if (dirs.empty()) throw InputError(SourceLocation{"moesim sweep merge", 0, 0}, "no folders to merge");
  std::vector<ShardDir> shards;
  for (const auto& d : dirs) {
    if (fs::exists(out_dir) && fs::exists(d) && fs::equivalent(d, out_dir))
      throw InputError(SourceLocation{d, 0, 0}, "--out is one of the folders being merged; choose a new folder");
    for (const ShardDir& s : shards)
      if (fs::exists(d) && fs::equivalent(d, s.dir)) throw InputError(SourceLocation{d, 0, 0}, "folder given twice");
    shards.push_back(read_shard_dir(d));
  }
  const ShardDir& first = shards.front();
  for (const ShardDir& s : shards)
    for (const char* field : kSameSweep)
      if (s.definition[field] != first.definition[field])
        throw InputError(SourceLocation{(fs::path(s.dir) / "sweep.json").string(), 0, 0},
                         std::string("not the same sweep as ") + first.dir + ": its '" + field + "' differs" +
                             (std::string(field) == "file_fnv1a" ? " (a different scenario file)" : ""));
  return shards;
}

/// --out may be new, or hold this very sweep (merged before): never another sweep's results.
void check_merge_target(const fs::path& out, const std::string& out_dir, const nlohmann::json& definition) {
  if (fs::exists(out / "sweep.json") || fs::exists(out / "results.jsonl")) {
    const nlohmann::json there =
        fs::exists(out / "sweep.json")
            ? parse_json_or_discarded(read_text_file((out / "sweep.json").string()))
            : nlohmann::json();
    bool same = there.is_object() && !there.contains("shard");
    for (const char* field : kSameSweep) same = same && there.value(field, nlohmann::json()) == definition[field];
    if (!same)
      throw InputError(SourceLocation{out_dir, 0, 0},
                       "--out holds another sweep's results (or a shard's); choose a new folder");
  }
}

/// Every point's result line from the shards, each point from exactly one; a shard short of its
/// points, or points in none of the shards, are errors naming them.
std::vector<nlohmann::json> collect_points(const std::vector<ShardDir>& shards, const std::vector<SweepPoint>& points) {
  std::vector<nlohmann::json> lines;
  std::map<std::size_t, std::string> owner;  // point -> the folder that holds it
  std::vector<Diagnostic> problems;
  for (const ShardDir& s : shards) {
    const ResultsLog log = read_results_log(s.dir, s.definition, points, "");
    std::size_t expected = 0, have = 0;
    for (const auto& p : points) {
      if (!s.shard.has(p.index)) continue;
      ++expected;
      have += log.done[p.index] ? 1 : 0;
    }
    if (have < expected)
      problems.push_back({SourceLocation{s.dir, 0, 0},
                          "shard " + s.shard.text() + " has " + std::to_string(have) + " of its " +
                              std::to_string(expected) + " points; run its sweep command again to finish it"});
    for (const auto& line : log.lines) {
      const auto p = line["point"].get<std::size_t>();
      if (const auto [it, fresh] = owner.emplace(p, s.dir); !fresh)
        throw InputError(SourceLocation{s.dir, 0, 0},
                         "point " + std::to_string(p) + " is also in " + it->second + ": merge each shard once");
      lines.push_back(line);
    }
  }
  if (problems.empty() && owner.size() < points.size()) {
    std::map<std::size_t, bool> counts;  // shard counts given, to name the missing shards
    for (const ShardDir& s : shards) counts[s.shard.count] = true;
    std::string missing;
    if (counts.size() == 1) {
      const std::size_t n = counts.begin()->first;
      for (std::size_t k = 1; k <= n; ++k)
        if (std::none_of(shards.begin(), shards.end(), [&](const ShardDir& s) { return s.shard.index == k; }))
          missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(n);
    }
    problems.push_back({SourceLocation{"moesim sweep merge", 0, 0},
                        std::to_string(points.size() - owner.size()) + " of " + std::to_string(points.size()) +
                            " points are in none of the folders" + (missing.empty() ? "" : " (missing shards " + missing + ")")});
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  return lines;
}

}  // namespace

SweepOutcome merge_sweeps(const std::vector<std::string>& dirs, const std::string& out_dir) {
  const std::vector<ShardDir> shards = read_shards(dirs, out_dir);
  const ShardDir& first = shards.front();
  nlohmann::json definition = first.definition;
  definition.erase("shard");
  const fs::path out(out_dir);
  check_merge_target(out, out_dir, definition);
  const SweepSpec spec = sweep_spec_from_definition(first.definition, first.dir);
  const std::vector<SweepPoint> points = expand_points(spec);
  std::vector<nlohmann::json> lines = collect_points(shards, points);

  std::stable_sort(lines.begin(), lines.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["point"].get<std::size_t>() < b["point"].get<std::size_t>();
  });
  std::string jsonl;
  SweepOutcome outcome;
  outcome.points = points.size();
  outcome.already_done = points.size();
  for (const auto& line : lines) {
    jsonl += line.dump() + "\n";
    outcome.failed += line.contains("error") ? 1 : 0;
  }
  fs::create_directories(out);
  write_atomically(out / "sweep.json", definition.dump(2) + "\n");
  write_atomically(out / "results.jsonl", jsonl);
  write_atomically(out / "results.csv", sweep_csv(spec, std::move(lines), &outcome.csv_rows));
  return outcome;
}

}  // namespace moesim
