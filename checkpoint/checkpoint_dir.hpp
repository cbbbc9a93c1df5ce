#pragma once
// Checkpoints on disk, and what "committed" means. Torch-free.
//
//   <root>/step_00000100/rank_00000.safetensors   shards, one per rank that owns something
//   <root>/step_00000100/index.json               written last: the commit point
//
// A checkpoint is committed exactly when its index.json exists: every rank writes and fsyncs its
// shard, all ranks meet at a barrier, then one rank writes the index under a temporary name,
// fsyncs it, renames it into place and fsyncs the folder. A save killed at any point before the
// rename leaves a folder without index.json, which `latest` never picks and loading refuses.
// (PyTorch DCP commits the same way: its metadata file is written last.)
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/index.hpp"

namespace gt::ckpt {

// "step_00000100": zero-padded so that names sort by step.
std::string step_folder_name(int64_t step);
// "rank_00003.safetensors"
std::string shard_file_name(int rank);

// Committed checkpoint folders under root (full paths), oldest first by step. A missing root
// is an empty list. Folders without index.json, and names not of the step_N form, are skipped.
std::vector<std::string> committed_checkpoints(const std::string& root);

// `spec` is "latest" (the newest committed checkpoint under root) or a checkpoint folder.
// InputError when "latest" finds none ("no committed checkpoint in ROOT") or when PATH is not a
// committed checkpoint ("PATH: not a committed checkpoint (no index.json: the save that wrote it
// did not finish)", "PATH: no such folder").
std::string resolve_checkpoint(const std::string& root, const std::string& spec);

// A checkpoint a user names (export, [model].projector): a checkpoint folder, or a folder of
// step_* checkpoints (its newest committed one, as "latest"). InputError naming the path: no
// such folder, not a folder, not a checkpoint (with `hint`: what else the caller accepts), or
// shards without index.json ("not a committed checkpoint").
std::string find_checkpoint(const std::string& path, const std::string& hint = "");

// The commit: index.json.tmp written, fsynced, renamed to index.json, folder fsynced.
void commit_index(const std::string& folder, const Index& index);

// Reads and parses folder/index.json (InputError naming the file).
Index read_index(const std::string& folder);

// Checks every file the index lists: present, of the recorded size, with the recorded crc32
// (read sequentially in large blocks). InputError naming the folder, the file and the problem:
// "missing", "truncated: 1000 bytes, the index records 4096", "checksum mismatch (corrupted)".
void verify_files(const std::string& folder, const Index& index);

// Copies `source` into the folder as `name` (fsynced) and returns its entry for the index
// (rank = the writer): a checkpoint carries the small files its weights need, such as a
// tokenizer the run trained. InputError naming the file when it cannot be read or written.
FileEntry copy_into_checkpoint(const std::string& source, const std::string& folder, const std::string& name, int rank);
// The same with the file's contents given.
FileEntry write_into_checkpoint(const std::string& contents, const std::string& folder, const std::string& name,
                                int rank);

// Deletes committed checkpoints older than the newest `keep` ones (keep >= 1), and uncommitted
// folders older than the newest committed one (the remains of killed saves). Never touches the
// newest committed checkpoint, nor anything newer than it (a save in progress).
void prune_checkpoints(const std::string& root, int keep);

}  // namespace gt::ckpt
