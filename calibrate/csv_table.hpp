#pragma once
// A measured kernel table read as CSV with every bad cell located (FILE:LINE:COL): the columns a
// reader needs are looked up by name in the header, and each row's cells are parsed through
// checks that collect diagnostics instead of stopping at the first.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.hpp"

namespace moesim::calibration {

/// One line's cells (split at commas, trailing spaces and CR dropped).
std::vector<std::string_view> split_csv_line(std::string_view line);

/// The numbers in a version string, in order, for comparing versions: "1.3.0rc20" is (1, 3, 0,
/// 20), newer than "1.3.0rc10". A run of more than 15 digits stops growing (no version has one).
std::vector<long> version_numbers(const std::string& v);

/// The rows of one CSV text under named columns.
class CsvTable {
 public:
  /// `kind` names the table in errors ("attention table"); throws InputError at line 1 when a
  /// column of `need` is missing from the header.
  CsvTable(const std::string& text, std::string path, std::string kind, const std::vector<std::string>& need);

  /// Moves to the next data row (blank lines skipped); false at the end, or once 20 problems
  /// are collected. A row with the wrong number of cells is reported and skipped.
  bool next();
  /// The current row's cell of `need[i]`.
  std::string_view cell(std::size_t i) const { return cells_[at_[i]]; }
  int line() const { return line_; }
  /// The location of the current row's cell of `need[i]`.
  SourceLocation where(std::size_t i) const;

  /// Parses cell i as a whole number in [lo, hi]; on failure reports it and returns false.
  bool whole(std::size_t i, std::int64_t lo, std::int64_t hi, std::int64_t& out);
  /// Parses cell i as a finite number in (lo, hi] (lo exclusive: latencies must be positive).
  bool number(std::size_t i, double lo, double hi, double& out);
  /// Reports a problem at cell i of the current row.
  void problem(std::size_t i, const std::string& message);
  /// Throws InputError with every problem collected, or "no rows" when nothing was read.
  void finish(std::size_t rows_read) const;

 private:
  std::string text_, path_, kind_;
  std::vector<std::string> need_;
  std::vector<std::size_t> at_;
  std::size_t columns_ = 0;
  std::string_view rest_, line_text_;
  std::vector<std::string_view> cells_;
  int line_ = 1;
  std::vector<Diagnostic> bad_;
};

}  // namespace moesim::calibration
