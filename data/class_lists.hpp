#pragma once
// The class names answers are scored against, per dataset: GraphGPT's evaluation sets mix
// arXiv (40 cs.XX categories), PubMed (3) and Cora (70), and a record's dataset is its id's
// prefix (dataset_of_id). No libtorch.
//
// A class-lists file is a JSON object, dataset -> a list of names, or dataset -> the path of a
// class-list file (relative to the JSON file's folder), e.g.
//   {"arxiv": ["cs.AI", "cs.AR", ...], "pubmed": [...], "cora": "Cora_id_labels.json"}
//
// A class-list file is read by its form, so that the files people already have need no editing:
//   * .json: a list of names; or an object of node id -> label text (GraphGPT's
//     Cora_id_labels.json), whose distinct labels other than "nan" and "" are the classes, sorted;
//   * .csv: the first field of each row (RFC 4180 quoting); a first row whose first field is
//     empty, "name", "label" or "class" is a header (OneForAll's cora_categories_ofa.csv);
//   * any other text: when lines start with an arXiv code and its name ("cs.AI (Artificial
//     Intelligence)", OneForAll's arxiv_CS_categories_ofa.txt), those codes; otherwise one name a
//     line, blank lines and lines starting with '#' skipped.
// Every list must hold at least one name and no two names equal once normalised
// (normalise_answer); an InputError names the file and the dataset otherwise.
#include <map>
#include <string>
#include <vector>

namespace gt {

std::vector<std::string> read_class_list(const std::string& path);

std::map<std::string, std::vector<std::string>> read_class_lists(const std::string& path);

}  // namespace gt
