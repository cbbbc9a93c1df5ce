#include "eval/eval_choices.hpp"

#include <limits>

#include "common/error.hpp"
#include "data/conversation.hpp"

namespace gt {

namespace {

// The tokens of `answer` as the model learns to write it in a gpt turn, its stop token last.
std::vector<int32_t> answer_turn_tokens(const std::string& answer, const Tokenizer& tok, const ChatTemplate& tmpl,
                                        int32_t stop_id, const std::string& where) {
  // A one-turn conversation: the answer's tokens do not depend on the question, because
  // tokenize_conversation builds the ids turn by turn.
  InstructionRecord r;
  r.id = r.dataset = "choice";
  r.conversations = {{"human", "?"}, {"gpt", answer}};
  const TokenizedExample t = tokenize_conversation(r, {}, tok, std::numeric_limits<int32_t>::max(), tmpl);
  auto end = t.labels.size();
  while (end > 0 && t.labels[end - 1] == kIgnoreIndex) --end;  // ChatML's "\n" after <|im_end|>
  auto begin = end;
  while (begin > 0 && t.labels[begin - 1] != kIgnoreIndex) --begin;
  std::vector<int32_t> out(t.labels.begin() + static_cast<std::ptrdiff_t>(begin),
                           t.labels.begin() + static_cast<std::ptrdiff_t>(end));
  if (out.empty() || out.back() != stop_id)
    fail(where, "the answer \"" + answer + "\" does not end with the chat template's stop token when tokenized");
  return out;
}

}  // namespace

void check_answers_are_choices(const std::vector<InstructionRecord>& records, const std::vector<EvalReference>& refs,
                               const std::map<std::string, DatasetClasses>& classes, const std::string& file) {
  auto expected = [&](size_t i) -> std::string {
    const EvalReference& ref = refs[i];
    if (ref.task == EvalTask::kLinkPrediction) return ref.label ? "yes" : "no";
    return classes.at(records[i].dataset).names[static_cast<size_t>(ref.label)];
  };
  for (size_t i = 0; i < records.size(); ++i)
    if (refs[i].task != EvalTask::kGraphMatching && refs[i].answer != expected(i))
      fail(record_where(file, records[i]),
           "its reference answer \"" + refs[i].answer + "\" is not \"" + expected(i) +
               "\" exactly, and [eval].answers = \"choices\" answers with a class name (yes or no) as it is written: "
               "use \"free\" for answers in other words");
}

std::vector<std::shared_ptr<const AnswerChoices>> eval_answer_choices(
    const std::vector<InstructionRecord>& records, const std::vector<EvalReference>& refs,
    const std::map<std::string, DatasetClasses>& classes, const Tokenizer& tok, const ChatTemplate& tmpl,
    int32_t stop_id, int64_t max_new_tokens) {
  auto choices_of = [&](const std::vector<std::string>& answers) {
    std::vector<std::vector<int32_t>> seqs;
    for (const std::string& a : answers) seqs.push_back(answer_turn_tokens(a, tok, tmpl, stop_id, "[eval].answers"));
    auto c = std::make_shared<const AnswerChoices>(seqs);
    // The budget counts the answer's tokens, not its stop token.
    if (max_new_tokens > 0 && c->longest() - 1 > max_new_tokens)
      fail("[eval].max_new_tokens", std::to_string(max_new_tokens) + " tokens cannot hold the longest answer choice (" +
                                        std::to_string(c->longest() - 1) + " tokens) under [eval].answers = \"choices\"");
    return c;
  };
  std::map<std::string, std::shared_ptr<const AnswerChoices>> by_dataset;
  std::shared_ptr<const AnswerChoices> yes_no;
  std::vector<std::shared_ptr<const AnswerChoices>> out(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (refs[i].task == EvalTask::kLinkPrediction) {
      if (!yes_no) yes_no = choices_of({"yes", "no"});
      out[i] = yes_no;
    } else if (refs[i].task == EvalTask::kNodeClassification) {
      auto& c = by_dataset[records[i].dataset];
      if (!c) c = choices_of(classes.at(records[i].dataset).names);
      out[i] = c;
    }
  }
  return out;
}

}  // namespace gt
