// The message of a Boost.Program_options error, formatted without Boost's what(): Boost replaces
// each %token% of its template by searching from the start again after every replacement, so a
// value holding its own token ("--lr=%value%") never ends (a hang, found by fuzz_config). This fills
// the same template in one pass.
#pragma once

#include <boost/program_options/errors.hpp>

#include <string>

namespace mnddp {

std::string program_options_message(const boost::program_options::error& error);

}  // namespace mnddp
