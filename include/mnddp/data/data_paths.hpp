// Data specs: how --train-data, --val-data and the mnddp-data tools name their HDF5 files.
#pragma once

#include <string>
#include <vector>

namespace mnddp {

// Expands a data spec into a sorted list of files: a directory (every *.h5 / *.hdf5 in it),
// a glob pattern, a text file listing one path per line (name ending in .txt or .list), a single
// file, or a comma-separated mix of those. Throws UsageError naming `option` and the spec when
// nothing matches or a file is named twice.
std::vector<std::string> expand_data_paths(const std::string& spec, const std::string& option);

}  // namespace mnddp
