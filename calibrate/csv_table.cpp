#include "calibrate/csv_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace moesim::calibration {

std::vector<long> version_numbers(const std::string& v) {
  std::vector<long> out;
  long cur = -1;
  for (char ch : v) {
    if (ch >= '0' && ch <= '9') {
      if (cur < 100000000000000L) cur = (cur < 0 ? 0 : cur * 10) + (ch - '0');
    } else if (cur >= 0) {
      out.push_back(cur);
      cur = -1;
    }
  }
  if (cur >= 0) out.push_back(cur);
  return out;
}

std::vector<std::string_view> split_csv_line(std::string_view line) {
  std::vector<std::string_view> out;
  while (true) {
    const auto c = line.find(',');
    std::string_view cell = line.substr(0, c);
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.remove_suffix(1);
    out.push_back(cell);
    if (c == std::string_view::npos) break;
    line.remove_prefix(c + 1);
  }
  return out;
}

namespace {

std::string_view first_line(std::string_view text) { return text.substr(0, text.find('\n')); }

}  // namespace

CsvTable::CsvTable(const std::string& text, std::string path, std::string kind, const std::vector<std::string>& need)
    : text_(text), path_(std::move(path)), kind_(std::move(kind)), need_(need) {
  const std::string_view all(text_);
  const std::string_view header_line = first_line(all);
  const auto header = split_csv_line(header_line);
  columns_ = header.size();
  for (const auto& name : need_) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw InputError(SourceLocation{path_, 1, 1}, kind_ + ": no column '" + name + "' in the header");
    at_.push_back(static_cast<std::size_t>(it - header.begin()));
  }
  rest_ = all.substr(std::min(all.size(), header_line.size() + 1));
}

bool CsvTable::next() {
  while (!rest_.empty() && bad_.size() < 20) {
    line_text_ = first_line(rest_);
    rest_.remove_prefix(std::min(rest_.size(), line_text_.size() + 1));
    ++line_;
    if (line_text_.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    cells_ = split_csv_line(line_text_);
    if (cells_.size() != columns_) {
      bad_.push_back({SourceLocation{path_, line_, 1}, "expected " + std::to_string(columns_) + " cells, found " +
                                                           std::to_string(cells_.size())});
      continue;
    }
    return true;
  }
  return false;
}

SourceLocation CsvTable::where(std::size_t i) const {
  std::size_t pos = 0;
  for (std::size_t c = 0; c < at_[i] && pos != std::string_view::npos; ++c) {
    pos = line_text_.find(',', pos);
    if (pos != std::string_view::npos) ++pos;
  }
  return SourceLocation{path_, line_, pos == std::string_view::npos ? 1 : static_cast<int>(pos) + 1};
}

bool CsvTable::whole(std::size_t i, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  const std::string_view v = cell(i);
  const auto res = std::from_chars(v.data(), v.data() + v.size(), out);
  if (res.ec == std::errc() && res.ptr == v.data() + v.size() && out >= lo && out <= hi) return true;
  problem(i, need_[i] + " must be a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
                 std::string(v) + "'");
  return false;
}

bool CsvTable::number(std::size_t i, double lo, double hi, double& out) {
  const std::string v(cell(i));
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  if (!v.empty() && end == v.c_str() + v.size() && std::isfinite(out) && out > lo && out <= hi) return true;
  char range[96];
  std::snprintf(range, sizeof range, "(%g, %g]", lo, hi);
  problem(i, need_[i] + " must be a number in " + range + ", got '" + v + "'");
  return false;
}

void CsvTable::problem(std::size_t i, const std::string& message) { bad_.push_back({where(i), message}); }

void CsvTable::finish(std::size_t rows_read) const {
  if (!bad_.empty()) throw InputError(bad_);
  if (rows_read == 0) throw InputError(SourceLocation{path_, 1, 1}, kind_ + ": no rows");
}

}  // namespace moesim::calibration
