#include "serving/request_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/diagnostics.hpp"

namespace moesim {
namespace {

constexpr const char* kColumns[] = {"arrived_at_s", "prompt_tokens", "output_tokens"};
constexpr std::size_t kMaxErrors = 20;  // a badly broken file reports this many, then stops

struct Cell {
  std::string text;
  int column = 1;  // 1-based column of the cell's first character
};

std::vector<Cell> split_cells(const std::string& line) {
  std::vector<Cell> cells;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    const std::size_t end = comma == std::string::npos ? line.size() : comma;
    std::size_t a = start, b = end;
    while (a < b && (line[a] == ' ' || line[a] == '\t')) ++a;
    while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t')) --b;
    if (b - a >= 2 && line[a] == '"' && line[b - 1] == '"') {
      ++a;
      --b;
    }
    cells.push_back(Cell{line.substr(a, b - a), static_cast<int>(a) + 1});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return cells;
}

// The whole cell as a number; false (with `why`) if it is not one, or not finite.
bool parse_number(const std::string& text, double& out, std::string& why) {
  if (text.empty()) {
    why = "is empty";
    return false;
  }
  // Decimal only (from_chars: no locale, no hexadecimal, so 0x10 is not read as 16 s).
  const char* first = text.data() + (text.front() == '+' ? 1 : 0);
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, out, std::chars_format::general);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == last && !std::isfinite(out))) {
    why = "'" + text + "' is not a finite number";
    return false;
  }
  if (ec != std::errc() || end != last) {
    why = "'" + text + "' is not a number";
    return false;
  }
  return true;
}

}  // namespace

std::vector<TraceRequest> parse_request_trace(const std::string& text, const std::string& file) {
  Diagnostics diags;
  std::vector<TraceRequest> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  int header_line = 0;
  int col[3] = {-1, -1, -1};
  double last_time = 0.0;
  int last_line = 0;
  while (std::getline(in, line) && diags.items().size() < kMaxErrors) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 BOM
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::vector<Cell> cells = split_cells(line);
    if (header_line == 0) {
      header_line = line_no;
      for (int c = 0; c < 3; ++c)
        for (std::size_t i = 0; i < cells.size(); ++i) {
          if (cells[i].text != kColumns[c]) continue;
          if (col[c] >= 0)  // one would silently win
            diags.error(SourceLocation{file, line_no, cells[i].column},
                        std::string("column '") + kColumns[c] + "' appears twice in the header");
          else
            col[c] = static_cast<int>(i);
        }
      bool ok = true;
      for (int c = 0; c < 3; ++c) {
        if (col[c] >= 0) continue;
        diags.error(SourceLocation{file, line_no, 1},
                    std::string("request trace header lacks column '") + kColumns[c] +
                        "' (needs arrived_at_s, prompt_tokens, output_tokens)");
        ok = false;
      }
      if (!ok || !diags.empty()) break;
      continue;
    }
    TraceRequest r;
    r.line = line_no;
    bool row_ok = true;
    bool time_ok = false;
    for (int c = 0; c < 3; ++c) {
      const auto idx = static_cast<std::size_t>(col[c]);
      if (idx >= cells.size()) {
        diags.error(SourceLocation{file, line_no, static_cast<int>(line.size()) + 1},
                    std::string("row lacks column '") + kColumns[c] + "'");
        row_ok = false;
        continue;
      }
      const Cell& cell = cells[idx];
      const SourceLocation at{file, line_no, cell.column};
      double v = 0.0;
      std::string why;
      if (!parse_number(cell.text, v, why)) {
        diags.error(at, std::string("'") + kColumns[c] + "' " + why);
        row_ok = false;
        continue;
      }
      if (c == 0) {
        if (v < 0.0) {
          diags.error(at, "'arrived_at_s' must be >= 0, got " + cell.text);
          row_ok = false;
        } else if (last_line > 0 && v < last_time) {
          diags.error(at, "'arrived_at_s' (" + cell.text + ") is earlier than the previous row's (line " +
                              std::to_string(last_line) + "): rows must be sorted by arrival time");
          row_ok = false;
        } else {
          time_ok = true;
        }
        r.arrived_at_s = v;
      } else {
        if (std::floor(v) != v || std::fabs(v) > 9.0e15) {
          diags.error(at, std::string("'") + kColumns[c] + "' must be a whole number of tokens, got " + cell.text);
          row_ok = false;
        } else if (v < 1.0) {
          diags.error(at, std::string("'") + kColumns[c] + "' must be >= 1, got " + cell.text);
          row_ok = false;
        } else {  // only now does it fit: converting 1e30 to int64 is undefined
          (c == 1 ? r.prompt_tokens : r.output_tokens) = static_cast<std::int64_t>(v);
        }
      }
    }
    if (time_ok) {  // later rows are checked against the last well-formed time
      last_time = r.arrived_at_s;
      last_line = line_no;
    }
    if (row_ok) rows.push_back(r);
  }
  if (diags.items().size() >= kMaxErrors)
    diags.error(SourceLocation{file, line_no, 1}, "too many errors; stopped reading the request trace here");
  if (header_line == 0)
    diags.error(SourceLocation{file, std::max(line_no, 1), 1},
                "request trace is empty (expected a header arrived_at_s,prompt_tokens,output_tokens and rows)");
  else if (diags.empty() && rows.empty())
    diags.error(SourceLocation{file, header_line, 1}, "request trace has a header but no rows");
  diags.throw_if_any();
  return rows;
}

std::vector<TraceRequest> read_request_trace(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(SourceLocation{path, 0, 0}, "request trace '" + path + "' is a directory, not a CSV file");
  std::ifstream in(path);
  if (!in) throw InputError(SourceLocation{path, 0, 0}, "cannot open request trace '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_request_trace(buf.str(), path);
}

}  // namespace moesim
