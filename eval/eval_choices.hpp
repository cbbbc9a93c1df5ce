#pragma once
// [eval].answers = "choices": the answers each record may give, as the tokens the model was
// trained to write for them. A node-classification record chooses among its dataset's class
// names, a link prediction between yes and no (each the answer turn's tokens under the eval's
// chat template, its stop token last, as tokenize_conversation learns them); any other record
// (graph matching, a dataset without a class list) answers freely.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/instructions.hpp"
#include "eval/eval_scoring.hpp"
#include "model/answer_choices.hpp"

namespace gt {

class Tokenizer;

// InputError naming `file` and the record where a record to constrain has a reference answer
// that is not one of its choices exactly (the model was trained to write something else). Needs
// no tokenizer: an eval checks it before any weight is read.
void check_answers_are_choices(const std::vector<InstructionRecord>& records, const std::vector<EvalReference>& refs,
                               const std::map<std::string, DatasetClasses>& classes, const std::string& file);

// One entry per record, nullptr where it answers freely; a dataset's records share one set.
// Call check_answers_are_choices first. InputError where `max_new_tokens` (when above 0) cannot
// hold the longest choice.
std::vector<std::shared_ptr<const AnswerChoices>> eval_answer_choices(
    const std::vector<InstructionRecord>& records, const std::vector<EvalReference>& refs,
    const std::map<std::string, DatasetClasses>& classes, const Tokenizer& tok, const ChatTemplate& tmpl,
    int32_t stop_id, int64_t max_new_tokens);

}  // namespace gt
