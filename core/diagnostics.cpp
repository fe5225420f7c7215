#include "core/diagnostics.hpp"

#include <algorithm>
#include <sstream>

namespace moesim {

std::string SourceLocation::to_string() const {
  std::ostringstream os;
  os << (file.empty() ? "<input>" : file);
  if (line > 0) os << ':' << line << ':' << column;
  return os.str();
}

std::string Diagnostic::to_string() const {
  return where.to_string() + (warning ? ": warning: " : ": error: ") + message;
}

void Diagnostics::error(SourceLocation where, std::string message) {
  items_.push_back({std::move(where), std::move(message)});
}

std::string Diagnostics::to_string() const {
  std::string out;
  for (const auto& d : items_) out += d.to_string() + "\n";
  return out;
}

void Diagnostics::throw_if_any() const {
  if (!items_.empty()) throw InputError(items_);
}

static std::string join_messages(const std::vector<Diagnostic>& diags) {
  std::string s;
  for (std::size_t i = 0; i < diags.size(); ++i) {
    if (i) s += "\n";
    s += diags[i].to_string();
  }
  return s;
}

InputError::InputError(std::vector<Diagnostic> diags)
    : std::runtime_error(join_messages(diags)), diags_(std::move(diags)) {}

InputError::InputError(SourceLocation where, const std::string& message)
    : InputError(std::vector<Diagnostic>{{std::move(where), message}}) {}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A suggestion is only useful when it is closer than a rewrite of half the word.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 2);
  return best_d <= limit ? best : std::string();
}

std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& valid) {
  std::ostringstream os;
  os << "unknown " << what << " '" << name << "'";
  const std::string hint = closest_match(name, valid);
  if (!hint.empty()) os << "; did you mean '" << hint << "'?";
  os << " (valid: ";
  for (std::size_t i = 0; i < valid.size(); ++i) os << (i ? ", " : "") << valid[i];
  os << ")";
  return os.str();
}

}  // namespace moesim
