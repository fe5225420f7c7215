// The serving workload: length distributions, arrival processes, determinism and request traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/diagnostics.hpp"
#include "serving/request_trace.hpp"
#include "serving/workload.hpp"

namespace moesim {
namespace {

constexpr int kDraws = 20000;

struct Stats {
  double mean = 0.0, sd = 0.0;
  std::int64_t lo = 0, hi = 0;
};

Stats draw(const LengthDist& d, std::uint64_t seed = 7, int n = kDraws) {
  Rng rng(seed);
  Stats st;
  st.lo = std::numeric_limits<std::int64_t>::max();
  st.hi = std::numeric_limits<std::int64_t>::min();
  double sum = 0.0, sum2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const auto v = d.sample(rng);
    st.lo = std::min(st.lo, v);
    st.hi = std::max(st.hi, v);
    sum += static_cast<double>(v);
    sum2 += static_cast<double>(v) * static_cast<double>(v);
  }
  st.mean = sum / n;
  st.sd = std::sqrt(std::max(0.0, sum2 / n - st.mean * st.mean));
  return st;
}

// The mean is within 5 standard errors of `expected`.
void expect_mean(const Stats& st, double expected, int n = kDraws) {
  EXPECT_NEAR(st.mean, expected, 5.0 * st.sd / std::sqrt(static_cast<double>(n)) + 1e-9);
}

LengthDist uniform(std::int64_t lo, std::int64_t hi) {
  LengthDist d;
  d.kind = LengthDist::Kind::kUniform;
  d.min = lo;
  d.max = hi;
  return d;
}
LengthDist normal(double mean, double sd, std::int64_t lo, std::int64_t hi) {
  LengthDist d;
  d.kind = LengthDist::Kind::kNormal;
  d.mean = mean;
  d.std = sd;
  d.min = lo;
  d.max = hi;
  return d;
}
LengthDist zipf(double s, std::int64_t lo, std::int64_t hi) {
  LengthDist d;
  d.kind = LengthDist::Kind::kZipf;
  d.s = s;
  d.min = lo;
  d.max = hi;
  return d;
}

ServingWorkload open_loop(ArrivalSpec::Process p, double rate, std::int64_t requests, double cv = 1.0) {
  ServingWorkload w;
  w.requests = requests;
  w.arrival.process = p;
  w.arrival.rate_per_s = rate;
  w.arrival.cv = cv;
  w.prompt = uniform(100, 2000);
  w.output = zipf(1.1, 10, 500);
  return w;
}

// Mean and coefficient of variation of the gaps between arrivals (the first from 0).
std::pair<double, double> gap_stats(const std::vector<RequestSpec>& reqs) {
  double sum = 0.0, sum2 = 0.0;
  Tick prev = 0;
  for (const auto& r : reqs) {
    const double g = ticks_to_seconds(r.arrival - prev);
    prev = r.arrival;
    sum += g;
    sum2 += g * g;
  }
  const double n = static_cast<double>(reqs.size());
  const double mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean) / mean};
}

std::string source_root() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return root ? root : ".";
}

// Every diagnostic of parsing `csv`, joined; "" when it parses.
std::string trace_errors(const std::string& csv) {
  try {
    parse_request_trace(csv, "t.csv");
  } catch (const InputError& e) {
    std::string out;
    for (const auto& d : e.diagnostics()) out += d.to_string() + "\n";
    return out;
  }
  return "";
}

}  // namespace

TEST(LengthDist, FixedIsConstant) {
  LengthDist d;
  d.fixed = 512;
  const Stats st = draw(d);
  EXPECT_EQ(st.lo, 512);
  EXPECT_EQ(st.hi, 512);
  EXPECT_EQ(d.smallest(), 512);
  EXPECT_EQ(d.largest(), 512);
  EXPECT_DOUBLE_EQ(d.expected(), 512.0);
}

TEST(LengthDist, UniformCoversItsRangeWithTheRightMean) {
  const LengthDist d = uniform(10, 100);
  const Stats st = draw(d);
  EXPECT_EQ(st.lo, 10);  // 20k draws over 91 values reach both ends
  EXPECT_EQ(st.hi, 100);
  EXPECT_DOUBLE_EQ(d.expected(), 55.0);
  expect_mean(st, 55.0);
  EXPECT_NEAR(st.sd, std::sqrt((91.0 * 91.0 - 1.0) / 12.0), 1.0);
  const Stats one = draw(uniform(7, 7), 3, 100);
  EXPECT_EQ(one.lo, 7);
  EXPECT_EQ(one.hi, 7);
}

TEST(LengthDist, NormalIsTruncatedAndItsMeanMatches) {
  const LengthDist wide = normal(500, 100, 1, 0);  // max 0: mean + 4 std
  EXPECT_EQ(wide.largest(), 900);
  EXPECT_EQ(wide.smallest(), 1);
  const Stats st = draw(wide);
  EXPECT_GE(st.lo, 1);
  EXPECT_LE(st.hi, 900);
  EXPECT_NEAR(wide.expected(), 500.0, 0.5);
  expect_mean(st, wide.expected());
  EXPECT_NEAR(st.sd, 100.0, 3.0);

  // Cut hard on both sides: the mean moves and expected() follows it.
  const LengthDist cut = normal(100, 100, 80, 400);
  const Stats c = draw(cut);
  EXPECT_GE(c.lo, 80);
  EXPECT_LE(c.hi, 400);
  EXPECT_GT(cut.expected(), 150.0);
  expect_mean(c, cut.expected());
}

TEST(LengthDist, ZipfFavoursSmallValuesWithTheExactPmf) {
  const LengthDist d = zipf(1.2, 5, 14);
  std::map<std::int64_t, int> count;
  Rng rng(11);
  for (int i = 0; i < kDraws; ++i) ++count[d.sample(rng)];
  double z = 0.0;
  for (int k = 1; k <= 10; ++k) z += std::pow(k, -1.2);
  EXPECT_EQ(count.begin()->first, 5);
  EXPECT_EQ(count.rbegin()->first, 14);
  for (int k = 1; k <= 10; ++k) {
    const double p = std::pow(k, -1.2) / z;
    const double sigma = std::sqrt(kDraws * p * (1.0 - p));
    EXPECT_NEAR(count[4 + k], kDraws * p, 5.0 * sigma) << "value " << 4 + k;
  }
  EXPECT_GT(count[5], count[6]);
  EXPECT_GT(count[6], count[8]);
  expect_mean(draw(d), d.expected());

  // A long range (rejection-inversion, O(1) per draw): small values dominate.
  const LengthDist wide = zipf(1.0, 100, 32000);
  const Stats st = draw(wide);
  EXPECT_GE(st.lo, 100);
  EXPECT_LE(st.hi, 32000);
  EXPECT_LT(wide.expected(), 0.5 * (100 + 32000) / 4);
  expect_mean(st, wide.expected());
  Rng r2(5);
  int at_min = 0;
  for (int i = 0; i < kDraws; ++i) at_min += wide.sample(r2) == 100;
  EXPECT_GT(at_min, kDraws / 20);  // P(min) = 1/H(31901) ≈ 0.094
}

TEST(Arrivals, PoissonGapsHaveMeanOneOverRateAndCvOne) {
  const auto reqs = generate_requests(open_loop(ArrivalSpec::Process::kPoisson, 20.0, kDraws), 1);
  ASSERT_EQ(reqs.size(), static_cast<std::size_t>(kDraws));
  EXPECT_GT(reqs[0].arrival, 0);  // the first arrives after the first gap
  for (std::size_t i = 1; i < reqs.size(); ++i) ASSERT_GE(reqs[i].arrival, reqs[i - 1].arrival);
  for (std::size_t i = 0; i < reqs.size(); ++i) ASSERT_EQ(reqs[i].id, static_cast<std::int64_t>(i));
  const auto [mean, cv] = gap_stats(reqs);
  EXPECT_NEAR(mean, 0.05, 5.0 * 0.05 / std::sqrt(kDraws));
  EXPECT_NEAR(cv, 1.0, 0.04);
}

TEST(Arrivals, GammaGapsHaveTheRequestedCv) {
  for (const double cv : {0.5, 1.0, 2.0}) {
    const auto reqs = generate_requests(open_loop(ArrivalSpec::Process::kGamma, 10.0, kDraws, cv), 3);
    const auto [mean, got_cv] = gap_stats(reqs);
    EXPECT_NEAR(mean, 0.1, 5.0 * 0.1 * cv / std::sqrt(kDraws)) << "cv " << cv;
    EXPECT_NEAR(got_cv, cv, 0.08 * cv) << "cv " << cv;
    EXPECT_GT(reqs[0].arrival, 0);
  }
}

TEST(Arrivals, ConstantRateIsExactInTicks) {
  auto reqs = generate_requests(open_loop(ArrivalSpec::Process::kConstant, 20.0, 100), 1);
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(reqs[i].arrival, static_cast<Tick>(i) * 50'000'000'000);
  reqs = generate_requests(open_loop(ArrivalSpec::Process::kConstant, 3.0, 4), 1);
  EXPECT_EQ(reqs[1].arrival, 333'333'333'333);  // 1/3 s, rounded to the picosecond
  EXPECT_EQ(reqs[2].arrival, 666'666'666'667);
  EXPECT_EQ(reqs[3].arrival, 1'000'000'000'000);
}

TEST(Arrivals, ClosedLoopLeavesArrivalToTheDriver) {
  ServingWorkload w = open_loop(ArrivalSpec::Process::kClosed, 1.0, 50);
  w.arrival.clients = 4;
  const auto reqs = generate_requests(w, 1);
  ASSERT_EQ(reqs.size(), 50u);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.arrival, -1);
    EXPECT_GE(r.prompt_tokens, 100);
    EXPECT_LE(r.prompt_tokens, 2000);
  }
}

TEST(Arrivals, SameSeedSameRequestsOtherSeedOthers) {
  for (const auto p : {ArrivalSpec::Process::kPoisson, ArrivalSpec::Process::kGamma}) {
    const ServingWorkload w = open_loop(p, 10.0, 500, 1.5);
    const auto a = generate_requests(w, 42), b = generate_requests(w, 42), c = generate_requests(w, 43);
    ASSERT_EQ(a.size(), b.size());
    int same_arrival = 0, same_prompt = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].arrival, b[i].arrival);
      EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
      EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
      same_arrival += a[i].arrival == c[i].arrival;
      same_prompt += a[i].prompt_tokens == c[i].prompt_tokens;
    }
    EXPECT_LT(same_arrival, 5);
    EXPECT_LT(same_prompt, 20);
  }
}

TEST(Arrivals, ChangingTheRateKeepsEachRequestsLengths) {
  const auto slow = generate_requests(open_loop(ArrivalSpec::Process::kPoisson, 5.0, 300), 9);
  const auto fast = generate_requests(open_loop(ArrivalSpec::Process::kGamma, 80.0, 300, 3.0), 9);
  const auto fixed = generate_requests(open_loop(ArrivalSpec::Process::kConstant, 1.0, 300), 9);
  ASSERT_EQ(slow.size(), fast.size());
  int different_arrival = 0;
  for (std::size_t i = 0; i < slow.size(); ++i) {
    EXPECT_EQ(slow[i].prompt_tokens, fast[i].prompt_tokens) << i;
    EXPECT_EQ(slow[i].output_tokens, fast[i].output_tokens) << i;
    EXPECT_EQ(slow[i].prompt_tokens, fixed[i].prompt_tokens) << i;
    different_arrival += slow[i].arrival != fast[i].arrival;
  }
  EXPECT_GT(different_arrival, 290);
  // Fewer requests: the same first requests.
  const auto fewer = generate_requests(open_loop(ArrivalSpec::Process::kPoisson, 5.0, 100), 9);
  for (std::size_t i = 0; i < fewer.size(); ++i) {
    EXPECT_EQ(fewer[i].arrival, slow[i].arrival);
    EXPECT_EQ(fewer[i].prompt_tokens, slow[i].prompt_tokens);
  }
}

TEST(RequestTrace, ExampleFileRoundTrips) {
  const std::string path = source_root() + "/scenarios/serving/traces/example.csv";
  const auto rows = read_request_trace(path);
  ASSERT_EQ(rows.size(), 200u);
  EXPECT_DOUBLE_EQ(rows[0].arrived_at_s, 0.093607);
  EXPECT_EQ(rows[0].prompt_tokens, 698);
  EXPECT_EQ(rows[0].output_tokens, 33);
  EXPECT_EQ(rows[0].line, 2);
  double sum_prompt = 0.0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_GE(rows[i].prompt_tokens, 100);
    EXPECT_LE(rows[i].prompt_tokens, 2000);
    EXPECT_GE(rows[i].output_tokens, 20);
    EXPECT_LE(rows[i].output_tokens, 400);
    if (i > 0) {
      EXPECT_GE(rows[i].arrived_at_s, rows[i - 1].arrived_at_s);
    }
    sum_prompt += static_cast<double>(rows[i].prompt_tokens);
  }
  EXPECT_NEAR(rows.back().arrived_at_s / 200.0, 0.1, 0.03);  // ~10 requests/s
  EXPECT_NEAR(sum_prompt / 200.0, 544.0, 1.0);

  ServingWorkload w;
  w.arrival.process = ArrivalSpec::Process::kTrace;
  w.arrival.resolved_file = path;
  w.requests = 50;
  auto reqs = generate_requests(w, 1);
  ASSERT_EQ(reqs.size(), 50u);
  EXPECT_EQ(reqs[0].arrival, 93'607'000'000);
  EXPECT_EQ(reqs[0].prompt_tokens, 698);
  EXPECT_EQ(reqs[49].output_tokens, rows[49].output_tokens);
  w.requests = 1000;  // more than the trace holds: every row once
  reqs = generate_requests(w, 1);
  EXPECT_EQ(reqs.size(), 200u);
  EXPECT_EQ(reqs.back().id, 199);
}

TEST(RequestTrace, ColumnsInAnyOrderExtraColumnsAndTiesAreFine) {
  const auto rows = parse_request_trace(
      "id,output_tokens,arrived_at_s,prompt_tokens,note\r\n1,5,0,10,a\r\n\r\n2,6,0,11,b\r\n3, 7 ,1.5,12,c\r\n",
      "t.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].prompt_tokens, 11);
  EXPECT_EQ(rows[1].line, 4);
  EXPECT_EQ(rows[2].output_tokens, 7);
  EXPECT_DOUBLE_EQ(rows[2].arrived_at_s, 1.5);
}

TEST(RequestTrace, BadTracesAreLocatedAtTheCell) {
  const std::string h = "arrived_at_s,prompt_tokens,output_tokens\n";
  EXPECT_NE(trace_errors("arrived_at_s,prompt_tokens\n0,1\n").find("t.csv:1:1: error: request trace header lacks column "
                                                                   "'output_tokens'"),
            std::string::npos);
  EXPECT_NE(trace_errors("\n\nprompt_tokens,output_tokens\n").find("t.csv:3:1: error: request trace header lacks column "
                                                                   "'arrived_at_s'"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "0,10,5\n0.5,abc,5\n").find("t.csv:3:5: error: 'prompt_tokens' 'abc' is not a number"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "-1,10,5\n").find("t.csv:2:1: error: 'arrived_at_s' must be >= 0"), std::string::npos);
  EXPECT_NE(trace_errors(h + "2,10,5\n1,10,5\n").find("t.csv:3:1: error: 'arrived_at_s' (1) is earlier than the previous "
                                                      "row's (line 2): rows must be sorted"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "0,0,5\n").find("t.csv:2:3: error: 'prompt_tokens' must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(trace_errors(h + "0,10,-5\n").find("t.csv:2:6: error: 'output_tokens' must be >= 1, got -5"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "0,10,2.5\n").find("t.csv:2:6: error: 'output_tokens' must be a whole number"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "nan,10,5\n").find("t.csv:2:1: error: 'arrived_at_s' 'nan' is not a finite number"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "0,inf,5\n").find("t.csv:2:3: error: 'prompt_tokens' 'inf' is not a finite number"),
            std::string::npos);
  EXPECT_NE(trace_errors(h + "0,10\n").find("t.csv:2:5: error: row lacks column 'output_tokens'"), std::string::npos);
  EXPECT_NE(trace_errors("").find("t.csv:1:1: error: request trace is empty"), std::string::npos);
  EXPECT_NE(trace_errors(h).find("t.csv:1:1: error: request trace has a header but no rows"), std::string::npos);
  // Every problem at once, each at its line.
  const std::string all = trace_errors(h + "0,0,5\n0.1,10,0\n");
  EXPECT_NE(all.find("t.csv:2:"), std::string::npos);
  EXPECT_NE(all.find("t.csv:3:"), std::string::npos);
}

TEST(RequestTrace, MissingFileAndDirectoryAreErrors) {
  const auto dir = std::filesystem::temp_directory_path() / "moesim_test_trace_dir";
  std::filesystem::create_directories(dir);
  auto message = [](const std::string& path) {
    try {
      read_request_trace(path);
    } catch (const InputError& e) {
      return e.diagnostics().at(0).to_string();
    }
    return std::string();
  };
  EXPECT_NE(message(dir.string()).find("is a directory"), std::string::npos);
  EXPECT_NE(message((dir / "absent.csv").string()).find("cannot open request trace"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace moesim
