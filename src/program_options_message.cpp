// One-pass formatting of Boost.Program_options errors (program_options_message.hpp).
#include "mnddp/program_options_message.hpp"

#include <fmt/format.h>

#include <boost/program_options/parsers.hpp>
#include <boost/program_options/variables_map.hpp>

#include <map>
#include <utility>

#include "mnddp/error.hpp"

namespace mnddp {
namespace {

namespace po = boost::program_options;

// A copy of the error, so that its template and substitutions (protected) can be read.
class ErrorText : public po::error_with_option_name {
 public:
  explicit ErrorText(const po::error_with_option_name& error) : po::error_with_option_name(error) {}

  std::string format() const {
    std::map<std::string, std::string> values(m_substitutions);
    values["canonical_option"] = get_canonical_option_name();
    values["prefix"] = get_canonical_option_prefix();
    // Defaults (Boost's own words for an option without a name) apply to the template alone, which
    // holds no user text yet.
    std::string text = m_error_template;
    for (const auto& [name, replacement] : m_substitution_defaults) {
      const auto value = values.find(name);
      if (value != values.end() && !value->second.empty()) continue;
      text = replace_all(text, replacement.first, replacement.second);
    }
    // Then the tokens, each filled once: what is filled in is never searched again.
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t end = text[i] == '%' ? text.find('%', i + 1) : std::string::npos;
      if (end != std::string::npos) {
        const auto value = values.find(text.substr(i + 1, end - i - 1));
        if (value != values.end()) {
          out += value->second;
          i = end + 1;
          continue;
        }
      }
      out += text[i++];
    }
    return out;
  }

 private:
  static std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
    if (from.empty()) return text;
    std::string out;
    std::size_t at = 0;
    for (std::size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size())
      out += text.substr(at, found - at) + to;
    return out + text.substr(at);
  }
};

}  // namespace

std::string program_options_message(const po::error& error) {
  if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&error)) {
    std::string text = ErrorText(*named).format();
    if (const auto* ambiguous = dynamic_cast<const po::ambiguous_option*>(&error)) {
      text += " and matches";
      for (const auto& alternative : ambiguous->alternatives()) text += " '" + alternative + "'";
    }
    return text;
  }
  return error.what();  // the other errors hold no user text in a template
}

void take_command_options(std::vector<std::string>& args, const po::options_description& own,
                          std::string_view command) {
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  try {
    const po::parsed_options parsed =
        po::command_line_parser(args).options(own).style(style).allow_unregistered().run();
    po::variables_map values;
    po::store(parsed, values);
    po::notify(values);
    args = po::collect_unrecognized(parsed.options, po::include_positional);
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{}: {}", command, program_options_message(e)));
  }
}

}  // namespace mnddp
