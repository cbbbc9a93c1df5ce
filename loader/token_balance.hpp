#pragma once
// A step's pipeline micro-batches of about equal tokens. The stream cuts a step's records into
// micro-batches by count; with records of 100 to 1,500 tokens one micro-batch can hold three
// times another's, and every pipeline stage waits on the longest in each of its slots. Here the
// records of a step's micro-batches are dealt anew, longest first, each to the micro-batch that
// holds the fewest tokens so far (the greedy longest-processing-time rule, within 4/3 of the
// best), and keep their order within each. A step's loss is the sum over all its learned
// positions divided by their count, so how its records are grouped changes nothing in the
// result.
#include <vector>

#include "model/graphgpt.hpp"

namespace gt {

// The rows of `padded` (right-padded batches, as the stream gives them) regrouped into as many
// right-padded batches, each padded to its own longest record. Each record's graphs go with it.
std::vector<GraphGptBatch> balance_by_tokens(const std::vector<GraphGptBatch>& padded);

}  // namespace gt
