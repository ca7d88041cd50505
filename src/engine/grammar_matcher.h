// Constrained decoding: which tokens a grammar allows next. TokenVocab holds every token's
// byte string and a trie of them, built once per vocabulary; GrammarMatcher runs one
// sequence's grammar as a pushdown automaton (a set of stacks of grammar positions, as
// llama.cpp's grammar sampler keeps them) and builds its deterministic transitions lazily:
// each distinct set of stacks becomes a state, each (state, byte) step is computed once. A
// token mask is then one walk of the vocabulary trie through a table, cut short wherever a
// byte is refused, and it is cached per state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {

// The vocabulary as a grammar sees it. Immutable; shared by every matcher on the model.
class TokenVocab {
 public:
  // Tokens are their pieces (TokenToPiece). Control tokens are left out (a grammar never
  // produces them), except end-of-generation tokens, which a matcher allows where the grammar
  // may end. `control_texts` names control tokens (by stored text) that a grammar may spell,
  // such as a tool-call marker; they take their text as their bytes.
  explicit TokenVocab(const tokenizer::Tokenizer& tok, const std::vector<std::string>& control_texts = {});

  struct Node {
    uint8_t byte;
    uint16_t depth;          // 1 for the first byte of a token
    uint32_t subtree_end;    // index one past this node's subtree (preorder)
    uint32_t tokens_begin;   // into tokens(): the tokens whose pieces end here
    uint32_t tokens_end;
  };

  int32_t n_vocab() const { return n_vocab_; }
  std::string_view piece(int32_t id) const {
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  bool in_trie(int32_t id) const { return in_trie_[id] != 0; }
  const std::vector<int32_t>& end_of_generation() const { return eog_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  uint16_t max_depth() const { return max_depth_; }

 private:
  int32_t n_vocab_;
  std::string bytes_;              // every piece, concatenated
  std::vector<uint32_t> offsets_;  // [n_vocab + 1]
  std::vector<uint8_t> in_trie_;   // [n_vocab]
  std::vector<int32_t> eog_;
  std::vector<Node> nodes_;        // preorder
  std::vector<int32_t> tokens_;
  uint16_t max_depth_ = 0;
};

// One sequence's position in a grammar. Not thread-safe.
class GrammarMatcher {
 public:
  // Both are borrowed (shared_ptr keeps the grammar) and outlive the matcher.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);

  // Whether `token` may come next (cheap: walks only its bytes).
  bool Allows(int32_t token);
  // Bit t of word t / 64 set when token t may come next. Valid until the next Accept().
  const std::vector<uint64_t>& Mask();
  // Moves past `token`. False when the grammar does not allow it; the matcher then allows
  // only end-of-generation tokens.
  bool Accept(int32_t token);

  // The text so far is a complete sentence of the grammar.
  bool accepting() const;
  // Complete, and nothing more may follow: only an end-of-generation token is left.
  bool done() const;
  bool failed() const { return failed_; }
  size_t n_states() const { return states_.size(); }

 private:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;
  // Stacks of element positions; the top (back) is always a kBytes element, or the stack is
  // empty (the grammar is complete on that path).
  using Stack = std::vector<uint32_t>;

  void Expand(Stack& stack, std::vector<Stack>& out, int depth) const;
  int32_t Intern(std::vector<Stack>& stacks);
  int32_t Step(int32_t state, uint8_t byte);
  int32_t ComputeStep(int32_t state, uint8_t byte);
  void ComputeMask(std::vector<uint64_t>& mask);
  // Starts the tables over from the current state when they grow past their budget.
  void Compact();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<std::vector<Stack>> states_;      // each state's stacks, sorted
  std::vector<uint8_t> state_accepting_;
  std::unordered_map<std::string, int32_t> ids_;  // a state's stacks, serialized -> id
  std::vector<int32_t> transitions_;            // [state * 256 + byte]
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  std::vector<int32_t> walk_;                   // scratch: state per trie depth
  std::vector<uint64_t> failed_mask_;
  int32_t state_ = 0;
  bool failed_ = false;
};

}  // namespace cohort::engine
