#pragma once
// Errors the user can act on: every problem carries file:line:col and is reported all at once.
#include <stdexcept>
#include <string>
#include <vector>

namespace moesim {

/// Where in an input a value came from (1-based line and column; 0 = unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string to_string() const;
};

/// One problem found in the input.
struct Diagnostic {
  SourceLocation where;
  std::string message;
  bool warning = false;           ///< a warning: reported, the input is still accepted
  std::string to_string() const;  // "file:line:col: error: message" (or "warning: ")
};

/// Collects diagnostics so validation can report every problem, not just the first.
class Diagnostics {
 public:
  void error(SourceLocation where, std::string message);
  bool empty() const { return items_.empty(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  std::string to_string() const;
  /// Throws InputError carrying every diagnostic if any were recorded.
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> items_;
};

/// Bad user input (exit code 2 at the CLI). Never thrown for internal bugs.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diags);
  InputError(SourceLocation where, const std::string& message);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

/// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate closest to `name` when it is plausibly a typo, else "".
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);
/// "unknown X 'name'; did you mean 'y'? valid: a, b, c".
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& valid);

}  // namespace moesim
