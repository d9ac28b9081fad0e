// --resume text <-> ResumeFrom.
#include "mnddp/ckpt/resume_from.hpp"

#include <fmt/format.h>

#include "mnddp/error.hpp"

namespace mnddp {

std::string ResumeFrom::text() const {
  switch (mode) {
    case Mode::Auto:
      return "auto";
    case Mode::None:
      return "none";
    case Mode::Path:
      break;
  }
  return path;
}

ResumeFrom parse_resume_from(const std::string& text) {
  if (text.empty()) throw UsageError("--resume: must not be empty (got '')");
  // Boost's INI parser cuts a line at '#': such a path could not reach the other ranks intact.
  if (text.find('#') != std::string::npos)
    throw UsageError(fmt::format("--resume: must not contain '#' (got '{}')", text));
  if (text == "auto") return {ResumeFrom::Mode::Auto, {}};
  if (text == "none") return {ResumeFrom::Mode::None, {}};
  return {ResumeFrom::Mode::Path, text};
}

}  // namespace mnddp
