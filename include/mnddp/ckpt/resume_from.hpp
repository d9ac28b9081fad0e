// --resume: where a run starts from, parsed once with the config.
#pragma once

#include <string>

namespace mnddp {

struct ResumeFrom {
  enum class Mode { Auto, None, Path };
  Mode mode = Mode::Auto;  // Auto: the newest valid checkpoint in --checkpoint-dir, if any
  std::string path;        // Mode::Path: this checkpoint, which must verify

  std::string text() const;  // "auto", "none" or the path: the option's text
  bool operator==(const ResumeFrom&) const = default;
};

// "auto", "none", or a checkpoint path. Throws UsageError naming --resume for an empty value.
ResumeFrom parse_resume_from(const std::string& text);

}  // namespace mnddp
