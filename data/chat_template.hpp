#pragma once
// The chat templates a conversation can be rendered in: FastChat's vicuna_v1_1 (what GraphGPT
// trains with), ChatML (SmolLM2-Instruct's, Qwen2.5's) and Llama 3's header template (3.0's, and
// 3.1's with its dated system header).
// data/conversation.hpp tokenises a record in any of them, with the loss mask. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

#include "data/instructions.hpp"

namespace gt {

class Tokenizer;

// SmolLM2-Instruct's chat_template puts this system message first when the conversation has
// none (GraphGPT records never do).
inline constexpr const char* kSmolLM2System = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
// GraphGPT's evaluation prompt (its conversation.py, conv_graphchat_v1): vicuna_v1_1's layout
// with this system message, spelled exactly as the reference has it (its sentences joined without
// a space, "structral" included), because the prompt is what reproducing its figures asks for.
inline constexpr const char* kGraphChatSystem =
    "You are GraphGPT, a large language and graph-structral assistant trained by HKUDS Lab."
    "You are able to understand the graph structures that the user provides, and assist the user with a variety of "
    "tasks using natural language."
    "Follow the instructions carefully and explain your answers in detail.";
// Qwen2.5-Instruct's chat_template puts this system message first when there is none.
inline constexpr const char* kQwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
// Llama 3.1-Instruct's chat_template always opens with a system message that starts with these
// two lines. 3.1's template dates it 26 Jul 2024 unless told otherwise; 3.2's and 3.3's write
// today's date where transformers renders them. graphtune writes 3.1's fixed date for all of
// them: the same record gives the same prompt, and the same shared prefix, on every run.
inline constexpr const char* kLlama31SystemHeader = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
inline constexpr const char* kImStart = "<|im_start|>";
inline constexpr const char* kImEnd = "<|im_end|>";

enum class ChatFormat { kVicunaV11, kChatML, kLlama3 };

// Which template and its system message. For the vicuna layout an empty system is vicuna_v1_1's
// own (kVicunaSystem); graphchat_v1 is the vicuna layout with kGraphChatSystem.
// Default-constructed: vicuna_v1_1, so callers that never heard of templates keep GraphGPT's.
struct ChatTemplate {
  ChatFormat format = ChatFormat::kVicunaV11;
  std::string system;
  bool dated_system = false;  // kLlama3 only: 3.1's system message, always there, kLlama31SystemHeader first

  static ChatTemplate vicuna_v1_1() { return {}; }
  static ChatTemplate graphchat_v1() { return {ChatFormat::kVicunaV11, kGraphChatSystem}; }
  static ChatTemplate chatml(std::string system = kSmolLM2System) { return {ChatFormat::kChatML, std::move(system)}; }
  static ChatTemplate qwen2_5() { return chatml(kQwen25System); }
  // Meta-Llama-3-Instruct's: no system message unless given.
  static ChatTemplate llama3(std::string system = "") { return {ChatFormat::kLlama3, std::move(system)}; }
  // Llama-3.1-Instruct's (3.2's and 3.3's too): the dated system message even when none is given.
  static ChatTemplate llama3_1(std::string system = "") { return {ChatFormat::kLlama3, std::move(system), true}; }
};

// How ChatML and Llama 3 lay out messages: head, then per message open(role) + content + close
// + after_close. The answer and its close are what training learns; close is where an answer
// ends in generation.
struct MessageLayout {
  std::string head;  // before the first message: BOS text, the system message
  std::string user_open, assistant_open, close, after_close;
  bool trim = false;  // Llama 3's template strips each content (Jinja's trim; ASCII whitespace here)
  std::vector<std::string> reserved;  // its special tokens: registered in the tokenizer, in no turn
};
// Not for vicuna_v1_1 (data/conversation.cpp lays that out, with FastChat's separators).
MessageLayout message_layout(const ChatTemplate& tmpl);
// A message's content as the layout renders it (trimmed for Llama 3).
std::string layout_content(const MessageLayout& layout, const std::string& value);

// The system message the vicuna layout renders: tmpl.system, or kVicunaSystem when it is empty.
std::string vicuna_system(const ChatTemplate& tmpl);

// By the name [data].template uses: "vicuna_v1_1", "graphchat_v1" (GraphGPT's evaluation
// prompt), "chatml" (SmolLM2's system message), "qwen2.5" (ChatML with Qwen2.5's), "llama3" or
// "llama3.1".
// Anything else is an InputError naming `where`.
ChatTemplate chat_template_named(const std::string& name, const std::string& where);
const char* chat_template_name(const ChatTemplate& tmpl);

// Which of the templates above a model's own chat_template (its Jinja text) renders, told by
// what it writes: "llama3.1" (Llama 3.1's dated system message), "llama3", "qwen2.5" (ChatML
// with Qwen's system message), "chatml" (with SmolLM's) or "vicuna_v1_1" (USER: / ASSISTANT:);
// "" for any other (Mistral's [INST], ChatML with another system message).
std::string template_rendered_by(const std::string& jinja);

// Whether prompts in template `name` are the ones a model whose chat_template renders `model`
// (template_rendered_by) was tuned on: the same, or GraphGPT's evaluation prompt on Vicuna.
bool template_fits_model(const std::string& name, const std::string& model);

// The template's text for the turns (human, gpt, ... from human; InputError otherwise), values
// used as they are (expand graph markers first). vicuna_v1_1: vicuna_v1_1_prompt(turns).
// ChatML: "<|im_start|>system\n" + system + "<|im_end|>\n", then per turn "<|im_start|>" +
// (user | assistant) + "\n" + value + "<|im_end|>\n", exactly SmolLM2's and Qwen2.5's
// chat_template. Llama 3: "<|begin_of_text|>", then per turn "<|start_header_id|>" + role +
// "<|end_header_id|>\n\n" + trimmed value + "<|eot_id|>", exactly Meta-Llama-3-Instruct's; 3.1
// puts "<|start_header_id|>system<|end_header_id|>\n\n" + kLlama31SystemHeader + trimmed system
// + "<|eot_id|>" after "<|begin_of_text|>", exactly Llama-3.1-Instruct's without tools.
// add_generation_prompt (the turns must then end with a human one) appends what opens the
// answer: "ASSISTANT:" for vicuna_v1_1 (FastChat's empty last message), the assistant's opening
// for the others (HF's add_generation_prompt).
std::string render_chat(const ChatTemplate& tmpl, const std::vector<Turn>& turns, bool add_generation_prompt = false);

// The texts in render_chat's output that stand for one token id each rather than for text:
// vicuna_v1_1's "</s>" (the EOS id), the others' MessageLayout::reserved. Training a tokenizer on
// rendered conversations drops them.
std::vector<std::string> chat_token_texts(const ChatTemplate& tmpl);

// The id that ends an answer, where generation stops: the tokenizer's EOS for vicuna_v1_1,
// the layout's close otherwise (<|im_end|>, <|eot_id|>), which must be a registered special
// token of the tokenizer (InputError naming the tokenizer otherwise).
int32_t chat_stop_id(const ChatTemplate& tmpl, const Tokenizer& tokenizer);

// The id of one of the template's reserved texts, which must be a registered special token of
// the tokenizer (as plain text, "<|im_end|>" would be learned as several pieces and generation
// would never stop on it): InputError naming the tokenizer otherwise.
int32_t template_token_id(const ChatTemplate& tmpl, const Tokenizer& tokenizer, const std::string& piece);

}  // namespace gt
