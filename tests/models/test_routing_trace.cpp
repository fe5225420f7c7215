// The `trace` routing model: reproduces real per-expert shares from the OLMoE/Mixtral CSV and the
// Switch JSON, picks rows by model/dataset/layer, and reports every problem as an InputError.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "models/routing.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// tests/data/routing/expert_counts_excerpt.csv (see its README for provenance).
std::string excerpt() {
  const std::string root = env("MOESIM_SOURCE_ROOT");
  return (fs::path(root.empty() ? "." : root) / "tests/data/routing/expert_counts_excerpt.csv").string();
}

RoutingContext context(int experts, int top_k, const std::string& model = "test") {
  RoutingContext c;
  c.experts = experts;
  c.top_k = top_k;
  c.moe_layers = 4;
  c.model_name = model;
  c.seed = 1;
  return c;
}

std::unique_ptr<RoutingModel> make_trace(const std::string& yaml, const RoutingContext& ctx) {
  const auto& info = routing_models().get("trace").value;
  Diagnostics d;
  const ParamSet p = read_params(YAML::Load(yaml), info.params, SourceMap("scenario.yaml"), d);
  EXPECT_TRUE(d.empty()) << d.to_string();
  return info.make(p, ctx, SourceLocation{"scenario.yaml", 3, 5});
}

std::string error_of(const std::string& yaml, const RoutingContext& ctx) {
  try {
    make_trace(yaml, ctx);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Counts of one (model, dataset, layer) read straight from the CSV, by expert id.
std::vector<double> csv_counts(const std::string& file, const std::string& prefix) {
  std::ifstream in(file);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const auto rest = line.substr(prefix.size());
    const auto comma = rest.find(',');
    const int e = std::stoi(rest.substr(0, comma));
    if (static_cast<int>(out.size()) <= e) out.resize(e + 1, 0.0);
    out[e] += std::stod(rest.substr(comma + 1));
  }
  return out;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("moesim_test_" + name);
  std::ofstream(p) << text;
  return p.string();
}

TEST(TraceRouting, ReproducesOlmoeShares) {
  // OLMoE layer 0 on arXiv: top-8 of 64, strongly skewed (max/mean ~ 2.5-7.8 per the data README).
  const auto m = make_trace("{file: " + excerpt() + ", model: olmoe, dataset: arxiv, layer: 0}", context(64, 8));
  auto counts = csv_counts(excerpt(), "olmoe,arxiv,0,");
  ASSERT_EQ(counts.size(), 64u);
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  Rng rng = Rng::derive(1, Stream::kBatchRouting, 0, 0);
  const std::int64_t T = 200000;
  const LayerRouting r = m->route(0, 0, T, rng);
  const auto got = r.expert_counts();
  for (int e = 0; e < 64; ++e) {
    const double p = counts[e] / total;
    const double pi = std::min(1.0, 8 * p);  // no expert is capped in this layer
    EXPECT_LT(8 * p, 1.0);
    EXPECT_NEAR(static_cast<double>(got[e]) / T, pi, 4 * std::sqrt(pi * (1 - pi) / T) + 1e-9) << e;
  }
  double max_share = 0;
  for (double c : counts) max_share = std::max(max_share, c / total);
  EXPECT_NEAR(r.skewness(), max_share * 64, max_share * 64 * 0.05);
}

TEST(TraceRouting, ModelFromPresetNameDatasetsSummedLayersCycled) {
  // "mistral" rows serve the mixtral-8x7b preset; default dataset 'all', layer -1 cycles 0, 15.
  const auto m = make_trace("{file: " + excerpt() + "}", context(8, 2, "mixtral-8x7b"));
  Rng rng(1);
  const auto l0 = m->distribution(0, 0, rng), l1 = m->distribution(0, 1, rng), l2 = m->distribution(0, 2, rng);
  const auto c0 = csv_counts(excerpt(), "mistral,arxiv,0,"), c15 = csv_counts(excerpt(), "mistral,arxiv,15,");
  const double s0 = std::accumulate(c0.begin(), c0.end(), 0.0), s15 = std::accumulate(c15.begin(), c15.end(), 0.0);
  for (int e = 0; e < 8; ++e) {
    EXPECT_NEAR(l0[e], c0[e] / s0, 1e-12);
    EXPECT_NEAR(l1[e], c15[e] / s15, 1e-12);
  }
  EXPECT_EQ(l0, l2);
  // Two datasets of OLMoE summed.
  const auto both = make_trace("{file: " + excerpt() + ", model: olmoe, layer: 0}", context(64, 8));
  const auto a = csv_counts(excerpt(), "olmoe,arxiv,0,"), g = csv_counts(excerpt(), "olmoe,github,0,");
  const double sa = std::accumulate(a.begin(), a.end(), 0.0), sg = std::accumulate(g.begin(), g.end(), 0.0);
  EXPECT_NEAR(both->distribution(0, 0, rng)[7], (a[7] + g[7]) / (sa + sg), 1e-12);
}

TEST(TraceRouting, RelativeToBaseDir) {
  RoutingContext ctx = context(8, 2);
  ctx.base_dir = fs::path(excerpt()).parent_path().string();
  EXPECT_NO_THROW(make_trace("{file: expert_counts_excerpt.csv, model: mistral}", ctx));
}

TEST(TraceRouting, Errors) {
  const RoutingContext mix = context(8, 2, "mixtral-8x7b");
  EXPECT_NE(error_of("{file: /nonexistent/trace.csv}", mix).find("cannot open"), std::string::npos);
  const std::string bad_model = error_of("{file: " + excerpt() + ", model: deepseek}", mix);
  EXPECT_NE(bad_model.find("available: mistral, olmoe"), std::string::npos) << bad_model;
  const std::string bad_ds = error_of("{file: " + excerpt() + ", model: mistral, dataset: c4}", mix);
  EXPECT_NE(bad_ds.find("arxiv"), std::string::npos) << bad_ds;
  const std::string bad_layer = error_of("{file: " + excerpt() + ", model: mistral, layer: 7}", mix);
  EXPECT_NE(bad_layer.find("available: 0, 15"), std::string::npos) << bad_layer;
  const std::string experts = error_of("{file: " + excerpt() + ", model: olmoe}", mix);
  EXPECT_NE(experts.find("64 experts, but the model has 8"), std::string::npos) << experts;
  const std::string unnamed = error_of("{file: " + excerpt() + "}", context(8, 2, "qwen3-30b-a3b"));
  EXPECT_NE(unnamed.find("choose one with 'model'"), std::string::npos) << unnamed;
  // Errors about a key point at that key in the scenario.
  try {
    make_trace("{file: " + excerpt() + ",\n model: nope}", mix);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.diagnostics().at(0).where.line, 2);
  }
  const std::string malformed = write_temp("bad.csv", "model,dataset,layer,expert,count\nm,d,0,0,12\nm,d,0,x,3\n");
  EXPECT_NE(error_of("{file: " + malformed + "}", context(1, 1)).find("bad.csv:3"), std::string::npos);
  const std::string header = write_temp("hdr.csv", "model,layer,expert,count\n");
  EXPECT_NE(error_of("{file: " + header + "}", context(1, 1)).find("'dataset'"), std::string::npos);
}

TEST(TraceRouting, JsonLayoutAndZeroCountExperts) {
  const std::string file = write_temp(
      "counts.json", R"({"num_experts": 4, "layers": [1, 3],
        "expert_usage_by_layer": {"1": {"0": 30, "1": 10, "2": 0}, "3": {"0": 1, "1": 1, "2": 1, "3": 1}}})");
  const auto m = make_trace("{file: " + file + "}", context(4, 1));
  Rng rng(1);
  const auto l1 = m->distribution(0, 0, rng);
  EXPECT_EQ(l1, (std::vector<double>{0.75, 0.25, 0.0, 0.0}));  // expert 3 absent = 0
  EXPECT_DOUBLE_EQ(m->distribution(0, 1, rng)[2], 0.25);
  Rng r = Rng::derive(1, Stream::kBatchRouting, 0, 0);
  const auto c = m->route(0, 0, 10000, r).expert_counts();
  EXPECT_EQ(c[2] + c[3], 0);  // exact zeros are never selected
  EXPECT_NE(error_of("{file: " + file + ", model: x}", context(4, 1)).find("JSON"), std::string::npos);
}

TEST(TraceRouting, SharedSwitchJson) {
  const std::string data = env("MOESIM_SHARED_DATA");
  const fs::path file = fs::path(data) / "routing/switch_base_128_expert_counts.json";
  if (data.empty() || !fs::exists(file)) GTEST_SKIP() << "shared routing data not available";
  const auto m = make_trace("{file: " + file.string() + ", layer: 1}", context(128, 1, "switch-base-128"));
  // Layer 1's usage: 206,866 selections, top expert 47 with 10,027 (the file's layer_analysis).
  Rng rng(1);
  const auto p = m->distribution(0, 0, rng);
  EXPECT_NEAR(p[47], 10027.0 / 206866.0, 1e-12);
  Rng r = Rng::derive(1, Stream::kBatchRouting, 0, 0);
  const auto skew = m->route(0, 0, 206866, r).skewness();
  EXPECT_NEAR(skew, 10027.0 / 206866.0 * 128, 1.0);  // max/mean ~ 6.2
  EXPECT_THROW(make_trace("{file: " + file.string() + "}", context(64, 1)), InputError);
}

}  // namespace
}  // namespace moesim
