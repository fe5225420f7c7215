#pragma once
// JSON read from a user's file (measurements, results): a syntax error becomes an InputError at its
// line and column, and nlohmann's other parse failures (a number past double's range) an
// InputError at the file, never an internal error.
#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/diagnostics.hpp"

namespace moesim {

/// Parses `text` from `file`; errors read "`file`:LINE:COL: error: `what`: <nlohmann's reason>".
inline nlohmann::json parse_json_input(const std::string& text, const std::string& file, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is one past the byte where parsing stopped; keep the reason, not nlohmann's position.
    const std::size_t offset = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::string_view before(text.data(), offset);
    const auto line = 1 + std::count(before.begin(), before.end(), '\n');
    const auto nl = before.rfind('\n');
    const auto column = nl == std::string_view::npos ? offset + 1 : offset - nl;
    const std::string reason = e.what();
    const auto colon = reason.find(": ");
    throw InputError(SourceLocation{file, static_cast<int>(line), static_cast<int>(column)},
                     what + ": " + (colon == std::string::npos ? reason : reason.substr(colon + 2)));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number past double's range: no position
    throw InputError(SourceLocation{file, 0, 0}, what + ": " + e.what());
  }
}

}  // namespace moesim
