// One YAML document from a user's input, checked before yaml-cpp builds it (core/yaml_input.hpp).
#include "core/yaml_input.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <yaml-cpp/eventhandler.h>

#include "core/diagnostics.hpp"

namespace moesim {
namespace {

SourceLocation at(const std::string& file, const YAML::Mark& m) { return {file, m.line + 1, m.column + 1}; }

/// Where each YAML document of `text` starts, at most three. yaml-cpp's LoadAll never returns on a
/// ',' at the top level of a document (0.7 yields an empty document there without consuming it,
/// allocating until memory runs out); its event parser shows that as two documents at one position.
std::vector<YAML::Mark> document_starts(const std::string& text) {
  struct Starts : YAML::EventHandler {
    std::vector<YAML::Mark> marks;
    void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  } handler;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (handler.marks.size() < 3 && parser.HandleNextDocument(handler)) {
  }
  return handler.marks;
}

/// Counts the nodes of the first document as if every alias were expanded, and refuses an alias
/// to a collection that is still open (a cycle) or a count past kMaxYamlNodes.
class AliasCheck final : public YAML::EventHandler {
 public:
  explicit AliasCheck(const std::string& file) : file_(file) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override { leaf(m, anchor); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(m, anchor);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    if (open_.count(anchor))
      throw InputError(at(file_, m), "recursive alias: it refers to a node that contains it (YAML aliases must "
                                     "not form a cycle)");
    const auto it = size_.find(anchor);
    add(m, it == size_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    YAML::anchor_t anchor;
    YAML::Mark mark;
    std::uint64_t nodes;
  };
  void leaf(const YAML::Mark& m, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) size_[anchor] = 1;
    add(m, 1);
  }
  void open(const YAML::Mark& m, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) open_.insert(anchor);
    stack_.push_back(Frame{anchor, m, 1});
    check(m, total_ + 1);
  }
  void close() {
    const Frame f = stack_.back();
    stack_.pop_back();
    if (f.anchor != YAML::NullAnchor) {
      open_.erase(f.anchor);
      size_[f.anchor] = f.nodes;
    }
    add(f.mark, f.nodes, /*counted=*/1);
  }
  // Adds `nodes` to the enclosing collection and to the document's total (less the `counted`
  // already in the total: a collection's own node, counted when it opened).
  void add(const YAML::Mark& m, std::uint64_t nodes, std::uint64_t counted = 0) {
    if (!stack_.empty()) stack_.back().nodes = saturating(stack_.back().nodes, nodes);
    total_ = saturating(total_, nodes - counted);
    check(m, total_);
  }
  void check(const YAML::Mark& m, std::uint64_t nodes) const {
    if (nodes > kMaxYamlNodes)
      throw InputError(at(file_, m), "aliases expand this document past a million nodes (an alias of aliases "
                                     "of aliases...): write the values out, or use fewer levels of aliases");
  }
  static std::uint64_t saturating(std::uint64_t a, std::uint64_t b) {
    return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
  }

  const std::string& file_;
  std::vector<Frame> stack_;
  std::unordered_set<YAML::anchor_t> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> size_;
  std::uint64_t total_ = 0;
};

}  // namespace

YAML::Node load_yaml_input(const std::string& text, const std::string& file, const std::string& what) {
  try {
    const std::vector<YAML::Mark> starts = document_starts(text);
    for (std::size_t i = 1; i < starts.size(); ++i)
      if (starts[i].pos == starts[i - 1].pos)  // yaml-cpp stuck on a stray ','
        throw InputError(at(file, starts[i]), what + ": ',' outside a [list] or {mapping}");
    if (starts.size() > 1)
      throw InputError(at(file, starts[1]), "a second YAML document: one document is expected (remove the '---' "
                                            "and what follows, or split it into two files)");
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      AliasCheck check(file);
      parser.HandleNextDocument(check);
    }
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(at(file, e.mark), what + ": " + e.msg);
  }
}

}  // namespace moesim
