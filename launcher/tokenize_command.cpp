// graphtune tokenize: JSON lines in, JSON lines out, so that scripts and the oracle tests can
// use graphtune's own tokenizers and chat templates through one process call.
//   encode (default): each line a JSON string       -> a JSON array of ids
//   --decode:         each line a JSON array of ids -> a JSON string
//   --chat TEMPLATE:  each line a conversation, GraphGPT's [{"from": "human"|"gpt", "value"}]
//                     -> the ids of its text in the template (the answer's opening appended
//                     when the last turn is human), as training and generation see them
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "data/chat_template.hpp"
#include "data/conversation.hpp"
#include "launcher/commands.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

namespace {

using nlohmann::json;

struct TokenizeOptions {
  std::string tokenizer, chat;
  bool bos = false, eos = false, decode = false;
  std::vector<std::string> special;
};

json parse_line(const std::string& line, const std::string& where) {
  if (line.find_first_not_of(" \t\r") == std::string::npos)
    fail(where, "empty line, expected one JSON value per line");
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    fail(where, "not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const json::out_of_range&) {  // 1e400
    fail(where, "not valid JSON (a number too large for a double)");
  }
}

std::vector<int32_t> ids_of(const json& v, const Tokenizer& tok, const std::string& where) {
  if (!v.is_array()) fail(where, "expected a JSON array of token ids");
  std::vector<int32_t> ids;
  const std::string range = " is outside the vocabulary of " + tok.source() + " (0.." +
                            std::to_string(tok.vocab_size() - 1) + ")";
  for (const auto& x : v) {
    if (x.is_number_unsigned()) {
      auto id = x.get<uint64_t>();
      if (id >= static_cast<uint64_t>(tok.vocab_size()))
        fail(where, "token id " + std::to_string(id) + range);
      ids.push_back(static_cast<int32_t>(id));
    } else if (x.is_number_integer()) {  // signed here means negative
      fail(where, "token id " + std::to_string(x.get<int64_t>()) + range);
    } else {
      fail(where, "expected a JSON array of token ids, found " + x.dump());
    }
  }
  return ids;
}

std::vector<Turn> turns_of(const json& v, const std::string& where) {
  if (!v.is_array()) fail(where, "expected a JSON array of turns {\"from\": ..., \"value\": ...}");
  std::vector<Turn> turns;
  for (const auto& t : v) {
    if (!t.is_object() || !t.contains("from") || !t["from"].is_string() || !t.contains("value") ||
        !t["value"].is_string())
      fail(where, "turn " + std::to_string(turns.size()) + " is not {\"from\": string, \"value\": string}");
    turns.push_back({t["from"].get<std::string>(), t["value"].get<std::string>()});
  }
  return turns;
}

int run_tokenize(const TokenizeOptions& o) {
  if (o.chat.size() && o.decode) fail("--chat", "encodes conversations; it does not go with --decode");
  const ChatTemplate tmpl = o.chat.empty() ? ChatTemplate{} : chat_template_named(o.chat, "--chat");
  auto tok = load_tokenizer(o.tokenizer);
  if (!o.special.empty()) tok->add_special_tokens(o.special);
  std::string line, out;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    const std::string where = "stdin line " + std::to_string(n);
    json v = parse_line(line, where);
    if (o.decode) {
      // A decoded id sequence may cut a UTF-8 character: JSON output needs valid UTF-8, so
      // stray bytes become U+FFFD, as SentencePiece's own decoder does.
      out = json(tok->decode(ids_of(v, *tok, where)))
                .dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (!o.chat.empty()) {
      const std::vector<Turn> turns = turns_of(v, where);
      const bool open = !turns.empty() && turns.back().from == "human";
      std::string text;
      try {
        text = render_chat(tmpl, turns, open);
      } catch (const InputError& e) {
        fail(where, e.what());
      }
      // vicuna_v1_1 starts with the BOS id; the others' text holds what they start with. Its
      // "</s>" after each answer stands for the EOS id, which the text cannot say.
      const bool vicuna = tmpl.format == ChatFormat::kVicunaV11;
      if (vicuna && text.find(kVicunaSep2) != std::string::npos)
        fail(where, "not supported yet: --chat " + o.chat + " with answers (their \"</s>\" is the EOS id); one "
                    "human turn works, and chatml, qwen2.5, llama3 and llama3.1 take whole conversations");
      out = json(tok->encode(text, vicuna, o.eos)).dump();
    } else {
      if (!v.is_string()) fail(where, "expected a JSON string, found " + std::string(v.type_name()));
      out = json(tok->encode(v.get_ref<const std::string&>(), o.bos, o.eos)).dump();
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  if (std::fflush(stdout) != 0) fail("stdout", "write failed");
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "encode JSON strings from stdin to id arrays, one JSON value per line");
  sub->add_option("--tokenizer", opts->tokenizer,
                  "tokenizer.model, tokenizer.json, a GGUF file or a llama2.c tokenizer .bin")
      ->required();
  sub->add_flag("--bos", opts->bos, "start each sequence with BOS");
  sub->add_flag("--eos", opts->eos, "end each sequence with EOS");
  sub->add_flag("--decode", opts->decode, "decode id arrays to strings instead");
  sub->add_option("--chat", opts->chat,
                  "encode conversations ([{from, value}] lines) in this chat template: vicuna_v1_1, graphchat_v1, "
                  "chatml, qwen2.5, llama3 or llama3.1");
  sub->add_option("--special", opts->special,
                  "special tokens to add first (e.g. <g_patch>), each encoded as one id");
  sub->callback([opts, &exit_code] { exit_code = run_tokenize(*opts); });
}

}  // namespace gt
