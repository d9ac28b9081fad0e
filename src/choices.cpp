// The one wording of a bad choice.
#include "mnddp/choices.hpp"

#include <fmt/format.h>

#include "mnddp/error.hpp"

namespace mnddp {

void reject_choice(const std::string& option, const std::string& text, const std::string& choices) {
  throw UsageError(fmt::format("{}: must be one of {} (got '{}')", option, choices, text));
}

}  // namespace mnddp
