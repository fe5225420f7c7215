#pragma once
// JSON read from a user's file (measurements, results): a syntax error becomes an InputError at its
// line and column, and nlohmann's other parse failures (a number past double's range) an
// InputError at the file, never an internal error. Nesting is bounded: nlohmann destroys and
// compares values recursively, so a file nested 200,000 deep would overflow the stack.
#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/diagnostics.hpp"

namespace moesim {

/// How deep arrays and objects may nest in a JSON input (moesim's own files nest fewer than ten).
inline constexpr int kMaxJsonDepth = 256;

/// The offset of the first '[' or '{' nested deeper than kMaxJsonDepth outside strings, or npos.
inline std::size_t json_too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

/// nlohmann's parse without exceptions: a discarded value for text that is not JSON, or that
/// nests deeper than kMaxJsonDepth.
inline nlohmann::json parse_json_or_discarded(std::string_view text) {
  if (json_too_deep_at(text) != std::string_view::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

/// Parses `text` from `file`; errors read "`file`:LINE:COL: error: `what`: <nlohmann's reason>".
inline nlohmann::json parse_json_input(const std::string& text, const std::string& file, const std::string& what) {
  const auto located = [&](std::size_t offset) {
    const std::string_view before(text.data(), offset);
    const auto line = 1 + std::count(before.begin(), before.end(), '\n');
    const auto nl = before.rfind('\n');
    const auto column = nl == std::string_view::npos ? offset + 1 : offset - nl;
    return SourceLocation{file, static_cast<int>(line), static_cast<int>(column)};
  };
  if (const std::size_t deep = json_too_deep_at(text); deep != std::string_view::npos)
    throw InputError(located(deep), what + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is one past the byte where parsing stopped; keep the reason, not nlohmann's position.
    const std::size_t offset = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::string reason = e.what();
    const auto colon = reason.find(": ");
    throw InputError(located(offset), what + ": " + (colon == std::string::npos ? reason : reason.substr(colon + 2)));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number past double's range: no position
    throw InputError(SourceLocation{file, 0, 0}, what + ": " + e.what());
  }
}

}  // namespace moesim
