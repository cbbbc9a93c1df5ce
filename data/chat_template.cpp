// The template choice and ChatML's text; vicuna_v1_1's text is data/conversation.cpp's.
#include "data/chat_template.hpp"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "data/conversation.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ChatML's text, SmolLM2's chat_template rendered by hand: the default system message first
// (a GraphGPT conversation has no system turn), then every message closed by "<|im_end|>\n".
std::string chatml_text(const std::string& system, const std::vector<Turn>& turns) {
  std::string ret = std::string(kImStart) + "system\n" + system + kImEnd + "\n";
  for (size_t i = 0; i < turns.size(); ++i) {
    const char* want = i % 2 == 0 ? "human" : "gpt";
    if (turns[i].from != want)
      fail("conversation", "turn " + std::to_string(i) + " is from " + quoted(turns[i].from) +
                               " where \"" + want + "\" is due (human, gpt, ... from human)");
    ret += std::string(kImStart) + (i % 2 == 0 ? "user" : "assistant") + "\n" + turns[i].value + kImEnd + "\n";
  }
  return ret;
}

}  // namespace

std::string vicuna_system(const ChatTemplate& tmpl) { return tmpl.system.empty() ? kVicunaSystem : tmpl.system; }

ChatTemplate chat_template_named(const std::string& name, const std::string& where) {
  if (name == "vicuna_v1_1") return ChatTemplate::vicuna_v1_1();
  if (name == "graphchat_v1") return ChatTemplate::graphchat_v1();
  if (name == "chatml") return ChatTemplate::chatml();
  fail(where, "'" + name + "' is not one of: vicuna_v1_1, graphchat_v1, chatml");
}

const char* chat_template_name(const ChatTemplate& tmpl) {
  if (tmpl.format == ChatFormat::kChatML) return "chatml";
  return vicuna_system(tmpl) == kGraphChatSystem ? "graphchat_v1" : "vicuna_v1_1";
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<Turn>& turns, bool add_generation_prompt) {
  if (add_generation_prompt && (turns.empty() || turns.size() % 2 == 0))
    fail("conversation", "a generation prompt follows a human turn, but there are " + std::to_string(turns.size()) +
                             " turns (human, gpt, ... must end with human)");
  if (tmpl.format == ChatFormat::kVicunaV11) {
    if (!add_generation_prompt) return vicuna_v1_1_prompt(turns, vicuna_system(tmpl));
    // FastChat opens the answer with an empty gpt message, rendered "ASSISTANT:".
    std::vector<Turn> open = turns;
    open.push_back({"gpt", ""});
    return vicuna_v1_1_prompt(open, vicuna_system(tmpl));
  }
  std::string text = chatml_text(tmpl.system, turns);
  if (add_generation_prompt) text += std::string(kImStart) + "assistant\n";
  return text;
}

std::vector<std::string> chat_token_texts(const ChatTemplate& tmpl) {
  if (tmpl.format == ChatFormat::kChatML) return {kImStart, kImEnd};
  return {kVicunaSep2};
}

int32_t chat_stop_id(const ChatTemplate& tmpl, const Tokenizer& tok) {
  if (tmpl.format == ChatFormat::kVicunaV11) {
    if (tok.eos_id() < 0) fail(tok.source(), "the tokenizer needs an EOS token for vicuna_v1_1");
    return tok.eos_id();
  }
  return chatml_token_id(tok, kImEnd);
}

int32_t chatml_token_id(const Tokenizer& tok, const char* piece) {
  const int32_t id = tok.piece_to_id(piece);
  if (id < 0 || tok.encode(piece, false, false) != std::vector<int32_t>{id})
    fail(tok.source(), std::string("ChatML's special token ") + piece +
                           " is not registered (the template needs <|im_start|> and <|im_end|>)");
  return id;
}

}  // namespace gt
