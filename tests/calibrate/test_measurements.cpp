// Measurement files: the moesim JSON format, and the importers for nccl-tests, vidur and LLMCompass
// output, on small committed excerpts (tests/data/calibration/) and, when present, the full shared files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "calibrate/measurements.hpp"
#include "core/diagnostics.hpp"

namespace moesim::calibration {
namespace {

namespace fs = std::filesystem;

std::string data(const std::string& name) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/tests/data/calibration/" + name;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `text` to a fresh file named `name` (the name matters: it can carry an nccl-tests op hint).
std::string write_temp(const std::string& name, const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) / ("moesim_measurements_" + std::string(info->name()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

/// The InputError `f` throws (fails the test if it throws none).
template <class F>
InputError input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError thrown";
  return InputError(SourceLocation{}, "none");
}

std::string from_json_error(const std::string& text) {
  try {
    Measurements::from_json(nlohmann::json::parse(text));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

Measurements sample_set() {
  Measurements m;
  m.source = "moesim-calibrate";
  m.device = "NVIDIA A100-SXM4-80GB";
  m.environment = {{"cuda", "12.4"}, {"nccl", "2.21.5"}};
  m.gemm.push_back({"fp16", 128, 4096, 8192, {}, 41.5});
  m.gemm.push_back({"bf16", 96, 1024, 512, {64, 0, 32}, 12.25});
  m.memcpy.push_back({"h2d_pinned", 0, 0, 1 << 20, 45.0});
  m.memcpy.push_back({"p2p", 0, 3, 1 << 24, 80.5});
  m.collectives.push_back({"all_reduce", 8, 1, 1 << 20, 64.0});
  m.collectives.push_back({"all_to_all", 16, 2, 1 << 22, 900.0});
  m.skipped.push_back("fp8 gemm: needs compute capability 8.9");
  return m;
}

// A one-node, 4-GPU table in the current nccl-tests layout with the given redop and root columns;
// count = size / (4 bytes · count_divisor), so count_divisor 4 makes the count per rank.
std::string nccl_table(const std::string& op_line, const std::string& redop, int root, int count_divisor) {
  std::string s = op_line.empty() ? "" : "# Collective test starting: " + op_line + "\n";
  s += "# nThread 1 nGpus 4 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
       "validation: 1 graph: 0\n#\n# Using devices\n";
  for (int r = 0; r < 4; ++r)
    s += "#  Rank  " + std::to_string(r) + " Group  0 Pid   4242 on node-a device  " + std::to_string(r) +
         " [0000:0" + std::to_string(r) + ":00] NVIDIA H100 80GB HBM3\n";
  s += "#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
       "   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
       "  (GB/s)  (GB/s)\n";
  for (int size : {1024, 2048})
    s += "        " + std::to_string(size) + "   " + std::to_string(size / 4 / count_divisor) + "   float   " + redop +
         "   " + std::to_string(root) + "    20.50    0.05    0.04      0    20.10    0.05    0.04      0\n";
  return s + "# Avg bus bandwidth    : 0.04\n#\n";
}

}  // namespace

TEST(Measurements, JsonRoundTripKeepsEverySample) {
  const Measurements m = sample_set();
  const nlohmann::json j = m.to_json();
  EXPECT_EQ(j["format"], kMeasurementsFormat);
  EXPECT_NEAR(j["collectives"][0]["algbw_GBps"].get<double>(), 16.384, 1e-9);  // 1 MiB / 64 us
  EXPECT_NEAR(j["collectives"][0]["busbw_GBps"].get<double>(), 16.384 * 1.75, 1e-9);
  EXPECT_FALSE(j["gemm"][0].contains("group_m"));

  const Measurements back = Measurements::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.device, m.device);
  EXPECT_EQ(back.environment["nccl"], "2.21.5");
  ASSERT_EQ(back.gemm.size(), 2u);
  EXPECT_EQ(back.gemm[1].group_m, (std::vector<std::int64_t>{64, 0, 32}));
  EXPECT_EQ(back.gemm[1].dtype, "bf16");
  EXPECT_DOUBLE_EQ(back.gemm[1].time_us, 12.25);
  ASSERT_EQ(back.memcpy.size(), 2u);
  EXPECT_EQ(back.memcpy[1].dst, 3);
  ASSERT_EQ(back.collectives.size(), 2u);
  EXPECT_EQ(back.collectives[1].op, "all_to_all");
  EXPECT_EQ(back.collectives[1].nodes, 2);
  EXPECT_EQ(back.skipped, m.skipped);
}

TEST(Measurements, FromJsonRejectsBadFilesNamingTheEntry) {
  EXPECT_NE(from_json_error(R"({"gemm": []})").find("missing \"format\""), std::string::npos);
  EXPECT_NE(from_json_error(R"({"format": "moesim-measurements/2"})").find("unsupported format"), std::string::npos);
  const std::string head = R"({"format": "moesim-measurements/1", )";
  const auto gemm = from_json_error(head + R"("gemm": [{"dtype":"fp16","m":1,"n":2,"k":3,"time_us":1},
                                                       {"dtype":"fp16","m":1,"n":2,"k":3}]})");
  EXPECT_NE(gemm.find("gemm[1]: missing required field \"time_us\""), std::string::npos) << gemm;
  const auto op = from_json_error(head + R"("collectives": [{"op":"allreduce","gpus":8,"bytes":8,"time_us":1}]})");
  EXPECT_NE(op.find("collectives[0].op"), std::string::npos) << op;
  EXPECT_NE(op.find("did you mean 'all_reduce'"), std::string::npos) << op;
  const auto bytes = from_json_error(head + R"("memcpy": [{"kind":"d2d","bytes":-4,"time_us":1}]})");
  EXPECT_NE(bytes.find("memcpy[0].bytes: must be a positive number"), std::string::npos) << bytes;
  const auto typo = from_json_error(head + R"("gemm": [{"dtype":"fp16","m":4,"n":2,"k":3,"time_us":1,"groupm":[4]}]})");
  EXPECT_NE(typo.find("gemm[0]: unknown field 'groupm'"), std::string::npos) << typo;
  const auto groups =
      from_json_error(head + R"("gemm": [{"dtype":"fp16","m":4,"n":2,"k":3,"time_us":1,"group_m":[1,2]}]})");
  EXPECT_NE(groups.find("gemm[0].group_m: sums to 3 but m is 4"), std::string::npos) << groups;
  // Every problem at once, not just the first.
  const auto both = from_json_error(head + R"("gemm": [{"dtype":"fp61","m":0,"n":2,"k":3,"time_us":1}]})");
  EXPECT_NE(both.find("gemm[0].dtype"), std::string::npos) << both;
  EXPECT_NE(both.find("gemm[0].m: must be at least 1"), std::string::npos) << both;
  // Derived bandwidths are informative only: accepted and ignored.
  const auto ok = Measurements::from_json(nlohmann::json::parse(
      head + R"("collectives": [{"op":"send_recv","gpus":2,"nodes":2,"bytes":8,"time_us":2,"busbw_GBps":99}]})"));
  ASSERT_EQ(ok.collectives.size(), 1u);
  EXPECT_EQ(ok.collectives[0].nodes, 2);
}

TEST(Measurements, AppendConcatenatesAndKeepsMixedLabelsVisible) {
  Measurements a = sample_set();
  Measurements b;
  b.source = "vidur";
  b.gemm.push_back({"fp16", 1, 2, 3, {}, 4.0});
  a.append(b);
  EXPECT_EQ(a.gemm.size(), 3u);
  EXPECT_EQ(a.source, "moesim-calibrate + vidur");
  EXPECT_EQ(a.device, "NVIDIA A100-SXM4-80GB");  // b did not say
  Measurements empty;
  empty.append(a);
  EXPECT_EQ(empty.source, a.source);
  EXPECT_EQ(empty.collectives.size(), 2u);
}

TEST(Importers, VidurNetworkCsv) {
  const auto m = import_vidur_network_csv(read(data("vidur_all_reduce_excerpt.csv")), "ar.csv");
  EXPECT_EQ(m.source, "vidur");
  ASSERT_EQ(m.collectives.size(), 8u);
  const auto& first = m.collectives[0];  // 2 workers, 1 per node: two nodes
  EXPECT_EQ(first.op, "all_reduce");
  EXPECT_EQ(first.gpus, 2);
  EXPECT_EQ(first.nodes, 2);
  EXPECT_DOUBLE_EQ(first.bytes, 2048.0);
  EXPECT_NEAR(first.time_us, 43.0, 1e-9);
  EXPECT_EQ(m.collectives[4].gpus, 8);  // 8 workers, 8 per node
  EXPECT_EQ(m.collectives[4].nodes, 1);
  EXPECT_EQ(m.collectives[5].gpus, 16);  // 16 workers, 8 per node
  EXPECT_EQ(m.collectives[5].nodes, 2);

  const auto sr = import_vidur_network_csv(read(data("vidur_send_recv_excerpt.csv")), "sr.csv");
  ASSERT_EQ(sr.collectives.size(), 4u);
  EXPECT_EQ(sr.collectives[0].op, "send_recv");
  EXPECT_EQ(sr.collectives[0].nodes, 2);
  EXPECT_EQ(sr.collectives[2].nodes, 1);
  EXPECT_NEAR(sr.collectives[2].time_us, 8.0, 1e-9);
}

TEST(Importers, VidurCsvErrorsNameTheLineAndColumn) {
  std::string text = read(data("vidur_all_reduce_excerpt.csv"));
  text.replace(text.find(",2,10240,"), 9, ",2,10x40,");  // line 3, size column
  const auto e = input_error([&] { import_vidur_network_csv(text, "ar.csv"); });
  ASSERT_EQ(e.diagnostics().size(), 1u);
  EXPECT_EQ(e.diagnostics()[0].where.file, "ar.csv");
  EXPECT_EQ(e.diagnostics()[0].where.line, 3);
  EXPECT_GT(e.diagnostics()[0].where.column, 1);
  EXPECT_NE(std::string(e.what()).find("size: expected an integer, got '10x40'"), std::string::npos) << e.what();
  const auto missing = input_error([] { import_vidur_network_csv("a,b\n1,2\n", "x.csv"); });
  EXPECT_EQ(missing.diagnostics()[0].where.line, 1);
}

TEST(Importers, VidurMlpCsvGivesTwoGemmsPerShapeWithMedianOfRepeats) {
  const auto m = import_vidur_mlp_csv(read(data("vidur_mlp_excerpt.csv")), "mlp.csv");
  // Six rows, four distinct (num_tokens, TP): rows 1-2 and 4-5 repeat a shape.
  ASSERT_EQ(m.gemm.size(), 8u);
  const auto find = [&](std::int64_t mm, std::int64_t n, std::int64_t k) -> const GemmSample* {
    for (const auto& g : m.gemm)
      if (g.m == mm && g.n == n && g.k == k) return &g;
    return nullptr;
  };
  const auto* up = find(4096, 2 * 28672, 8192);  // gated: gate and up in one GEMM
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dtype, "fp16");
  EXPECT_NEAR(up->time_us, (15940.5 + 16134.5) / 2, 1e-6);
  const auto* down_tp8 = find(2048, 8192, 28672 / 8);
  ASSERT_NE(down_tp8, nullptr);
  EXPECT_NEAR(down_tp8->time_us, (547.0 + 552.0) / 2, 1e-6);
  const auto* one_token = find(1, 2 * 28672 / 8, 8192);
  ASSERT_NE(one_token, nullptr);
  EXPECT_NEAR(one_token->time_us, 77.0, 1e-6);
}

TEST(Importers, LlmcompassMatmulCsv) {
  const auto m = import_llmcompass_matmul_csv(read(data("llmcompass_matmul_excerpt.csv")), "mm.csv");
  ASSERT_EQ(m.gemm.size(), 5u);
  EXPECT_EQ(m.gemm[0].m, 64);
  EXPECT_EQ(m.gemm[0].n, 12288);
  EXPECT_EQ(m.gemm[0].k, 12288);
  EXPECT_NEAR(m.gemm[0].time_us, 190.0, 1e-9);
  // The file's own throughput column agrees with 2·M·N·K / time (101.7124 Tflops).
  EXPECT_NEAR(2.0 * 64 * 12288 * 12288 / (m.gemm[0].time_us * 1e-6) / 1e12, 101.71, 0.05);
  const auto e = input_error(
      [] { import_llmcompass_matmul_csv("64, 1, 1, 0.19ms, 1Tflops\n64, 1, 1, 0.19s, 1Tflops", "mm.csv"); });
  EXPECT_EQ(e.diagnostics()[0].where.line, 2);
}

TEST(Importers, NcclTestsCurrentLayout) {
  const auto m = import_nccl_tests(read(data("nccl_tests_all_reduce_8xa100.txt")), "ar.txt");
  EXPECT_EQ(m.source, "nccl-tests");
  EXPECT_EQ(m.device, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(m.environment["nccl_tests_version"], "2.13.9");
  ASSERT_EQ(m.collectives.size(), 7u);
  for (const auto& c : m.collectives) {
    EXPECT_EQ(c.op, "all_reduce");
    EXPECT_EQ(c.gpus, 8);
    EXPECT_EQ(c.nodes, 1);
  }
  EXPECT_DOUBLE_EQ(m.collectives[0].bytes, 1048576.0);
  EXPECT_DOUBLE_EQ(m.collectives[0].time_us, 64.0);
  EXPECT_DOUBLE_EQ(m.collectives[6].bytes, 67108864.0);
  EXPECT_DOUBLE_EQ(m.collectives[6].time_us, 675.0);
}

TEST(Importers, NcclTestsLegacyTwoNodeLayoutInfersAllReduce) {
  const auto m = import_nccl_tests(read(data("nccl_tests_allreduce_2x8xa100_legacy.txt")), "x.txt");
  EXPECT_EQ(m.environment["nccl_version"], "2.18.3+cuda12.2");
  ASSERT_EQ(m.collectives.size(), 7u);
  EXPECT_EQ(m.collectives[0].op, "all_reduce");  // redop sum, root -1, count = size / 2 bytes
  EXPECT_EQ(m.collectives[0].gpus, 16);
  EXPECT_EQ(m.collectives[0].nodes, 2);  // two host names in the Rank lines
  EXPECT_DOUBLE_EQ(m.collectives[0].time_us, 464.0);
}

TEST(Importers, NcclTestsOpFromStartLineHintOrLayout) {
  // all_gather and alltoall print the same columns: without a start line or a hint, say so.
  const std::string movement = nccl_table("", "none", -1, 4);
  const auto ambiguous = input_error([&] { import_nccl_tests(movement, "log.txt"); });
  EXPECT_NE(std::string(ambiguous.what()).find("cannot tell all_gather from alltoall"), std::string::npos);
  EXPECT_EQ(import_nccl_tests(movement, "log.txt", "alltoall").collectives.at(0).op, "all_to_all");
  EXPECT_EQ(import_nccl_tests(movement, "log.txt", "all_gather_perf").collectives.at(0).op, "all_gather");
  EXPECT_EQ(load_measurements(write_temp("alltoall_perf_4gpu.log", movement)).collectives.at(0).op, "all_to_all");
  // The log's own start line wins over the hint.
  const auto started = import_nccl_tests(nccl_table("all_gather_perf", "none", -1, 4), "log.txt", "alltoall");
  EXPECT_EQ(started.collectives.at(0).op, "all_gather");
  EXPECT_EQ(started.collectives.at(0).gpus, 4);
  EXPECT_DOUBLE_EQ(started.collectives.at(1).bytes, 2048.0);
  EXPECT_DOUBLE_EQ(started.collectives.at(1).time_us, 20.5);  // out-of-place, not in-place (20.1)
  EXPECT_THROW(import_nccl_tests(movement, "log.txt", "gather_scatter"), InputError);

  // Collectives moesim does not model are skipped, and the skip is recorded.
  const auto scatter = import_nccl_tests(nccl_table("", "sum", -1, 4), "rs.txt");  // per-rank count
  EXPECT_TRUE(scatter.collectives.empty());
  ASSERT_EQ(scatter.skipped.size(), 1u);
  EXPECT_NE(scatter.skipped[0].find("reduce_scatter"), std::string::npos);
  EXPECT_TRUE(import_nccl_tests(nccl_table("broadcast_perf", "none", 0, 1), "b.txt").collectives.empty());
  EXPECT_TRUE(import_nccl_tests(nccl_table("", "none", 0, 1), "b.txt").collectives.empty());

  // One log, several runs: each keeps its own op.
  const auto both = import_nccl_tests(
      "mpirun: launching\n" + nccl_table("all_reduce_perf", "sum", -1, 1) + nccl_table("alltoall_perf", "none", -1, 4),
      "sweep.log");
  ASSERT_EQ(both.collectives.size(), 4u);
  EXPECT_EQ(both.collectives[1].op, "all_reduce");
  EXPECT_EQ(both.collectives[2].op, "all_to_all");
}

TEST(Importers, NcclTestsErrorsNameTheLine) {
  std::string bad = nccl_table("all_reduce_perf", "sum", -1, 1);
  bad.replace(bad.find("20.50"), 5, "fast!");  // first data row, line 12
  const auto e = input_error([&] { import_nccl_tests(bad, "ar.txt"); });
  EXPECT_EQ(e.diagnostics()[0].where.line, 12);
  EXPECT_NE(std::string(e.what()).find("time: expected a number"), std::string::npos) << e.what();

  std::string twice = nccl_table("all_reduce_perf", "sum", -1, 1);
  twice.replace(twice.find("Rank  1 "), 8, "Rank  0 ");
  EXPECT_NE(std::string(input_error([&] { import_nccl_tests(twice, "t.txt"); }).what()).find("listed twice"),
            std::string::npos);
  const std::string crashed = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 4\n"
                              "node: Test CUDA failure common.cu:502 'an illegal memory access'\n";
  EXPECT_NE(std::string(input_error([&] { import_nccl_tests(crashed, "c.txt"); }).what()).find("no nccl-tests"),
            std::string::npos);
}

TEST(LoadMeasurements, RecognisesEveryFormatByContent) {
  EXPECT_EQ(load_measurements(data("vidur_all_reduce_excerpt.csv")).collectives.size(), 8u);
  EXPECT_EQ(load_measurements(data("vidur_send_recv_excerpt.csv")).collectives.size(), 4u);
  EXPECT_EQ(load_measurements(data("vidur_mlp_excerpt.csv")).gemm.size(), 8u);
  EXPECT_EQ(load_measurements(data("llmcompass_matmul_excerpt.csv")).gemm.size(), 5u);
  EXPECT_EQ(load_measurements(data("nccl_tests_all_reduce_8xa100.txt")).collectives.size(), 7u);
  EXPECT_EQ(load_measurements(data("nccl_tests_allreduce_2x8xa100_legacy.txt")).collectives.size(), 7u);
  const auto json = load_measurements(write_temp("m.json", sample_set().to_json().dump(2)));
  EXPECT_EQ(json.to_json(), sample_set().to_json());
}

TEST(Importers, CollectiveSweepCsvReadsTheGpuCountFromTheBusFactor) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string file = std::string(root ? root : ".") + "/tests/data/a100/all_reduce_4xa100_nvlink3.csv";
  const Measurements m = load_measurements(file);
  ASSERT_EQ(m.collectives.size(), 32u);  // 8 B ... 16 GB
  for (const auto& c : m.collectives) {
    EXPECT_EQ(c.op, "all_reduce");
    EXPECT_EQ(c.gpus, 4);  // busbw / algbw = 1.5 = 2(n-1)/n
    EXPECT_EQ(c.nodes, 1);
  }
  EXPECT_EQ(m.collectives.front().bytes, 8.0);
  EXPECT_DOUBLE_EQ(m.collectives.front().time_us, 12.52);
  EXPECT_EQ(m.collectives.back().bytes, 17179869184.0);
  EXPECT_DOUBLE_EQ(m.collectives.back().time_us, 110277.0);
  // 8 GPUs: factor 1.75; all-gather over 8: factor 0.875.
  const std::string eight = "size_bytes,latency_us,algbw_GBps,busbw_GBps\n1048576,20.0,52.4,91.7\n";
  EXPECT_EQ(import_collective_sweep_csv(eight, "x.csv", "all_reduce").collectives[0].gpus, 8);
  const std::string gather = "size_bytes,latency_us,algbw_GBps,busbw_GBps\n1048576,20.0,52.4,45.85\n";
  EXPECT_EQ(import_collective_sweep_csv(gather, "x.csv", "all_gather").collectives[0].gpus, 8);
  // The file name names the collective; without it, or with a ratio of no GPU count, a located error.
  const std::string unnamed = write_temp("sweep_4xa100.csv", eight);
  EXPECT_NE(std::string(input_error([&] { load_measurements(unnamed); }).what()).find("name the collective in the file name"),
            std::string::npos);
  // send/recv: bus factor 1, two GPUs; a byte-order mark before the header is fine.
  const std::string p2p = "\xEF\xBB\xBFsize_bytes,latency_us,algbw_GBps,busbw_GBps\n1048576,20.0,52.4,52.4\n";
  EXPECT_EQ(load_measurements(write_temp("sendrecv_perf.csv", p2p)).collectives[0].gpus, 2);
  EXPECT_EQ(load_measurements(write_temp("sendrecv_perf.csv", p2p)).collectives[0].op, "send_recv");
  const std::string odd = "size_bytes,latency_us,algbw_GBps,busbw_GBps\n1,1.0,1.0,1.0\n2,1.0,10.0,12.0\n";
  const auto e = input_error([&] { import_collective_sweep_csv(odd, "o.csv", "all_reduce"); });
  EXPECT_EQ(e.diagnostics()[0].where.line, 3);
  EXPECT_NE(std::string(e.what()).find("is no all_reduce bus factor of a GPU count"), std::string::npos) << e.what();
}

TEST(LoadMeasurements, UnrecognisedFilesAreSkippableButRecognisedBadOnesStayErrors) {
  EXPECT_FALSE(load_measurements_if_recognised(write_temp("README.md", "# data\nsome text\n")).has_value());
  EXPECT_FALSE(load_measurements_if_recognised(::testing::TempDir()).has_value());  // a directory
  EXPECT_TRUE(load_measurements_if_recognised(data("vidur_mlp_excerpt.csv")).has_value());
  EXPECT_THROW(load_measurements_if_recognised(write_temp("bad.json", "{ oops")), InputError);
  EXPECT_THROW(load_measurements_if_recognised(write_temp("x", "") + ".absent"), InputError);
}

TEST(LoadMeasurements, UnusableFilesAreInputErrorsAtThePath) {
  const std::string garbage = write_temp("garbage.txt", "hello,world\n1,2\n");
  const auto e = input_error([&] { load_measurements(garbage); });
  EXPECT_EQ(e.diagnostics()[0].where.file, garbage);
  EXPECT_NE(std::string(e.what()).find("unrecognised measurement format"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find(garbage), std::string::npos);

  const std::string missing = write_temp("x", "") + ".absent";
  EXPECT_EQ(input_error([&] { load_measurements(missing); }).diagnostics()[0].where.file, missing);
  EXPECT_THROW(load_measurements(write_temp("empty.csv", "")), InputError);

  const std::string syntax = write_temp("bad.json", "{\n  \"format\": \"moesim-measurements/1\",\n  oops\n}\n");
  const auto js = input_error([&] { load_measurements(syntax); });
  EXPECT_EQ(js.diagnostics()[0].where.line, 3);

  const std::string invalid =
      write_temp("invalid.json", R"({"format": "moesim-measurements/1", "gemm": [{}], "x": 1})");
  const auto iv = input_error([&] { load_measurements(invalid); });
  EXPECT_GE(iv.diagnostics().size(), 2u);  // every problem, each at the file
  EXPECT_EQ(iv.diagnostics()[0].where.file, invalid);
}

TEST(LoadMeasurements, FullSharedA100Files) {
  const char* dir = std::getenv("MOESIM_SHARED_DATA");
  const std::string root = std::string(dir ? dir : "../shared/data") + "/measured/a100/";
  if (!fs::exists(root + "nccl_all_reduce_a100_dgx.csv")) GTEST_SKIP() << root << " not present";
  EXPECT_EQ(load_measurements(root + "nccl_all_reduce_a100_dgx.csv").collectives.size(), 6958u);
  EXPECT_EQ(load_measurements(root + "nccl_send_recv_a100_dgx.csv").collectives.size(), 1988u);
  // 1044 rows over 1036 distinct (num_tokens, TP): two GEMMs each.
  EXPECT_EQ(load_measurements(root + "mlp_llama2_70b_a100.csv").gemm.size(), 2072u);
  EXPECT_EQ(load_measurements(root + "matmul_a100_torch_bmm.csv").gemm.size(), 20u);
}

}  // namespace moesim::calibration
