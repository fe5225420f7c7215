#pragma once
// A registry per plug-in family (policies, predictors, routing models, presets), after SimGrid's
// module registries: each entry registers itself with a one-line description, and a lookup miss
// names the closest entry and lists the valid ones.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"

namespace moesim {

/// Name → (description, value) with helpful misses. `T` is usually a factory or a preset struct.
template <typename T>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    T value;
  };

  explicit Registry(std::string family) : family_(std::move(family)) {}

  /// Registers an entry; returns true so it can initialise a static in the plug-in's own file.
  bool add(std::string name, std::string description, T value) {
    entries_[name] = Entry{name, std::move(description), std::move(value)};
    return true;
  }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  /// The entry, or nullptr.
  const Entry* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  /// The entry; throws InputError at `where` listing valid names on a miss.
  const Entry& get(const std::string& name, const SourceLocation& where = {}) const {
    if (const Entry* e = find(name)) return *e;
    throw InputError(where, unknown_name_message(family_, name, names()));
  }
  /// Names in sorted order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, _] : entries_) out.push_back(n);
    return out;
  }
  /// Entries in sorted order (for `moesim list`).
  std::vector<const Entry*> entries() const {
    std::vector<const Entry*> out;
    for (const auto& [_, e] : entries_) out.push_back(&e);
    return out;
  }
  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::map<std::string, Entry> entries_;
};

}  // namespace moesim
