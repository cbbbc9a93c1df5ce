#pragma once
// FastChat's vicuna_v1_1 conversation template (what GraphGPT trains with, --version v1),
// GraphGPT's graph-token splicing at text level, and tokenisation with the loss mask
// (docs/graphgpt-data.md), in vicuna_v1_1 or ChatML (data/chat_template.hpp). No libtorch.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/instructions.hpp"

namespace gt {

class Tokenizer;

// vicuna_v1_1: sep_style TWO, sep " ", sep2 "</s>", roles USER/ASSISTANT.
inline constexpr const char* kVicunaSystem =
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions.";
inline constexpr const char* kVicunaSep = " ";
inline constexpr const char* kVicunaSep2 = "</s>";
inline constexpr const char* kVicunaUser = "USER";
inline constexpr const char* kVicunaAssistant = "ASSISTANT";
inline constexpr int32_t kIgnoreIndex = -100;

// FastChat's Conversation.get_prompt() for sep_style TWO: system + sep, then for message i
// role + ": " + value + (i even ? sep : sep2). Turns must alternate human/gpt from human
// (InputError otherwise); values are used as they are (expand graph markers first). GraphGPT's
// graphchat_v1 is the same layout with its own system message (kGraphChatSystem).
std::string vicuna_v1_1_prompt(const std::vector<Turn>& turns, const std::string& system = kVicunaSystem);

// Replaces the k-th "<graph>" of text by "<g_start>" + "<g_patch>" x node_counts[k] + "<g_end>".
// The number of markers must equal node_counts.size() (InputError otherwise).
std::string expand_graph_markers(const std::string& text, const std::vector<int64_t>& node_counts);

struct TokenizedExample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // kIgnoreIndex where no loss is taken
  // [start, end) of each graph's <g_patch> run in input_ids, in marker order.
  std::vector<std::array<int64_t, 2>> graph_spans;
  bool truncated = false;  // the conversation was longer than max_len and was cut
};

// The record's conversation in vicuna_v1_1 with its graphs spliced in (graph k's marker gets
// graph_node_counts[k] patch tokens), as ids with labels: BOS first; BOS, the system prompt,
// every human turn (graph tokens included) and each "ASSISTANT:" are ignored; each answer
// (with the space before it) and its "</s>" (the EOS id) are learned. The ids are built turn
// by turn, so the mask is right by construction; they are also checked against the whole
// prompt's tokenisation, and a difference is an InputError naming the record id. Longer than
// max_len: cut to max_len (truncated = true); a cut through a graph's tokens is an InputError.
// The tokenizer must have GraphGPT's <g_patch>, <g_start>, <g_end> registered as special
// tokens (InputError naming the tokenizer otherwise). No padding: see pad_example.
//
// In ChatML (tmpl.format kChatML) the same, with render_chat's text: no BOS (SmolLM2 adds none);
// the system message, every user message and each "<|im_start|>assistant\n" are ignored; each
// answer and its closing <|im_end|> are learned; the "\n" after <|im_end|> is ignored. The
// tokenizer must have <|im_start|> and <|im_end|> registered as special tokens (InputError
// naming it otherwise), and no turn may hold their text (InputError naming the record).
TokenizedExample tokenize_conversation(const InstructionRecord& record,
                                       const std::vector<int64_t>& graph_node_counts,
                                       const Tokenizer& tokenizer, int64_t max_len,
                                       const ChatTemplate& tmpl = {});

// The prompt of the record's final answer, for generation: the ids tokenize_conversation gives
// (untruncated) up to and including the "ASSISTANT:" (ChatML: "<|im_start|>assistant\n")
// before the last gpt turn; labels all
// kIgnoreIndex, graph_spans as there. The last turn must be from gpt (InputError otherwise);
// its answer is tokenised too (the same checks as training), but not returned. A prompt longer
// than max_len is an InputError naming the record (a prompt is never cut; truncated stays false).
TokenizedExample tokenize_prompt(const InstructionRecord& record, const std::vector<int64_t>& graph_node_counts,
                                 const Tokenizer& tokenizer, int64_t max_len, const ChatTemplate& tmpl = {});

// Right padding to length: pad ids with labels kIgnoreIndex (GraphGPT: pad = unk = 0).
void pad_example(TokenizedExample& example, int64_t length, int32_t pad_id);

}  // namespace gt
