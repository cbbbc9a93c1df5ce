#pragma once
// Phase `lm`: trains a causal LM (a fresh LLaMA, or continues one the user has) on a corpus —
// the embedded graph's texts or a text file — plus, optionally, instruction records answered
// from their text alone ([data].instructions: the warm-up that makes a from-scratch model an
// "instruction-following" LLM, as Vicuna is before GraphGPT tunes it). Writes a Hugging Face
// folder with its tokenizer, ready for `graphtune generate` and the graph phases.
#include <c10/core/Device.h>

#include "config/job_config.hpp"

namespace gt {

class World;
// Trains on `device` (under any dp x pp layout), logs to stderr (world rank 0), writes
// [job].out_dir/model. Returns the exit code.
int run_lm_phase(const JobConfig& cfg, const World& world, const c10::Device& device);

}  // namespace gt
