// Internal: option values in INI text. Boost's reader cuts a value at '#' (a comment) and trims its
// spaces, and a line ends it, so to_ini writes such a value in double quotes with backslash escapes
// ("a\x23b" for "a#b"), and every INI reader here decodes them: --print-config's text and the text
// rank 0 broadcasts carry every value exactly. Other values are written as they are.
#pragma once

#include <boost/program_options.hpp>

#include <istream>
#include <string>

namespace mnddp::config_detail {

// `value` as to_ini writes it: itself, or quoted and escaped where a reader would change it.
std::string ini_value(const std::string& value);

// A value as read from an INI file: a quoted one ("...") decoded (\\ \" \n \r \t \xHH), any other
// one as it is. Throws UsageError naming `option` for a quoted value with a bad escape.
std::string unquote_ini_value(const std::string& text, const std::string& option);

// Boost's parse_config_file, with every value unquoted.
boost::program_options::parsed_options read_ini(std::istream& in,
                                                const boost::program_options::options_description& options);

}  // namespace mnddp::config_detail
