// `moesim sweep`: axes and ranges, grid × zip expansion, the CSV table, validation before any
// run, determinism across --jobs, resume (skips, truncated last line) and refusing another sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/sweep/sweep.hpp"
#include "core/diagnostics.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

using testing_support::slurp;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

std::vector<std::string> values(const std::string& option, const std::string& spec) {
  return parse_sweep_axis(option, spec).values;
}

// A temporary directory with a tiny two-policy scenario: every point has two runs.
class SweepCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-sweep-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    scenario = (dir / "s.yaml").string();
    std::ofstream(scenario) << "name: sweep\n"
                               "model: {preset: switch-base-8, layers: 2}\n"
                               "hardware: hgx-a100-4gpu-nvlink\n"
                               "workload: {batch_size: 1, seq_len: 32, batches: 1, routing: {kind: zipf, s: 1.2}}\n"
                               "policy: [static-ep, {name: static-ep, label: rr, placement: round-robin}]\n";
  }
  void TearDown() override { fs::remove_all(dir); }

  // `moesim sweep s.yaml --grid seed=1:3:1 --zip ... --out DIR/<out> ARGS...`: 3 seeds × 2 zip
  // values = 6 points, 12 rows.
  int sweep(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"sweep", scenario, "--grid", "seed=1:3:1", "--zip", "workload.seq_len=16,32",
                                     "--zip", "workload.batch_size=1,2", "--out", (dir / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = testing_support::run_cli_captured(args);
    out_text = r.out;
    err_text = r.err;
    return r.code;
  }

  fs::path dir;
  std::string scenario, out_text, err_text;
};

}  // namespace

TEST(SweepAxis, ListsSplitAtTopLevelCommasOnly) {
  EXPECT_EQ(values("--grid", "policy.0.placement=contiguous,round-robin"),
            (std::vector<std::string>{"contiguous", "round-robin"}));
  EXPECT_EQ(values("--grid", "predictor=[none,oracle],'a,b',{kind: zipf, s: 1}"),
            (std::vector<std::string>{"[none,oracle]", "'a,b'", "{kind: zipf, s: 1}"}));
  const SweepAxis a = parse_sweep_axis("--zip", "workload.seq_len=16,2:8:3");  // lists and ranges mix
  EXPECT_EQ(a.key, "workload.seq_len");
  EXPECT_EQ(a.values, (std::vector<std::string>{"16", "2", "5", "8"}));
}

TEST(SweepAxis, RangesIncludeStopAndPrintWithoutFloatNoise) {
  const auto v = values("--grid", "k=1.0:4.0:0.2");
  ASSERT_EQ(v.size(), 16u);  // (4.0 - 1.0) / 0.2 is 14.999...: stop is still in
  EXPECT_EQ(v[1], "1.2");
  EXPECT_EQ(v[3], "1.6");  // 1.0 + 3 * 0.2 is 1.6000000000000001 in binary
  EXPECT_EQ(v.back(), "4");
  EXPECT_EQ(values("--grid", "k=0.1:0.3:0.1"), (std::vector<std::string>{"0.1", "0.2", "0.3"}));
  EXPECT_EQ(values("--grid", "k=4:1:-1"), (std::vector<std::string>{"4", "3", "2", "1"}));
  EXPECT_EQ(values("--grid", "k=1:10:4"), (std::vector<std::string>{"1", "5", "9"}));  // stop not on a step
  EXPECT_EQ(values("--grid", "k=1e-3:3e-3:1e-3"), (std::vector<std::string>{"0.001", "0.002", "0.003"}));
  EXPECT_EQ(values("--grid", "k=12:30:ab"), (std::vector<std::string>{"12:30:ab"}));  // not numbers: a value
}

TEST(SweepAxis, BadAxesAreInputErrorsAtTheOption) {
  for (const char* spec : {"seed", "=1,2", "seed=1,,2", "seed=1:3:0", "seed=3:1:1", "seed=0:1:1e-9"}) {
    try {
      parse_sweep_axis("--grid", spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.diagnostics().at(0).where.file, std::string("--grid ") + spec);
    }
  }
}

TEST(SweepPoints, GridTimesZipInNestedLoopOrder) {
  SweepSpec spec{"s.yaml", {parse_sweep_axis("--grid", "a=1,2"), parse_sweep_axis("--grid", "b=x,y,z")},
                 {parse_sweep_axis("--zip", "c=p,q"), parse_sweep_axis("--zip", "d=r,s")}, {}};
  const std::vector<SweepPoint> points = expand_points(spec);
  ASSERT_EQ(points.size(), 2u * 3u * 2u);
  using Overrides = std::vector<std::string>;
  EXPECT_EQ(point_overrides(points[0]), (Overrides{"a=1", "b=x", "c=p", "d=r"}));
  EXPECT_EQ(point_overrides(points[1]), (Overrides{"a=1", "b=x", "c=q", "d=s"}));  // zips innermost, together
  EXPECT_EQ(point_overrides(points[2]), (Overrides{"a=1", "b=y", "c=p", "d=r"}));
  EXPECT_EQ(point_overrides(points[11]), (Overrides{"a=2", "b=z", "c=q", "d=s"}));
  for (const auto& p : points) {
    EXPECT_EQ(p.index, static_cast<std::size_t>(&p - points.data()));
    EXPECT_EQ(p.overrides[2].second == "p", p.overrides[3].second == "r");  // never crossed
  }
  spec.grids.clear();  // zips alone are one dimension
  EXPECT_EQ(expand_points(spec).size(), 2u);
}

TEST(SweepPoints, UnequalZipsAndRepeatedKeysAreRefused) {
  const SweepSpec unequal{"s.yaml", {}, {parse_sweep_axis("--zip", "c=1,2"), parse_sweep_axis("--zip", "d=1,2,3")}, {}};
  EXPECT_THROW(expand_points(unequal), InputError);
  const SweepSpec twice{"s.yaml", {parse_sweep_axis("--grid", "c=1,2")}, {parse_sweep_axis("--zip", "c=1,2")}, {}};
  EXPECT_THROW(expand_points(twice), InputError);
  const SweepSpec also_set{"s.yaml", {parse_sweep_axis("--grid", "c=1,2")}, {}, {"c=3"}};
  EXPECT_THROW(expand_points(also_set), InputError);
}

TEST(SweepCsv, FlattensScalarsLeavesArraysOutAndQuotes) {
  const SweepSpec spec{"s.yaml", {parse_sweep_axis("--grid", "k=1,2")}, {}, {}};
  const auto run = [](const char* label, double v) {
    return nlohmann::json{{"policy", "p"}, {"label", label}, {"predictor", "none"},
                          {"metrics", {{"m", v}, {"nested", {{"x", 1}, {"per_gpu", {1, 2}}}}, {"per_batch", {{{"a", 1}}}}}}};
  };
  nlohmann::json later = {{"point", 1}, {"overrides", {{"k", "2"}}}, {"runs", {run("a,b", 0.5)}}};
  later["runs"][0]["predictor_label"] = "o";
  const nlohmann::json first = {{"point", 0}, {"overrides", {{"k", "1"}}}, {"error", {"s.yaml:1:1: error: \"no\""}}};
  std::size_t rows = 0;
  const std::string csv = sweep_csv(spec, {later, first}, &rows);  // sorted by point, not by input order
  EXPECT_EQ(rows, 2u);
  EXPECT_EQ(csv,
            "point,k,policy,label,predictor,predictor_label,error,m,nested.x\n"
            "0,1,,,,,\"s.yaml:1:1: error: \"\"no\"\"\",,\n"
            "1,2,p,\"a,b\",none,o,,0.5,1\n");
}

TEST_F(SweepCli, CsvHasARowPerPointAndRunWithSweptColumnsAndFlatMetrics) {
  ASSERT_EQ(sweep("a", {"--jobs", "1"}), 0) << err_text;
  EXPECT_EQ(err_text, "");  // no progress bar when stderr is not a terminal
  EXPECT_NE(out_text.find("ran 6, skipped 0"), std::string::npos) << out_text;
  const auto csv = lines_of(slurp(dir / "a" / "results.csv"));
  ASSERT_EQ(csv.size(), 1u + 6u * 2u);
  EXPECT_EQ(csv[0].rfind("point,seed,workload.seq_len,workload.batch_size,policy,label,predictor,", 0), 0u) << csv[0];
  for (const char* metric : {",layer_latency_ms.mean,", ",bytes.intra_node,", ",gpu_time_breakdown.mean_fraction.waiting,",
                             ",memory_peak_bytes.max,", ",throughput_tokens_per_s_per_batch.max,"})
    EXPECT_NE(csv[0].find(metric), std::string::npos) << metric;
  EXPECT_TRUE(csv[0].ends_with(",ttft_ms.p99")) << csv[0];  // alphabetical: last
  // Arrays stay out: per_gpu, per_gpu_ms, per_batch.
  EXPECT_EQ(csv[0].find("per_gpu"), std::string::npos);
  EXPECT_EQ(csv[0].find(",per_batch"), std::string::npos);
  EXPECT_EQ(csv[1].rfind("0,1,16,1,static-ep,static-ep,none,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("0,1,16,1,static-ep,rr,none,", 0), 0u) << csv[2];
  EXPECT_EQ(csv[12].rfind("5,3,32,2,static-ep,rr,none,", 0), 0u) << csv[12];

  const auto jsonl = lines_of(slurp(dir / "a" / "results.jsonl"));
  ASSERT_EQ(jsonl.size(), 6u);
  for (const auto& l : jsonl) {
    const auto j = nlohmann::json::parse(l);
    EXPECT_FALSE(j.contains("scenario"));  // compact: runs only
    EXPECT_EQ(j["runs"].size(), 2u);
    EXPECT_EQ(j["overrides"].size(), 3u);
    EXPECT_TRUE(j["runs"][0]["metrics"].contains("layer_latency_ms"));
  }
}

TEST_F(SweepCli, ResultsAreByteIdenticalWhateverJobs) {
  ASSERT_EQ(sweep("j1", {"--jobs", "1"}), 0) << err_text;
  ASSERT_EQ(sweep("j2", {"--jobs", "2"}), 0) << err_text;
  const std::string one = slurp(dir / "j1" / "results.csv");
  EXPECT_EQ(one, slurp(dir / "j2" / "results.csv"));
  // Loading each point again at run time (large sweeps) gives the same table too.
  SweepSpec spec{scenario, {parse_sweep_axis("--grid", "seed=1:3:1")},
                 {parse_sweep_axis("--zip", "workload.seq_len=16,32"), parse_sweep_axis("--zip", "workload.batch_size=1,2")}, {}};
  SweepOptions reload{(dir / "reload").string(), 2, false, 0, {}};
  EXPECT_EQ(run_sweep(spec, reload).ran, 6u);
  EXPECT_EQ(one, slurp(dir / "reload" / "results.csv"));
}

TEST_F(SweepCli, BadPointExitsTwoNamingLocationAndPointWritingNothing) {
  // deepseek-v3's first three layers are dense: with 2 layers it has no MoE layer (points 2, 3, 6, ...).
  EXPECT_EQ(sweep("bad", {"--grid", "model.preset=switch-base-8,deepseek-v3"}), 2);
  EXPECT_NE(err_text.find("s.yaml:2:8: error: the model has no MoE layer"), std::string::npos) << err_text;
  EXPECT_NE(err_text.find("(sweep point 2: seed=1, model.preset=deepseek-v3, workload.seq_len=16, workload.batch_size=1)"),
            std::string::npos)
      << err_text;
  for (const char* fine : {"point 0:", "point 1:", "point 4:"}) EXPECT_EQ(err_text.find(fine), std::string::npos) << fine;
  EXPECT_FALSE(fs::exists(dir / "bad"));
  // A bad swept value is located at the option that gave it.
  EXPECT_EQ(sweep("bad", {"--grid", "policy.1.placement=contiguous,diagonal"}), 2);
  EXPECT_NE(err_text.find("--grid policy.1.placement=diagonal: error: 'placement'"), std::string::npos) << err_text;
  EXPECT_FALSE(fs::exists(dir / "bad"));
}

TEST_F(SweepCli, UnequalZipLengthsExitTwo) {
  EXPECT_EQ(sweep("zip", {"--zip", "model.layers=1,2,4"}), 2);
  EXPECT_NE(err_text.find("--zip model.layers=1,2,4: error: --zip lists must have equal lengths"), std::string::npos)
      << err_text;
  EXPECT_FALSE(fs::exists(dir / "zip"));
}

TEST_F(SweepCli, ResumeSkipsFinishedPoints) {
  ASSERT_EQ(sweep("r", {"--jobs", "2"}), 0) << err_text;
  const std::string csv = slurp(dir / "r" / "results.csv"), jsonl = slurp(dir / "r" / "results.jsonl");
  ASSERT_EQ(sweep("r", {"--jobs", "2"}), 0) << err_text;
  EXPECT_NE(out_text.find("ran 0, skipped 6 already in results.jsonl"), std::string::npos) << out_text;
  EXPECT_EQ(slurp(dir / "r" / "results.jsonl"), jsonl);
  EXPECT_EQ(slurp(dir / "r" / "results.csv"), csv);
}

TEST_F(SweepCli, ResumeRewritesATruncatedLastLine) {
  ASSERT_EQ(sweep("t", {"--jobs", "1"}), 0) << err_text;
  const std::string csv = slurp(dir / "t" / "results.csv");
  const fs::path jsonl = dir / "t" / "results.jsonl";
  // Interrupted: four points finished, the fifth was cut mid-line, the CSV never written.
  const auto lines = lines_of(slurp(jsonl));
  std::ofstream(jsonl, std::ios::trunc) << lines[0] << "\n" << lines[1] << "\n" << lines[2] << "\n" << lines[3] << "\n"
                                         << lines[4].substr(0, lines[4].size() / 2);
  fs::remove(dir / "t" / "results.csv");
  ASSERT_EQ(sweep("t", {"--jobs", "2"}), 0) << err_text;
  EXPECT_NE(out_text.find("ran 2, skipped 4"), std::string::npos) << out_text;
  EXPECT_EQ(slurp(dir / "t" / "results.csv"), csv);
  const auto rewritten = lines_of(slurp(jsonl));
  ASSERT_EQ(rewritten.size(), 6u);
  for (const auto& l : rewritten) EXPECT_FALSE(nlohmann::json::parse(l, nullptr, false).is_discarded()) << l;
}

TEST_F(SweepCli, AnotherSweepInTheDirectoryIsRefused) {
  ASSERT_EQ(sweep("d", {"--jobs", "2"}), 0) << err_text;
  const std::string jsonl = slurp(dir / "d" / "results.jsonl");
  EXPECT_EQ(sweep("d", {"--set", "workload.batches=2"}), 2);
  EXPECT_NE(err_text.find("sweep.json: error: this directory holds a different sweep: its 'set' differs"),
            std::string::npos)
      << err_text;
  EXPECT_EQ(sweep("d", {"--grid", "model.layers=1,2"}), 2);
  EXPECT_NE(err_text.find("its 'grid' differs"), std::string::npos) << err_text;
  std::ofstream(scenario, std::ios::app) << "seed: 9\n";
  EXPECT_EQ(sweep("d"), 2);
  EXPECT_NE(err_text.find("the scenario file was edited"), std::string::npos) << err_text;
  EXPECT_EQ(slurp(dir / "d" / "results.jsonl"), jsonl);  // untouched
}

TEST(SweepHelp, DocumentsOptionsAndOutputs) {
  const auto r = testing_support::run_cli_captured({"sweep", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"--grid", "--zip", "--set", "--out", "--jobs", "start:stop:step", "results.jsonl", "results.csv",
                        "sweep.json", "Resume"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

}  // namespace moesim

namespace moesim {
namespace {

TEST(SweepShard, ParsesKOfNAndPartitionsPoints) {
  const SweepShard s = parse_sweep_shard("2/3");
  EXPECT_EQ(s.index, 2u);
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.text(), "2/3");
  EXPECT_FALSE(s.has(0));
  EXPECT_TRUE(s.has(1));
  EXPECT_TRUE(s.has(4));
  // Every point is in exactly one shard.
  for (std::size_t p = 0; p < 50; ++p) {
    int owners = 0;
    for (std::size_t k = 1; k <= 7; ++k) owners += parse_sweep_shard(std::to_string(k) + "/7").has(p) ? 1 : 0;
    EXPECT_EQ(owners, 1) << p;
  }
  for (const char* bad : {"0/4", "5/4", "1/0", "2", "a/b", "1/2/3", "-1/4", "1/", "/4", "1/2000000"}) {
    try {
      parse_sweep_shard(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.diagnostics()[0].where.file, std::string("--shard ") + bad);
    }
  }
}

TEST_F(SweepCli, FourShardsMergedEqualTheUnshardedSweepByteForByte) {
  ASSERT_EQ(sweep("whole", {"--jobs", "2"}), 0) << err_text;
  std::vector<std::string> merge = {"sweep", "merge"};
  for (int k = 1; k <= 4; ++k) {
    const std::string shard = "shard-" + std::to_string(k);
    ASSERT_EQ(sweep(shard, {"--shard", std::to_string(k) + "/4", "--jobs", "1"}), 0) << err_text;
    // Points k-1, k+3: 6 points over 4 shards gives 2, 2, 1, 1.
    EXPECT_NE(out_text.find("shard " + std::to_string(k) + "/4: " + (k <= 2 ? "2" : "1") + " points: ran"),
              std::string::npos)
        << out_text;
    merge.push_back((dir / shard).string());
  }
  merge.insert(merge.end(), {"--out", (dir / "merged").string()});
  const auto r = testing_support::run_cli_captured(merge);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(dir / "merged" / "results.csv"), slurp(dir / "whole" / "results.csv"));
  EXPECT_EQ(slurp(dir / "merged" / "sweep.json"), slurp(dir / "whole" / "sweep.json"));
  // results.jsonl holds the same lines, in point order.
  auto whole = lines_of(slurp(dir / "whole" / "results.jsonl"));
  const auto merged = lines_of(slurp(dir / "merged" / "results.jsonl"));
  std::sort(whole.begin(), whole.end(), [](const std::string& a, const std::string& b) {
    return nlohmann::json::parse(a)["point"] < nlohmann::json::parse(b)["point"];
  });
  EXPECT_EQ(merged, whole);
  // The merged folder is a finished whole sweep: running it again skips everything.
  ASSERT_EQ(sweep("merged"), 0) << err_text;
  EXPECT_NE(out_text.find("ran 0, skipped 6"), std::string::npos) << out_text;
}

TEST_F(SweepCli, MergeRefusesMissingOverlappingUnfinishedAndForeignShards) {
  for (int k = 1; k <= 3; ++k) ASSERT_EQ(sweep("s" + std::to_string(k), {"--shard", std::to_string(k) + "/3"}), 0) << err_text;
  const auto merge = [&](std::vector<std::string> dirs) {
    std::vector<std::string> args = {"sweep", "merge"};
    for (const auto& d : dirs) args.push_back((dir / d).string());
    args.insert(args.end(), {"--out", (dir / "m").string()});
    return testing_support::run_cli_captured(args);
  };
  auto r = merge({"s1", "s3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("2 of 6 points are in none of the folders (missing shards 2/3)"), std::string::npos) << r.err;
  r = merge({"s1", "s2", "s2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("folder given twice"), std::string::npos) << r.err;
  // A shard cut short (its last point missing) is named with what to do.
  const auto lines = lines_of(slurp(dir / "s2" / "results.jsonl"));
  std::ofstream(dir / "s2" / "results.jsonl", std::ios::trunc) << lines[0] << "\n";
  r = merge({"s1", "s2", "s3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("s2: error: shard 2/3 has 1 of its 2 points; run its sweep command again"), std::string::npos)
      << r.err;
  // A shard of another sweep (another --set) is refused.
  ASSERT_EQ(sweep("other", {"--shard", "2/3", "--set", "workload.batches=2"}), 0) << err_text;
  r = merge({"s1", "other", "s3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not the same sweep as"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its 'set' differs"), std::string::npos) << r.err;
  // A folder that is not a sweep's.
  fs::create_directories(dir / "empty");
  r = merge({"s1", "empty"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no sweep.json here"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "m"));
  // A shard folder resumes as that shard only; another shard in it is refused.
  ASSERT_EQ(sweep("s2", {"--shard", "2/3"}), 0) << err_text;
  EXPECT_NE(out_text.find("ran 1, skipped 1"), std::string::npos) << out_text;
  EXPECT_EQ(sweep("s2", {"--shard", "1/3"}), 2);
  EXPECT_NE(err_text.find("its 'shard' differs"), std::string::npos) << err_text;
  EXPECT_EQ(sweep("s2"), 2);
  r = merge({"s1", "s2", "s3"});
  EXPECT_EQ(r.code, 0) << r.err;
  // Merging again into the merged folder is fine; into another sweep's folder it is refused.
  r = merge({"s1", "s2", "s3"});
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(sweep("unrelated", {"--set", "workload.batches=2"}), 0) << err_text;
  std::vector<std::string> into_other = {"sweep", "merge", (dir / "s1").string(), (dir / "s2").string(),
                                         (dir / "s3").string(), "--out", (dir / "unrelated").string()};
  r = testing_support::run_cli_captured(into_other);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out holds another sweep's results"), std::string::npos) << r.err;
  // A shard's sweep.json without its scenario hash is not a definition (it was an abort).
  const std::string def = slurp(dir / "s3" / "sweep.json");
  auto j = nlohmann::json::parse(def);
  j.erase("file_fnv1a");
  std::ofstream(dir / "s3" / "sweep.json", std::ios::trunc) << j.dump();
  r = merge({"s1", "s2", "s3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a sweep definition"), std::string::npos) << r.err;
  j = nlohmann::json::parse(def);
  j["shard"] = "9/3";
  std::ofstream(dir / "s3" / "sweep.json", std::ios::trunc) << j.dump();
  r = merge({"s1", "s2", "s3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "s3" / "sweep.json").string() + ": error: 'shard': K must be"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace moesim
