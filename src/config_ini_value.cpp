// Quoting of INI values that Boost's reader would change (config_ini_value.hpp).
#include "config_ini_value.hpp"

#include <fmt/format.h>

#include "mnddp/error.hpp"

namespace mnddp::config_detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }
bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

bool needs_quotes(const std::string& value) {
  if (value.empty()) return false;
  if (is_space(value.front()) || is_space(value.back()) || value.front() == '"') return true;
  for (char c : value)
    if (c == '#' || is_control(c)) return true;
  return false;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string ini_value(const std::string& value) {
  if (!needs_quotes(value)) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '#' || is_control(c)) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string unquote_ini_value(const std::string& text, const std::string& option) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return text;
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format("--{}: the quoted value {} {}", option, text.substr(0, 200), why));
  };
  std::string out;
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) throw bad("ends with a lone backslash");
    const char escaped = text[++i];
    switch (escaped) {
      case '\\':
      case '"':
        out += escaped;
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'x': {
        const int high = i + 2 < text.size() - 1 ? hex_digit(text[i + 1]) : -1;
        const int low = high >= 0 ? hex_digit(text[i + 2]) : -1;
        if (low < 0) throw bad("has \\x without two hex digits");
        out += static_cast<char>(high * 16 + low);
        i += 2;
        break;
      }
      default:
        throw bad(fmt::format("has an unknown escape \\{} (known: \\\\ \\\" \\n \\r \\t \\xHH)", escaped));
    }
  }
  return out;
}

boost::program_options::parsed_options read_ini(std::istream& in,
                                                const boost::program_options::options_description& options) {
  auto parsed = boost::program_options::parse_config_file(in, options, /*allow_unregistered=*/false);
  for (auto& option : parsed.options)
    for (auto& value : option.value) value = unquote_ini_value(value, option.string_key);
  return parsed;
}

}  // namespace mnddp::config_detail
