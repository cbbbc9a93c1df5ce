// The template choice and ChatML's text; vicuna_v1_1's text is data/conversation.cpp's.
#include "data/chat_template.hpp"

#include <stdexcept>
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

std::string trimmed(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// ChatML's and Llama 3's text, their chat_templates rendered by hand.
std::string layout_text(const MessageLayout& l, const std::vector<Turn>& turns) {
  std::string ret = l.head;
  for (size_t i = 0; i < turns.size(); ++i) {
    const char* want = i % 2 == 0 ? "human" : "gpt";
    if (turns[i].from != want)
      fail("conversation", "turn " + std::to_string(i) + " is from " + quoted(turns[i].from) +
                               " where \"" + want + "\" is due (human, gpt, ... from human)");
    ret += (i % 2 == 0 ? l.user_open : l.assistant_open) + layout_content(l, turns[i].value) + l.close + l.after_close;
  }
  return ret;
}

}  // namespace

std::string vicuna_system(const ChatTemplate& tmpl) { return tmpl.system.empty() ? kVicunaSystem : tmpl.system; }

MessageLayout message_layout(const ChatTemplate& tmpl) {
  MessageLayout l;
  if (tmpl.format == ChatFormat::kChatML) {
    l.head = std::string(kImStart) + "system\n" + tmpl.system + kImEnd + "\n";
    l.user_open = std::string(kImStart) + "user\n";
    l.assistant_open = std::string(kImStart) + "assistant\n";
    l.close = kImEnd;
    l.after_close = "\n";
    l.reserved = {kImStart, kImEnd};
  } else if (tmpl.format == ChatFormat::kLlama3) {
    const std::string start = "<|start_header_id|>", end = "<|end_header_id|>\n\n", eot = "<|eot_id|>";
    l.head = "<|begin_of_text|>";
    if (tmpl.dated_system)
      l.head += start + "system" + end + kLlama31SystemHeader + trimmed(tmpl.system) + eot;
    else if (!tmpl.system.empty())
      l.head += start + "system" + end + trimmed(tmpl.system) + eot;
    l.user_open = start + "user" + end;
    l.assistant_open = start + "assistant" + end;
    l.close = eot;
    l.trim = true;
    l.reserved = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", eot};
  } else {
    throw std::logic_error("message_layout: vicuna_v1_1 has no message layout");
  }
  return l;
}

std::string layout_content(const MessageLayout& l, const std::string& value) { return l.trim ? trimmed(value) : value; }

ChatTemplate chat_template_named(const std::string& name, const std::string& where) {
  if (name == "vicuna_v1_1") return ChatTemplate::vicuna_v1_1();
  if (name == "graphchat_v1") return ChatTemplate::graphchat_v1();
  if (name == "chatml") return ChatTemplate::chatml();
  if (name == "qwen2.5") return ChatTemplate::qwen2_5();
  if (name == "llama3") return ChatTemplate::llama3();
  if (name == "llama3.1") return ChatTemplate::llama3_1();
  fail(where, "'" + name + "' is not one of: vicuna_v1_1, graphchat_v1, chatml, qwen2.5, llama3, llama3.1");
}

const char* chat_template_name(const ChatTemplate& tmpl) {
  if (tmpl.format == ChatFormat::kLlama3) return tmpl.dated_system ? "llama3.1" : "llama3";
  if (tmpl.format == ChatFormat::kChatML) return tmpl.system == kQwen25System ? "qwen2.5" : "chatml";
  return vicuna_system(tmpl) == kGraphChatSystem ? "graphchat_v1" : "vicuna_v1_1";
}

std::string template_rendered_by(const std::string& jinja) {
  auto has = [&](const char* s) { return jinja.find(s) != std::string::npos; };
  if (has("<|start_header_id|>")) return has("Cutting Knowledge Date") ? "llama3.1" : "llama3";
  if (has(kImStart)) return has("You are Qwen") ? "qwen2.5" : has("SmolLM") ? "chatml" : "";
  if (has("USER: ") && has("ASSISTANT:")) return "vicuna_v1_1";
  return "";
}

bool template_fits_model(const std::string& name, const std::string& model) {
  return model.empty() || name == model || (model == "vicuna_v1_1" && name == "graphchat_v1");
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
  const MessageLayout l = message_layout(tmpl);
  std::string text = layout_text(l, turns);
  if (add_generation_prompt) text += l.assistant_open;
  return text;
}

std::vector<std::string> chat_token_texts(const ChatTemplate& tmpl) {
  if (tmpl.format == ChatFormat::kVicunaV11) return {kVicunaSep2};
  return message_layout(tmpl).reserved;
}

int32_t chat_stop_id(const ChatTemplate& tmpl, const Tokenizer& tok) {
  if (tmpl.format == ChatFormat::kVicunaV11) {
    if (tok.eos_id() < 0) fail(tok.source(), "the tokenizer needs an EOS token for vicuna_v1_1");
    return tok.eos_id();
  }
  return template_token_id(tmpl, tok, message_layout(tmpl).close);
}

int32_t template_token_id(const ChatTemplate& tmpl, const Tokenizer& tok, const std::string& piece) {
  const int32_t id = tok.piece_to_id(piece);
  if (id < 0 || tok.encode(piece, false, false) != std::vector<int32_t>{id}) {
    std::string all;
    for (const std::string& r : chat_token_texts(tmpl)) all += (all.empty() ? "" : ", ") + r;
    fail(tok.source(), std::string(chat_template_name(tmpl)) + "'s special token " + piece +
                           " is not registered (the template needs " + all + ")");
  }
  return id;
}

}  // namespace gt
