// Importers: other tools' timing files → Measurements. Every parse error names file:line:column,
// because these files are long and hand-edited excerpts of them are common.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "calibrate/measurements.hpp"
#include "core/diagnostics.hpp"

namespace moesim::calibration {
namespace {

struct Field { std::string_view text; int column = 1; };  ///< a cell or token; 1-based column
struct Line { std::string_view text; int number = 0; };   ///< 1-based line number

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  for (int number = 1; !text.empty(); ++number) {
    const auto nl = text.find('\n');
    lines.push_back({text.substr(0, nl), number});
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

/// Splits at `sep` (',' for CSV; 0 for runs of blanks), trimming each piece.
std::vector<Field> split(std::string_view line, char sep) {
  std::vector<Field> out;
  std::size_t pos = 0;
  while (pos <= line.size()) {
    std::size_t end;
    if (sep) {
      end = std::min(line.find(sep, pos), line.size());
    } else {
      pos = line.find_first_not_of(" \t\r", pos);
      if (pos == std::string_view::npos) break;
      end = std::min(line.find_first_of(" \t\r", pos), line.size());
    }
    const std::string_view raw = line.substr(pos, end - pos);
    const std::string_view cell = trim(raw);
    const auto lead = cell.empty() ? 0 : static_cast<std::size_t>(cell.data() - raw.data());
    out.push_back({cell, static_cast<int>(pos + lead + 1)});
    pos = end + 1;
  }
  return out;
}

// The largest time or bandwidth a measurement file may state (1e15 µs is 31 years).
constexpr double kMaxMeasuredValue = 1e15;

/// Parses numbers in one file, throwing InputError at the offending cell.
class Cells {
 public:
  explicit Cells(std::string origin) : origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }

  [[noreturn]] void fail(int line, int column, const std::string& message) const {
    throw InputError(SourceLocation{origin_, line, column}, message);
  }

  double positive(const Line& l, const Field& f, std::string_view what) const {
    double v = 0.0;
    const auto [end, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
    if (f.text.empty() || ec != std::errc() || end != f.text.data() + f.text.size() || !std::isfinite(v))
      fail(l.number, f.column, std::string(what) + ": expected a number, got '" + std::string(f.text) + "'");
    if (v <= 0.0) fail(l.number, f.column, std::string(what) + ": must be positive, got " + std::string(f.text));
    // Times (ms or us) and bandwidths: a bound far past any measurement keeps unit conversions
    // (ms → us) finite, so a sample always reads back from JSON.
    if (v > kMaxMeasuredValue)
      fail(l.number, f.column, std::string(what) + ": must be at most 1e15, got " + std::string(f.text));
    return v;
  }

  /// An integer in [min, max]; `max` keeps sizes within the `int` fields and the arithmetic on them.
  std::int64_t integer(const Line& l, const Field& f, std::string_view what, std::int64_t min,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
    if (f.text.empty() || ec != std::errc() || end != f.text.data() + f.text.size())
      fail(l.number, f.column, std::string(what) + ": expected an integer, got '" + std::string(f.text) + "'");
    if (v < min)
      fail(l.number, f.column, std::string(what) + ": must be at least " + std::to_string(min) + ", got " +
                                   std::string(f.text));
    if (v > max)
      fail(l.number, f.column, std::string(what) + ": must be at most " + std::to_string(max) + ", got " +
                                   std::string(f.text));
    return v;
  }

 private:
  std::string origin_;
};

/// A CSV file with a header line: cells found by column name, every row as wide as the header.
/// (Neither vidur nor pandas quotes these numeric files, so quoting is not handled.)
class Csv : public Cells {
 public:
  struct Row {
    Line line;
    std::vector<Field> cells;
  };

  Csv(std::string_view text, std::string origin) : Cells(std::move(origin)) {
    for (const Line& l : split_lines(text)) {
      if (trim(l.text).empty()) continue;
      if (header_.line.number == 0) header_ = {l, split(l.text, ',')};
      else rows_.push_back({l, split(l.text, ',')});
    }
    if (header_.line.number == 0) fail(0, 0, "empty file");
    for (const Row& r : rows_)
      if (r.cells.size() != header_.cells.size())
        fail(r.line.number, 1, "row has " + std::to_string(r.cells.size()) + " cells but the header has " +
                                   std::to_string(header_.cells.size()));
  }

  std::optional<std::size_t> find(std::string_view name) const {
    for (std::size_t i = 0; i < header_.cells.size(); ++i)
      if (header_.cells[i].text == name) return i;
    return std::nullopt;
  }
  std::size_t column(std::string_view name) const {
    if (const auto i = find(name)) return *i;
    fail(header_.line.number, 1, "missing column '" + std::string(name) + "'");
  }
  const std::vector<Row>& rows() const { return rows_; }
  int header_line() const { return header_.line.number; }

  double positive(const Row& r, std::size_t col) const {
    return Cells::positive(r.line, r.cells[col], header_.cells[col].text);
  }
  std::int64_t integer(const Row& r, std::size_t col, std::int64_t min, std::int64_t max) const {
    return Cells::integer(r.line, r.cells[col], header_.cells[col].text, min, max);
  }

 private:
  Row header_;
  std::vector<Row> rows_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

/// Bytes per element of nccl-tests' type names (0 = unknown), to tell per-rank counts from
/// whole-buffer ones when the log does not say which collective ran.
std::int64_t element_bytes(std::string_view type) {
  if (type == "int8" || type == "uint8" || type.starts_with("f8")) return 1;
  if (type == "half" || type == "bfloat16") return 2;
  if (type == "float" || type == "int32" || type == "uint32") return 4;
  if (type == "double" || type == "int64" || type == "uint64") return 8;
  return 0;
}

/// Walks an nccl-tests log line by line. A log may hold several runs (a script that calls every
/// binary, each announced by "# Collective test starting"), inside launcher noise (mpirun banners,
/// NCCL INFO lines), which is skipped because only '#' lines and rows under a table header count.
class NcclTestsParser : Cells {
 public:
  NcclTestsParser(std::string origin, std::string hint) : Cells(std::move(origin)), hint_(std::move(hint)) {
    m_.source = "nccl-tests";
  }

  Measurements parse(std::string_view text) {
    for (const Line& l : split_lines(text)) {
      const std::string_view t = trim(l.text);
      if (t.starts_with("#")) comment(l, trim(t.substr(1)));
      else if (!t.empty() && std::isdigit(static_cast<unsigned char>(t[0]))) row(l);
      else if (const auto v = t.find("NCCL version "); v != std::string_view::npos && !has("nccl_version"))
        m_.environment["nccl_version"] = std::string(split(t.substr(v + 13), 0).at(0).text);  // NCCL's own line
    }
    if (m_.collectives.empty() && m_.skipped.empty()) fail(0, 0, "no nccl-tests result rows found");
    return std::move(m_);
  }

 private:
  /// One run: its op, its ranks and its table layout.
  struct Run {
    std::string op, skip;  ///< the collective, or why its rows are skipped
    bool skip_noted = false;
    std::int64_t threads = 0, gpus_per_thread = 0;
    std::vector<std::int64_t> ranks;
    std::vector<std::string> hosts;
    std::map<std::string, std::size_t, std::less<>> columns;  ///< first column of each name
    std::size_t width = 0;
  };

  bool has(const char* key) const { return m_.environment.contains(key); }

  void comment(const Line& l, std::string_view body) {
    const auto words = split(body, 0);
    if (words.empty()) return;
    if (body.starts_with("Collective test starting:")) {
      run_ = Run{};
      const std::string binary(trim(body.substr(body.find(':') + 1)));
      run_.op = collective_op_from_name(binary);
      if (run_.op.empty()) run_.skip = binary;
    } else if (body.starts_with("Collective test concluded")) {
      run_ = Run{};
    } else if (body.starts_with("nccl-tests version") && words.size() > 2) {
      m_.environment["nccl_tests_version"] = std::string(words[2].text);
    } else if (words[0].text == "nThread" && words.size() > 3) {
      // A new table follows; with no "starting" line (older nccl-tests) this also starts a new run.
      run_.ranks.clear();
      run_.hosts.clear();
      run_.columns.clear();
      run_.threads = integer(l, words[1], "nThread", 1, kMaxGpus);
      run_.gpus_per_thread = integer(l, words[3], "nGpus", 1, kMaxGpus);
      if (run_.threads * run_.gpus_per_thread > kMaxGpus)
        fail(l.number, words[3].column, "nThread x nGpus: " + std::to_string(run_.threads * run_.gpus_per_thread) +
                                            " GPUs, more than " + std::to_string(kMaxGpus));
      if (!has("nccl_tests_args")) m_.environment["nccl_tests_args"] = std::string(body);
    } else if (words[0].text == "Rank" && words.size() > 1) {
      rank(l, body, words);
    } else if (words[0].text == "size") {
      for (std::size_t i = 0; i < words.size(); ++i) run_.columns.emplace(std::string(words[i].text), i);
      if (!run_.columns.contains("time")) fail(l.number, 1, "nccl-tests table header without a 'time' column");
      run_.width = 0;  // rows must reach every column this parser reads
      for (const char* c : {"size", "count", "type", "redop", "root", "time"})
        if (const auto it = run_.columns.find(c); it != run_.columns.end())
          run_.width = std::max(run_.width, it->second + 1);
    }
  }

  // "#  Rank  0 Group  0 Pid  41233 on dgx-a100-01 device  0 [0000:07:00] NVIDIA A100-SXM4-80GB"
  void rank(const Line& l, std::string_view body, const std::vector<Field>& words) {
    const auto id = integer(l, words[1], "Rank", 0, kMaxGpus - 1);
    if (std::find(run_.ranks.begin(), run_.ranks.end(), id) != run_.ranks.end())
      fail(l.number, 1, "Rank " + std::to_string(id) + " is listed twice: several single-process copies of "
                        "nccl-tests ran side by side (build nccl-tests with MPI=1 to run one test over processes)");
    run_.ranks.push_back(id);
    // The host is the word after the first "on" (one per rank: more would count more nodes than GPUs).
    for (std::size_t i = 2; i + 1 < words.size(); ++i)
      if (words[i].text == "on") {
        const std::string host(words[i + 1].text);
        if (std::find(run_.hosts.begin(), run_.hosts.end(), host) == run_.hosts.end()) run_.hosts.push_back(host);
        break;
      }
    if (const auto bracket = body.find("] "); m_.device.empty() && bracket != std::string_view::npos)
      m_.device = std::string(trim(body.substr(bracket + 2)));
  }

  std::string_view cell(const std::vector<Field>& f, const char* name) const {
    const auto it = run_.columns.find(name);
    return it == run_.columns.end() ? std::string_view() : f[it->second].text;
  }

  /// The collective of a row whose run did not name it. nccl-tests prints redop "none" for the
  /// data-movement collectives, root >= 0 for rooted ones, and count = size / (element bytes · ranks)
  /// where the count is per rank (reduce_scatter, all_gather, alltoall).
  std::string infer_op(const Line& l, const std::vector<Field>& f, std::int64_t size, std::int64_t gpus) {
    const std::string_view redop = cell(f, "redop"), root = cell(f, "root");
    if (!root.empty() && root != "-1") {
      run_.skip = "broadcast or reduce (rooted)";
      return {};
    }
    if (!redop.empty() && redop != "none") {
      const std::string_view count = cell(f, "count");
      const auto width = element_bytes(cell(f, "type"));
      // count · width · gpus == size, without the product (count is as large as the file says).
      if (!count.empty() && gpus > 1 && width > 0 && size % (width * gpus) == 0 &&
          integer(l, {count, 1}, "count", 0) == size / (width * gpus)) {
        run_.skip = "reduce_scatter";
        return {};
      }
      return "all_reduce";
    }
    fail(l.number, 1, "cannot tell all_gather from alltoall: this nccl-tests output has no '# Collective test "
                      "starting' line; name the file after the binary (e.g. all_gather_perf.txt) or give the op");
  }

  void row(const Line& l) {
    if (run_.columns.empty()) return;  // numbers before any table header are launcher noise
    const auto f = split(l.text, 0);
    if (f.size() < run_.width)
      fail(l.number, 1, "nccl-tests row has " + std::to_string(f.size()) + " fields, expected at least " +
                            std::to_string(run_.width));
    const auto size = integer(l, f[run_.columns.at("size")], "size", 0);
    if (size == 0) return;  // nccl-tests -b 0 times an empty buffer: launch overhead only, no bytes to fit
    const std::int64_t gpus = run_.ranks.empty() ? run_.threads * run_.gpus_per_thread
                                                 : static_cast<std::int64_t>(run_.ranks.size());
    if (gpus == 0) fail(l.number, 1, "cannot tell how many GPUs ran this test: no '#  Rank' or '# nThread' lines");
    std::string op = run_.op;
    if (op.empty() && run_.skip.empty()) op = hint_.empty() ? infer_op(l, f, size, gpus) : hint_;
    if (!run_.skip.empty()) {
      if (!run_.skip_noted)
        m_.skipped.push_back(origin() + ":" + std::to_string(l.number) + ": " + run_.skip +
                             " rows skipped (moesim models all_reduce, all_gather, all_to_all and send_recv)");
      run_.skip_noted = true;
      return;
    }
    CollectiveSample c;
    c.op = op;
    c.gpus = static_cast<int>(gpus);
    c.nodes = std::max<int>(1, static_cast<int>(run_.hosts.size()));
    c.bytes = static_cast<double>(size);
    c.time_us = positive(l, f[run_.columns.at("time")], "time");  // the first "time" is out-of-place
    m_.collectives.push_back(c);
  }

  std::string hint_;
  Run run_;
  Measurements m_;
};

}  // namespace

Measurements import_nccl_tests(const std::string& text, const std::string& origin, const std::string& op_hint) {
  const std::string op = op_hint.empty() ? "" : collective_op_from_name(op_hint);
  if (!op_hint.empty() && op.empty())
    throw InputError(SourceLocation{origin, 0, 0},
                     unknown_name_message("collective op", op_hint,
                                          {"all_reduce", "all_gather", "all_to_all", "send_recv"}));
  return NcclTestsParser(origin, op).parse(text);
}

Measurements import_nccl_tests(const std::string& text, const std::string& origin) {
  return import_nccl_tests(text, origin, "");
}

Measurements import_vidur_network_csv(const std::string& text, const std::string& origin) {
  const Csv csv(text, origin);
  // The op is in the time column's name: time_stats.all_reduce.median or time_stats.send_recv.median.
  std::string op;
  std::optional<std::size_t> time;
  for (const char* candidate : {"all_reduce", "send_recv"})
    if (!time && (time = csv.find(std::string("time_stats.") + candidate + ".median"))) op = candidate;
  if (!time)
    csv.fail(csv.header_line(), 1, "missing column 'time_stats.all_reduce.median' or 'time_stats.send_recv.median'");
  const std::size_t workers = csv.column("num_workers"), size = csv.column("size"),
                    per_node = csv.column("devices_per_node");

  Measurements m;
  m.source = "vidur";
  for (const auto& row : csv.rows()) {
    const auto gpus = csv.integer(row, workers, 1, kMaxGpus), gpus_per_node = csv.integer(row, per_node, 1, kMaxGpus);
    const auto bytes = static_cast<double>(csv.integer(row, size, 1, std::numeric_limits<std::int64_t>::max()));
    const int nodes = static_cast<int>((gpus + gpus_per_node - 1) / gpus_per_node);
    m.collectives.push_back({op, static_cast<int>(gpus), nodes, bytes, 1e3 * csv.positive(row, *time)});  // ms → us
  }
  if (m.collectives.empty()) csv.fail(csv.header_line(), 1, "no data rows");
  return m;
}

Measurements import_vidur_mlp_csv(const std::string& text, const std::string& origin) {
  const Csv csv(text, origin);
  const std::size_t up = csv.column("time_stats.mlp_up_proj.median"),
                    down = csv.column("time_stats.mlp_down_proj.median"), tokens = csv.column("num_tokens"),
                    embd = csv.column("n_embd"), expanded = csv.column("n_expanded_embd"),
                    gated = csv.column("use_gated_mlp"), tp = csv.column("num_tensor_parallel_workers");

  // vidur profiles some shapes more than once; one sample per shape (the median) keeps them from
  // weighing more in the fit. std::map keyed on (m, n, k) also gives a stable output order.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<double>> times;
  for (const auto& row : csv.rows()) {
    const auto m = csv.integer(row, tokens, 1, kMaxGemmDim), e = csv.integer(row, embd, 1, kMaxGemmDim);
    const auto ff = csv.integer(row, expanded, 1, kMaxGemmDim), t = csv.integer(row, tp, 1, kMaxGpus);
    if (ff % t != 0)
      csv.fail(row.line.number, row.cells[tp].column,
               "n_expanded_embd " + std::to_string(ff) + " does not split over " + std::to_string(t) + " GPUs");
    const std::string_view g = row.cells[gated].text;
    const bool is_gated = g == "True" || g == "true" || g == "1";
    if (!is_gated && g != "False" && g != "false" && g != "0")
      csv.fail(row.line.number, row.cells[gated].column, "use_gated_mlp: expected True or False");
    // A gated MLP's up projection computes the gate and the up matrices in one GEMM.
    times[{m, (is_gated ? 2 : 1) * ff / t, e}].push_back(1e3 * csv.positive(row, up));
    times[{m, e, ff / t}].push_back(1e3 * csv.positive(row, down));
  }

  Measurements out;
  out.source = "vidur";
  for (const auto& [shape, samples] : times) {
    const auto [m, n, k] = shape;
    out.gemm.push_back({"fp16", m, n, k, {}, median(samples)});
  }
  if (out.gemm.empty()) csv.fail(csv.header_line(), 1, "no data rows");
  return out;
}

Measurements import_llmcompass_matmul_csv(const std::string& text, const std::string& origin) {
  const Cells cells(origin);
  Measurements m;
  m.source = "llmcompass";
  for (const Line& l : split_lines(text)) {
    if (trim(l.text).empty()) continue;
    // "M, N, K, 0.1900ms, 101.7124Tflops": no header; the throughput is derived, so it is not kept.
    const auto f = split(l.text, ',');
    if (f.size() != 5)
      cells.fail(l.number, 1, "expected 5 cells (M, N, K, time, throughput), got " + std::to_string(f.size()));
    GemmSample g;
    g.dtype = "fp16";
    g.m = cells.integer(l, f[0], "M", 1, kMaxGemmDim);
    g.n = cells.integer(l, f[1], "N", 1, kMaxGemmDim);
    g.k = cells.integer(l, f[2], "K", 1, kMaxGemmDim);
    const std::string_view time = f[3].text;
    if (!time.ends_with("ms") && !time.ends_with("us"))
      cells.fail(l.number, f[3].column, "time: expected a value in ms or us, got '" + std::string(time) + "'");
    const double value = cells.positive(l, {time.substr(0, time.size() - 2), f[3].column}, "time");
    g.time_us = time.ends_with("ms") ? 1e3 * value : value;
    m.gemm.push_back(g);
  }
  if (m.gemm.empty()) cells.fail(0, 0, "no data rows");
  return m;
}

Measurements import_collective_sweep_csv(const std::string& text, const std::string& origin, const std::string& op) {
  // A UTF-8 byte-order mark and leading '#' lines (provenance comments) are blanked, so line
  // numbers still match the file.
  std::string body = text;
  if (body.rfind("\xEF\xBB\xBF", 0) == 0) body.erase(0, 3);
  for (std::size_t at = 0; at < body.size() && body[at] == '#';) {
    const std::size_t nl = body.find('\n', at);
    const std::size_t end = nl == std::string::npos ? body.size() : nl;
    std::fill(body.begin() + static_cast<std::ptrdiff_t>(at), body.begin() + static_cast<std::ptrdiff_t>(end), ' ');
    at = end + 1;
  }
  const Csv csv(body, origin);
  const std::size_t size = csv.column("size_bytes"), latency = csv.column("latency_us"), alg = csv.column("algbw_GBps"),
                    bus = csv.column("busbw_GBps");
  if (op.empty())
    csv.fail(csv.header_line(), 1,
             "name the collective in the file name (all_reduce_..., all_gather_..., alltoall_..., sendrecv_...): "
             "the columns do not say which it is");
  if (csv.rows().empty()) csv.fail(csv.header_line(), 1, "no data rows");
  // The GPU count is in busbw / algbw, nccl-tests' bus factor (doc/PERFORMANCE.md): 2(n-1)/n for
  // all-reduce, (n-1)/n for all-gather and all-to-all. Read at the largest algbw, where the
  // file's rounding to 3 decimals matters least.
  const Csv::Row* best = &csv.rows().front();
  for (const auto& row : csv.rows())
    if (csv.positive(row, alg) > csv.positive(*best, alg)) best = &row;
  const double ratio = csv.positive(*best, bus) / csv.positive(*best, alg);
  const double scale = op == "all_reduce" ? 2.0 : 1.0;  // bus factor = scale * (n-1)/n
  double n = ratio < scale ? scale / (scale - ratio) : 0.0;
  if (op == "send_recv") n = std::fabs(ratio - 1.0) < 0.02 ? 2.0 : 0.0;  // point to point: factor 1, 2 GPUs
  const double gpus = std::round(n);
  if (gpus < 2 || gpus > 1024 || std::fabs(n - gpus) > 0.02 * gpus)
    csv.fail(best->line.number, best->cells[bus].column,
             "busbw/algbw = " + std::to_string(ratio) + " is no " + op + " bus factor of a GPU count (" +
                 (op == "all_reduce" ? "2(n-1)/n" : op == "send_recv" ? "1" : "(n-1)/n") + ")");
  Measurements m;
  m.source = "collective sweep CSV";
  for (const auto& row : csv.rows())
    m.collectives.push_back({op, static_cast<int>(gpus), 1, static_cast<double>(csv.integer(row, size, 1, std::numeric_limits<std::int64_t>::max())),
                             csv.positive(row, latency)});
  return m;
}

}  // namespace moesim::calibration
