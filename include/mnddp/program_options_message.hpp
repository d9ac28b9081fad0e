// The message of a Boost.Program_options error, formatted without Boost's what(): Boost replaces
// each %token% of its template by searching from the start again after every replacement, so a
// value holding its own token ("--lr=%value%") never ends (a hang, found by fuzz_config). This fills
// the same template in one pass.
#pragma once

#include <boost/program_options/errors.hpp>
#include <boost/program_options/options_description.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace mnddp {

std::string program_options_message(const boost::program_options::error& error);

// A subcommand's own options (mnddp preflight's, mnddp plan's) taken out of `args`, their values
// stored; the rest stay in `args` in their order, for the train parser. No abbreviations. A bad
// value throws UsageError as "COMMAND: message".
void take_command_options(std::vector<std::string>& args, const boost::program_options::options_description& own,
                          std::string_view command);

}  // namespace mnddp
