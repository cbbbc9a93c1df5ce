#include "data/metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace gt {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_punct(char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Lower-case, whitespace runs collapsed to one space (ends kept as they are otherwise).
std::string lower_collapsed(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_space = false;
  for (char c : text) {
    if (is_space(c)) {
      in_space = true;
      continue;
    }
    if (in_space && !out.empty()) out.push_back(' ');
    in_space = false;
    out.push_back(lower(c));
  }
  return out;
}

struct Mention {
  size_t start, end;
  int32_t cls;
};

// Every boundary-respecting occurrence of every class name in the lower-cased text, with the
// mentions inside a longer mention of another class removed, ordered by start (longer first).
std::vector<Mention> find_mentions(const std::string& text, const std::vector<std::string>& names) {
  std::vector<Mention> all;
  for (size_t c = 0; c < names.size(); ++c) {
    const std::string& name = names[c];
    if (name.empty()) continue;
    for (size_t pos = text.find(name); pos != std::string::npos; pos = text.find(name, pos + 1)) {
      const size_t end = pos + name.size();
      const bool left_ok = pos == 0 || !is_alnum(text[pos - 1]) || !is_alnum(name.front());
      const bool right_ok = end == text.size() || !is_alnum(text[end]) || !is_alnum(name.back());
      if (left_ok && right_ok) all.push_back({pos, end, static_cast<int32_t>(c)});
    }
  }
  std::vector<Mention> kept;
  for (const Mention& m : all) {
    bool inside_longer = false;
    for (const Mention& o : all)
      inside_longer |= o.cls != m.cls && o.start <= m.start && m.end <= o.end && o.end - o.start > m.end - m.start;
    if (!inside_longer) kept.push_back(m);
  }
  std::sort(kept.begin(), kept.end(), [](const Mention& a, const Mention& b) {
    return a.start != b.start ? a.start < b.start : a.end - a.start > b.end - b.start;
  });
  return kept;
}

std::vector<std::string> normalised_names(const std::vector<std::string>& class_names) {
  std::vector<std::string> out;
  out.reserve(class_names.size());
  for (const auto& n : class_names) out.push_back(normalise_answer(n));
  return out;
}

std::vector<int32_t> mentioned_normalised(const std::string& prediction, const std::vector<std::string>& names) {
  std::vector<int32_t> out;
  const std::string whole = normalise_answer(prediction);
  for (size_t c = 0; c < names.size(); ++c)
    if (!names[c].empty() && names[c] == whole) {
      out.push_back(static_cast<int32_t>(c));
      break;
    }
  for (const Mention& m : find_mentions(lower_collapsed(prediction), names))
    if (std::find(out.begin(), out.end(), m.cls) == out.end()) out.push_back(m.cls);
  return out;
}

double ratio(int64_t a, int64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

}  // namespace

std::string normalise_answer(const std::string& text) {
  size_t b = 0, e = text.size();
  while (b < e && is_space(text[b])) ++b;
  while (e > b && is_space(text[e - 1])) --e;
  static const std::string eos = "</s>";
  if (e - b >= eos.size() && text.compare(e - eos.size(), eos.size(), eos) == 0) e -= eos.size();
  while (b < e && (is_space(text[b]) || is_punct(text[b]))) ++b;
  while (e > b && (is_space(text[e - 1]) || is_punct(text[e - 1]))) --e;
  return lower_collapsed(text.substr(b, e - b));
}

std::vector<int32_t> mentioned_classes(const std::string& prediction, const std::vector<std::string>& class_names) {
  return mentioned_normalised(prediction, normalised_names(class_names));
}

int32_t parse_class(const std::string& prediction, const std::vector<std::string>& class_names) {
  auto m = mentioned_classes(prediction, class_names);
  return m.empty() ? -1 : m.front();
}

ClassificationMetrics classification_metrics(const std::vector<std::string>& predictions,
                                             const std::vector<int32_t>& labels,
                                             const std::vector<std::string>& class_names) {
  const std::string where = "classification metrics";
  if (class_names.empty()) fail(where, "no class names");
  if (predictions.size() != labels.size())
    fail(where, std::to_string(predictions.size()) + " predictions but " + std::to_string(labels.size()) + " labels");
  const auto names = normalised_names(class_names);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) fail(where, "class " + std::to_string(i) + " (\"" + class_names[i] + "\") is empty once normalised");
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j])
        fail(where, "classes " + std::to_string(j) + " and " + std::to_string(i) + " are both \"" + names[i] +
                        "\" once normalised");
  }
  const int64_t C = static_cast<int64_t>(class_names.size());
  ClassificationMetrics m;
  m.n = static_cast<int64_t>(labels.size());
  m.confusion.assign(C, std::vector<int64_t>(C + 1, 0));
  int64_t top3 = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int32_t y = labels[i];
    if (y < 0 || y >= C)
      fail(where, "label " + std::to_string(i) + " is " + std::to_string(y) + ", outside the " + std::to_string(C) +
                      " classes");
    const auto found = mentioned_normalised(predictions[i], names);
    const int32_t pred = found.empty() ? -1 : found.front();
    if (pred < 0) ++m.unparsed;
    if (pred == y) ++m.correct;
    ++m.confusion[y][pred < 0 ? C : pred];
    for (size_t k = 0; k < found.size() && k < 3; ++k)
      if (found[k] == y) {
        ++top3;
        break;
      }
  }
  m.accuracy = ratio(m.correct, m.n);
  m.top3_containment = ratio(top3, m.n);
  double f1_sum = 0.0;
  int64_t counted = 0;
  for (int64_t c = 0; c < C; ++c) {
    const int64_t tp = m.confusion[c][c];
    const int64_t support = std::accumulate(m.confusion[c].begin(), m.confusion[c].end(), int64_t{0});
    int64_t predicted = 0;
    for (int64_t t = 0; t < C; ++t) predicted += m.confusion[t][c];
    if (support == 0 && predicted == 0) continue;  // neither true nor predicted: left out
    const int64_t fp = predicted - tp, fn = support - tp;
    f1_sum += ratio(2 * tp, 2 * tp + fp + fn);
    ++counted;
  }
  m.macro_f1 = counted == 0 ? 0.0 : f1_sum / static_cast<double>(counted);
  return m;
}

int parse_yes_no(const std::string& answer) {
  size_t i = 0;
  while (i < answer.size() && (is_space(answer[i]) || is_punct(answer[i]))) ++i;
  auto word = [&](const std::string& w) {
    if (answer.size() - i < w.size()) return false;
    for (size_t k = 0; k < w.size(); ++k)
      if (lower(answer[i + k]) != w[k]) return false;
    return i + w.size() == answer.size() || !is_alnum(answer[i + w.size()]);
  };
  if (word("yes")) return 1;
  if (word("no")) return 0;
  return -1;
}

double roc_auc(const std::vector<double>& scores, const std::vector<int32_t>& labels) {
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Average ranks (1-based) over ties; U = rank sum of the positives - P (P + 1) / 2.
  double pos_rank_sum = 0.0;
  int64_t P = 0, N = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] == 1) {
        pos_rank_sum += avg_rank;
        ++P;
      } else {
        ++N;
      }
    }
    i = j;
  }
  if (P == 0 || N == 0) return std::numeric_limits<double>::quiet_NaN();
  const double u = pos_rank_sum - static_cast<double>(P) * static_cast<double>(P + 1) / 2.0;
  return u / (static_cast<double>(P) * static_cast<double>(N));
}

LinkMetrics link_metrics(const std::vector<std::string>& answers, const std::vector<int32_t>& labels) {
  const std::string where = "link metrics";
  if (answers.size() != labels.size())
    fail(where, std::to_string(answers.size()) + " answers but " + std::to_string(labels.size()) + " labels");
  LinkMetrics m;
  m.n = static_cast<int64_t>(answers.size());
  std::vector<double> scores;
  scores.reserve(answers.size());
  int64_t correct = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1)
      fail(where, "label " + std::to_string(i) + " is " + std::to_string(labels[i]) + ", not 0 or 1");
    const int yn = parse_yes_no(answers[i]);
    if (yn < 0) ++m.unparsed;
    if (yn == labels[i]) ++correct;
    scores.push_back(yn < 0 ? 0.5 : static_cast<double>(yn));
  }
  m.accuracy = ratio(correct, m.n);
  m.auc = roc_auc(scores, labels);
  return m;
}

std::string metrics_json(const ClassificationMetrics& m, const std::vector<std::string>& class_names) {
  nlohmann::ordered_json j;
  j["task"] = "node_classification";
  j["n"] = m.n;
  j["correct"] = m.correct;
  j["unparsed"] = m.unparsed;
  j["accuracy"] = m.accuracy;
  j["macro_f1"] = m.macro_f1;
  j["top3_containment"] = m.top3_containment;
  j["classes"] = class_names;
  auto columns = class_names;
  columns.push_back("none");
  j["confusion_columns"] = columns;
  j["confusion"] = m.confusion;  // [true][pred]
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string metrics_json(const LinkMetrics& m) {
  nlohmann::ordered_json j;
  j["task"] = "link_prediction";
  j["n"] = m.n;
  j["unparsed"] = m.unparsed;
  j["accuracy"] = m.accuracy;
  j["auc"] = m.auc;  // NaN dumps as null
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

nlohmann::ordered_json prediction_row(const PredictionRecord& r) {
  nlohmann::ordered_json j;
  j["id"] = r.id;
  if (r.link) {
    j["node_idx_1"] = r.node_idx;
    j["node_idx_2"] = r.node_idx_2;
    j["truth"] = r.truth;
  } else {
    j["node_idx"] = r.node_idx;
  }
  j["res"] = r.res;
  return j;
}

}  // namespace

std::string predictions_jsonl(const std::vector<PredictionRecord>& records) {
  std::string out;
  for (const auto& r : records) {
    // Generated text may end inside a multi-byte character: invalid UTF-8 becomes U+FFFD.
    out += prediction_row(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    out += '\n';
  }
  return out;
}

std::string graphgpt_results_json(const std::vector<PredictionRecord>& records) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& r : records) list.push_back(prediction_row(r));
  return list.dump(4, ' ', true, nlohmann::ordered_json::error_handler_t::replace) + "\n";  // ASCII, as Python's json.dump
}

void write_predictions_jsonl(const std::string& path, const std::vector<PredictionRecord>& records) {
  write_file_atomic(path, predictions_jsonl(records));
}

}  // namespace gt
