#include "data/topic_vocabulary.hpp"

#include <algorithm>
#include <climits>

namespace gt {

// Real words a paper on each topic would use. The first seven topics are the default corpus.
// Changing a list changes every generated corpus: treat these as data with a version
// (meta.json records "vocabulary_version").
const std::vector<TopicSpec>& topic_specs() {
  static const std::vector<TopicSpec> specs = {
      {"neural networks",
       "artificial neural networks: architectures, training methods and learned representations",
       {"neural", "neuron", "neurons", "perceptron", "multilayer", "backpropagation", "convolutional",
        "recurrent", "lstm", "feedforward", "activation", "activations", "dropout", "autoencoder",
        "autoencoders", "transformer", "transformers", "attention", "residual", "embeddings",
        "pretraining", "finetuning", "softmax", "normalization", "initialization", "layer", "layers",
        "hidden", "encoder", "decoder", "connectionist", "synaptic", "hebbian", "spiking",
        "distillation", "pruning", "quantization", "overparameterized", "generative", "adversarial",
        "diffusion", "capsule", "relu", "minibatch", "weights", "width", "gradients", "deep",
        "pooling", "epochs", "overfitting", "regularization", "representations"}},
      {"reinforcement learning",
       "agents that learn to act from rewards by interacting with an environment",
       {"reinforcement", "reward", "rewards", "policy", "policies", "agent", "agents", "bandit",
        "bandits", "exploration", "exploitation", "mdp", "pomdp", "actor", "critic", "episodic",
        "trajectory", "trajectories", "horizon", "discounted", "regret", "bellman", "rollout",
        "rollouts", "sarsa", "curiosity", "intrinsic", "shaping", "multiagent", "environment",
        "environments", "imitation", "demonstrations", "robot", "robotic", "locomotion", "atari",
        "games", "credit", "action", "actions", "states", "transitions", "temporal", "returns",
        "options", "manipulation", "navigation", "controller", "control", "planning", "tabular"}},
      {"theory",
       "theory of computation: algorithms, complexity, lower bounds and combinatorics",
       {"complexity", "polynomial", "hardness", "approximation", "approximability",
        "inapproximability", "reductions", "boolean", "circuit", "circuits", "bound", "bounds",
        "lower", "upper", "proof", "proofs", "theorem", "lemma", "decidability", "completeness",
        "combinatorial", "matroid", "matroids", "randomized", "derandomization", "oracle", "turing",
        "automata", "pseudorandom", "expander", "expanders", "sublinear", "submodular",
        "parameterized", "kernelization", "treewidth", "planar", "coloring", "satisfiability",
        "clique", "cliques", "spectral", "asymptotic", "logarithmic", "quadratic", "exponential",
        "counting", "interactive", "polytope", "lattice", "graphs", "hypergraph", "hypergraphs"}},
      {"databases",
       "storing, querying and managing data: query processing, transactions and data systems",
       {"relational", "sql", "query", "queries", "transaction", "transactions", "indexing", "index",
        "join", "joins", "schema", "schemas", "storage", "olap", "tuple", "tuples", "table", "tables",
        "concurrency", "recovery", "logging", "btree", "materialized", "views", "optimizer",
        "cardinality", "warehouse", "warehousing", "columnar", "nosql", "replication", "consistency",
        "serializability", "locking", "provenance", "integration", "cleaning", "spatial", "xml",
        "cube", "aggregation", "partitioning", "sharding", "compression", "buffer", "analytics",
        "workload", "workloads", "database", "databases", "stores", "skyline", "lineage"}},
      {"computer vision",
       "understanding images and video: recognition, detection, segmentation and 3d geometry",
       {"image", "images", "visual", "pixel", "pixels", "segmentation", "detection", "detector",
        "object", "objects", "recognition", "camera", "cameras", "stereo", "depth", "optical",
        "tracking", "pose", "scene", "scenes", "video", "videos", "texture", "contour", "contours",
        "superresolution", "denoising", "inpainting", "illumination", "shading", "reconstruction",
        "lidar", "face", "faces", "facial", "pedestrian", "reidentification", "keypoint",
        "keypoints", "landmark", "photometric", "calibration", "multiview", "panoptic", "bounding",
        "imagenet", "sketch", "rendering", "shape", "shapes", "vision", "color", "motion",
        "saliency"}},
      {"natural language processing",
       "computational processing of human language: parsing, translation, dialogue and retrieval",
       {"language", "languages", "linguistic", "text", "texts", "sentence", "sentences", "word",
        "words", "parsing", "parser", "syntactic", "semantic", "lexical", "corpus", "corpora",
        "translation", "dialogue", "question", "answering", "summarization", "sentiment", "entity",
        "entities", "named", "coreference", "discourse", "morphology", "morphological",
        "tokenization", "vocabulary", "grammar", "grammars", "treebank", "tagging", "speech",
        "pragmatics", "multilingual", "crosslingual", "bilingual", "paraphrase", "documents",
        "document", "retrieval", "topic", "lexicon", "wordnet", "reading", "comprehension",
        "spelling", "phonetic", "prosody", "chatbot", "annotation"}},
      {"computer networks",
       "communication networks: protocols, routing, wireless links and the internet",
       {"routing", "packet", "packets", "wireless", "protocol", "protocols", "tcp", "congestion",
        "bandwidth", "latency", "throughput", "internet", "router", "routers", "switching",
        "multicast", "broadcast", "mobile", "cellular", "sensor", "sensors", "mesh", "topology",
        "peer", "overlay", "datacenter", "traffic", "queueing", "spectrum", "mimo", "antenna",
        "antennas", "handoff", "qos", "sdn", "dns", "ethernet", "fiber", "vehicular", "satellite",
        "transmission", "link", "links", "capacity", "interference", "channel", "channels", "radio",
        "addressing", "forwarding", "backbone"}},
      {"security and cryptography",
       "protecting systems and data: cryptography, attacks, defences and privacy",
       {"encryption", "decryption", "cipher", "ciphers", "ciphertext", "cryptographic",
        "cryptography", "cryptanalysis", "homomorphic", "secure", "security", "privacy", "attack",
        "attacks", "attacker", "malware", "intrusion", "authentication", "signature", "signatures",
        "password", "passwords", "vulnerability", "vulnerabilities", "exploit", "exploits",
        "phishing", "firewall", "firewalls", "botnet", "obfuscation", "leakage", "anonymity",
        "blockchain", "ledger", "trust", "forensics", "spam", "fuzzing", "sandbox", "sandboxing",
        "integrity", "confidentiality", "certificate", "certificates", "tls", "keys", "key",
        "ransomware", "threat", "threats", "biometric"}},
      {"operating systems",
       "systems software: kernels, memory, file systems, scheduling and virtualization",
       {"kernel", "scheduler", "scheduling", "memory", "virtual", "paging", "filesystem",
        "filesystems", "file", "files", "cache", "caching", "caches", "process", "processes",
        "thread", "threads", "multicore", "interrupt", "interrupts", "driver", "drivers",
        "virtualization", "hypervisor", "container", "containers", "microkernel", "syscall", "disk",
        "disks", "flash", "ssd", "persistent", "page", "pages", "allocator", "allocation", "energy",
        "power", "embedded", "realtime", "deadline", "deadlines", "synchronization", "mutex",
        "operating", "unix", "linux", "boot", "checkpointing", "snapshot", "snapshots", "swap"}},
      {"programming languages",
       "designing, analysing and implementing programming languages and their compilers",
       {"compiler", "compilers", "compilation", "type", "types", "typed", "semantics", "lambda",
        "calculus", "functional", "imperative", "polymorphism", "polymorphic", "program",
        "programs", "static", "interpreter", "interpreters", "bytecode", "jit", "garbage",
        "collection", "refactoring", "syntax", "monads", "haskell", "ocaml", "java", "rust",
        "ownership", "parallelism", "abstraction", "interpretation", "symbolic", "execution",
        "synthesis", "specification", "specifications", "contracts", "dataflow", "pointer",
        "pointers", "aliasing", "loop", "loops", "modules", "debugging", "testing", "bugs",
        "gradual", "dependent", "coq", "refinement", "continuations", "macros"}},
      {"probabilistic methods",
       "reasoning under uncertainty: bayesian models, graphical models and approximate inference",
       {"bayesian", "probabilistic", "inference", "posterior", "prior", "priors", "likelihood",
        "variational", "sampling", "markov", "chain", "chains", "mcmc", "gibbs", "belief",
        "propagation", "graphical", "latent", "dirichlet", "mixture", "mixtures", "gaussian",
        "expectation", "maximization", "nonparametric", "stochastic", "uncertainty", "conditional",
        "independence", "causal", "causality", "estimation", "entropy", "density", "kalman",
        "filtering", "particle", "particles", "marginal", "marginals", "factor", "factors",
        "hierarchical", "conjugate", "monte", "carlo", "bootstrap", "credible"}},
      {"genetic algorithms",
       "evolutionary computation: populations of candidate solutions improved by variation and selection",
       {"genetic", "evolutionary", "evolution", "mutation", "mutations", "crossover", "fitness",
        "population", "populations", "chromosome", "chromosomes", "genome", "genomes", "selection",
        "tournament", "elitism", "niching", "multiobjective", "pareto", "swarm", "ant", "colony",
        "memetic", "coevolution", "coevolutionary", "speciation", "offspring", "breeding",
        "generations", "individuals", "recombination", "encoding", "schemata", "landscape",
        "landscapes", "neuroevolution", "metaheuristic", "metaheuristics", "annealing", "simulated",
        "tabu", "climbing", "hill", "deceptive", "diversity", "genotype", "phenotype",
        "evolvability", "islands", "elitist", "premature"}},
  };
  return specs;
}

int topic_words_available() {
  int n = INT_MAX;
  for (const auto& t : topic_specs()) n = std::min(n, static_cast<int>(t.words.size()));
  return n;
}

const std::vector<const char*>& generic_adjectives() {
  static const std::vector<const char*> w = {
      "efficient", "novel", "improved", "robust", "scalable", "adaptive", "practical", "general",
      "unified", "new", "fast", "simple", "empirical", "systematic", "comparative", "effective",
      "accurate", "lightweight", "principled", "automatic", "automated", "large", "flexible",
      "generalized", "modular", "incremental", "interpretable", "reliable", "holistic", "optimal"};
  return w;
}

const std::vector<const char*>& generic_nouns() {
  // Singular, so that every template reads as a sentence ("the proposed method improves ...").
  static const std::vector<const char*> w = {
      "approach", "analysis", "framework", "method", "study", "evaluation", "survey", "perspective",
      "benchmark", "design", "technique", "application", "problem", "model", "system", "algorithm",
      "tool", "overview", "investigation", "comparison", "formulation", "characterization",
      "paradigm", "methodology", "procedure", "strategy", "mechanism", "scheme", "solution",
      "toolkit"};
  return w;
}

const std::vector<const char*>& title_openers() {
  static const std::vector<const char*> w = {"towards", "rethinking", "revisiting", "understanding",
                                             "beyond", "exploring", "improving"};
  return w;
}

const std::vector<const char*>& glue_words() {
  static const std::vector<const char*> w = {
      "for", "of", "with", "via", "in", "and", "using", "the", "a", "an", "to", "from", "under",
      "through", "by", "we", "our", "this", "that", "show", "propose", "proposed", "paper",
      "studies", "context", "analyze", "combines", "improves", "experiments", "results", "is",
      "about", "as", "at", "on", "compare"};
  return w;
}

}  // namespace gt
