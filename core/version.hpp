#pragma once
// What built this binary: `moesim --version` and every result.json's "moesim" object.

namespace moesim {

/// The release (meson.build's project version).
const char* moesim_version();
/// `git describe --always --dirty` of the source tree at build time ("unknown" outside git).
const char* moesim_commit();

}  // namespace moesim
