// Files in directories others can write to (group-shared project and scratch space, the usual HPC
// layout): nothing mnddp writes follows a symlink someone planted there, and nothing overwrites a
// file mnddp did not create. Temporaries get unique names and are created exclusively (O_EXCL, which
// also refuses a symlink), then renamed over their target; the start-up sweep takes only mnddp's own
// temporaries, and only those older than this process.
#pragma once

#include <string>

namespace mnddp {

// Writes `contents` to `directory`/`name` atomically and durably: a fresh temporary beside it (see
// temporary_path), fsync, rename over `name`, fsync of the directory. Throws Error naming the file.
void replace_file(const std::string& directory, const std::string& name, const std::string& contents);

// A path in `directory` for a temporary of `name` that no file has: "name.<random>.tmp". Its creator
// must create it exclusively (O_EXCL, H5F_ACC_EXCL): the name is unguessable, not reserved.
std::string temporary_path(const std::string& directory, const std::string& name);

// Whether `file_name` is a temporary of `name` made by temporary_path ("name.<random>.tmp"), or the
// fixed "name.tmp" earlier versions used.
bool is_temporary_of(const std::string& file_name, const std::string& name);

// Whether the file at `path` was last written before this process started (a temporary a dead run
// left, not one a live run beside this one is writing). False when it cannot be told.
bool older_than_this_process(const std::string& path);

}  // namespace mnddp
