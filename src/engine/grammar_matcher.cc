// The vocabulary trie and the lazily determinized grammar automaton. A state is a sorted set
// of stacks; its transitions on each byte are filled in on first use, so the trie walk of a
// mask costs one table load per node once the states it meets have been seen, and a
// generation meets few distinct states (inside a JSON string, every character leads back to
// the same one). Tables are bounded: past kMaxStates they start over from the current state.
#include "engine/grammar_matcher.h"

#include <algorithm>
#include <numeric>

namespace cohort::engine {
namespace {

using Op = GrammarElement::Op;

constexpr size_t kMaxStates = 4096;      // 1 KiB of transitions each
constexpr size_t kMaxMasks = 32;         // n_vocab / 8 bytes each
constexpr size_t kMaxStacks = 1024;      // per state; more are dropped (see Expand)
constexpr size_t kMaxStackDepth = 1024;  // nesting, e.g. of JSON arrays
constexpr int kMaxExpandDepth = 2048;    // rules entered at one position (bounds recursion)

void SetBit(std::vector<uint64_t>& mask, int32_t id) {
  mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace

TokenVocab::TokenVocab(const tokenizer::Tokenizer& tok, const std::vector<std::string>& control_texts)
    : n_vocab_(tok.n_vocab()) {
  offsets_.reserve(static_cast<size_t>(n_vocab_) + 1);
  offsets_.push_back(0);
  in_trie_.assign(static_cast<size_t>(n_vocab_), 0);
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    std::string piece;
    if (tok.IsEndOfGeneration(id)) {
      eog_.push_back(id);
    } else if (tok.IsControl(id)) {
      if (std::find(control_texts.begin(), control_texts.end(), tok.text(id)) != control_texts.end()) {
        piece = tok.text(id);
      }
    } else {
      piece = tok.TokenToPiece(id, false);
    }
    if (!piece.empty()) {
      in_trie_[static_cast<size_t>(id)] = 1;
      order.push_back(id);
    }
    bytes_ += piece;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string_view pa = piece(a), pb = piece(b);
    return pa < pb || (pa == pb && a < b);
  });
  // Preorder trie from the sorted pieces: each piece shares its longest common prefix with
  // the one before it, so only the path past that prefix is new.
  std::vector<uint32_t> path;
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view p = piece(id);
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < p.size() && prev[lcp] == p[lcp]) ++lcp;
    while (path.size() > lcp) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = path.size(); d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      const uint32_t at = static_cast<uint32_t>(tokens_.size());
      nodes_.push_back({static_cast<uint8_t>(p[d]), static_cast<uint16_t>(std::min<size_t>(d + 1, UINT16_MAX)), 0, at, at});
    }
    max_depth_ = std::max<uint16_t>(max_depth_, static_cast<uint16_t>(std::min<size_t>(p.size(), UINT16_MAX)));
    Node& node = nodes_[path.back()];
    if (node.tokens_begin == node.tokens_end) node.tokens_begin = node.tokens_end = static_cast<uint32_t>(tokens_.size());
    tokens_.push_back(id);
    ++node.tokens_end;
    prev = p;
  }
  for (uint32_t i : path) nodes_[i].subtree_end = static_cast<uint32_t>(nodes_.size());
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  COHORT_CHECK(grammar_ != nullptr && vocab_ != nullptr);
  std::vector<Stack> start;
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
    Stack s{alt};
    Expand(s, start, 0);
  }
  state_ = Intern(start);
  walk_.resize(static_cast<size_t>(vocab_->max_depth()) + 1);
}

void GrammarMatcher::Expand(Stack& stack, std::vector<Stack>& out, int depth) const {
  const std::vector<GrammarElement>& elems = grammar_->elements();
  while (true) {
    if (out.size() >= kMaxStacks) return;  // an ambiguous grammar: keep the parses found so far
    if (stack.empty()) {
      out.push_back(stack);
      return;
    }
    const uint32_t p = stack.back();
    const GrammarElement e = elems[p];
    if (e.op == Op::kBytes) {
      out.push_back(stack);
      return;
    }
    stack.pop_back();
    if (e.op == Op::kEnd) continue;
    // A rule: its continuation stays below (unless the rule ends the alternative: a tail
    // call, so right recursion does not grow the stack), each alternative on top of a copy.
    if (elems[p + 1].op != Op::kEnd) stack.push_back(p + 1);
    if (stack.size() >= kMaxStackDepth || depth >= kMaxExpandDepth) return;
    const std::span<const uint32_t> alts = grammar_->alternatives(e.arg);
    for (size_t i = 0; i < alts.size(); ++i) {
      Stack copy = stack;
      copy.push_back(alts[i]);
      Expand(copy, out, depth + 1);
    }
    return;
  }
}

int32_t GrammarMatcher::Intern(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key;
  for (const Stack& s : stacks) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof(n));
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  }
  auto [it, inserted] = ids_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (!inserted) return it->second;
  const bool accepting = std::any_of(stacks.begin(), stacks.end(), [](const Stack& s) { return s.empty(); });
  states_.push_back(std::move(stacks));
  state_accepting_.push_back(accepting ? 1 : 0);
  transitions_.resize(states_.size() * 256, kUnknown);
  return it->second;
}

int32_t GrammarMatcher::ComputeStep(int32_t state, uint8_t byte) {
  std::vector<Stack> out;
  const std::vector<GrammarElement>& elems = grammar_->elements();
  for (const Stack& s : states_[static_cast<size_t>(state)]) {
    if (s.empty() || !grammar_->byte_set(elems[s.back()].arg).Has(byte)) continue;
    Stack next = s;
    next.back() += 1;
    Expand(next, out, 0);
  }
  if (out.empty()) return kDead;
  return Intern(out);
}

inline int32_t GrammarMatcher::Step(int32_t state, uint8_t byte) {
  const size_t at = static_cast<size_t>(state) * 256 + byte;
  int32_t next = transitions_[at];
  if (next == kUnknown) {
    next = ComputeStep(state, byte);
    transitions_[at] = next;
  }
  return next;
}

bool GrammarMatcher::accepting() const { return !failed_ && state_accepting_[static_cast<size_t>(state_)] != 0; }

bool GrammarMatcher::done() const {
  if (failed_) return true;
  const std::vector<Stack>& stacks = states_[static_cast<size_t>(state_)];
  return stacks.size() == 1 && stacks[0].empty();
}

bool GrammarMatcher::Allows(int32_t token) {
  if (failed_) return false;
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  const std::vector<int32_t>& eog = vocab_->end_of_generation();
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) return accepting();
  if (!vocab_->in_trie(token)) return false;
  int32_t s = state_;
  for (char c : vocab_->piece(token)) {
    s = Step(s, static_cast<uint8_t>(c));
    if (s < 0) return false;
  }
  return true;
}

void GrammarMatcher::ComputeMask(std::vector<uint64_t>& mask) {
  mask.assign((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  const std::vector<TokenVocab::Node>& nodes = vocab_->nodes();
  const std::vector<int32_t>& tokens = vocab_->tokens();
  walk_[0] = state_;
  const uint32_t n = static_cast<uint32_t>(nodes.size());
  for (uint32_t i = 0; i < n;) {
    const TokenVocab::Node& node = nodes[i];
    const int32_t s = Step(walk_[node.depth - 1u], node.byte);
    if (s < 0) {
      i = node.subtree_end;  // no token below a refused prefix
      continue;
    }
    walk_[node.depth] = s;
    for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) SetBit(mask, tokens[k]);
    ++i;
  }
  if (accepting()) {
    for (int32_t id : vocab_->end_of_generation()) SetBit(mask, id);
  }
}

const std::vector<uint64_t>& GrammarMatcher::Mask() {
  if (failed_) {
    if (failed_mask_.empty()) {
      failed_mask_.assign((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
      for (int32_t id : vocab_->end_of_generation()) SetBit(failed_mask_, id);
    }
    return failed_mask_;
  }
  auto it = masks_.find(state_);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxMasks) masks_.clear();
  std::vector<uint64_t>& mask = masks_[state_];
  ComputeMask(mask);
  return mask;
}

bool GrammarMatcher::Accept(int32_t token) {
  if (!Allows(token)) {
    failed_ = true;
    return false;
  }
  const std::vector<int32_t>& eog = vocab_->end_of_generation();
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) return true;
  int32_t s = state_;
  for (char c : vocab_->piece(token)) s = Step(s, static_cast<uint8_t>(c));
  state_ = s;
  if (states_.size() > kMaxStates) Compact();
  return true;
}

void GrammarMatcher::Compact() {
  std::vector<Stack> current = states_[static_cast<size_t>(state_)];
  states_.clear();
  state_accepting_.clear();
  ids_.clear();
  transitions_.clear();
  masks_.clear();
  state_ = Intern(current);
}

}  // namespace cohort::engine
