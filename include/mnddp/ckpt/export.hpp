// `mnddp export`: a checkpoint's model as a file Python reads with torch.load: a dict with
// "state_dict" (parameter and buffer names -> tensors, as torch.nn.Module.state_dict()), "config"
// (the run's INI text), "sample_shape" and "step".
#pragma once

#include <string>

namespace mnddp {

// Reads `checkpoint` (checksums verified) and writes `out`. Throws UsageError naming the file.
void export_checkpoint(const std::string& checkpoint, const std::string& out);

}  // namespace mnddp
