// Numeric CSV input for `mnddp-data convert`: one sample per line, a label column chosen by index
// or header name, an optional header line detected when the first line is not all numbers.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "mnddp/error.hpp"
#include "sources.hpp"

namespace mnddp::tools {
namespace {

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  return std::string(text);
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const auto comma = line.find(',', start);
    fields.push_back(trim(std::string_view(line).substr(start, comma - start)));
    if (comma == std::string::npos) return fields;
    start = comma + 1;
  }
}

bool parse_number(const std::string& text, double& value) {
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  return !text.empty() && error == std::errc() && end == last;
}

bool all_numbers(const std::vector<std::string>& fields) {
  double ignored = 0;
  for (const auto& field : fields)
    if (!parse_number(field, ignored)) return false;
  return true;
}

// The label column's position among `columns` fields: an integer (negative counts from the end)
// or, with a header, a column name.
std::size_t label_position(const std::string& path, const std::string& label_column, std::size_t columns,
                           const std::vector<std::string>& names) {
  long long number = 0;
  const char* last = label_column.data() + label_column.size();
  const auto [end, error] = std::from_chars(label_column.data(), last, number);
  if (!label_column.empty() && error == std::errc() && end == last) {
    const long long position = number < 0 ? static_cast<long long>(columns) + number : number;
    if (position < 0 || position >= static_cast<long long>(columns))
      throw UsageError(fmt::format("--label-column {}: '{}' has only {} columns", label_column, path, columns));
    return static_cast<std::size_t>(position);
  }
  for (std::size_t c = 0; c < names.size(); ++c)
    if (names[c] == label_column) return c;
  throw UsageError(fmt::format("--label-column '{}': no such column in the header of '{}'", label_column, path));
}

}  // namespace

std::unique_ptr<SampleSource> open_csv_source(const std::string& path, const std::string& label_column,
                                              const std::string& header) {
  if (header != "auto" && header != "yes" && header != "no")
    throw UsageError(fmt::format("--header: unknown value '{}' (use auto, yes or no)", header));
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("cannot open '{}' (no such file, or no permission)", path));

  auto source = std::make_unique<MemorySource>();
  source->x_type = SampleType::F32;
  std::vector<float> x;
  std::vector<std::string> names;
  std::size_t columns = 0;
  std::size_t label = 0;
  std::string line;
  for (std::size_t line_number = 1; std::getline(in, line); ++line_number) {
    if (trim(line).empty()) continue;
    const std::vector<std::string> fields = split_fields(line);
    if (columns == 0) {
      columns = fields.size();
      if (columns < 2)
        throw UsageError(fmt::format("'{}' line {}: {} column; a sample needs a label and at least one input", path,
                                     line_number, columns));
      const bool is_header = header == "yes" || (header == "auto" && !all_numbers(fields));
      if (is_header) names = fields;
      label = label_position(path, label_column, columns, names);
      if (is_header) continue;
    }
    if (fields.size() != columns)
      throw UsageError(fmt::format("'{}' line {}: {} columns where the first line has {}", path, line_number,
                                   fields.size(), columns));
    for (std::size_t c = 0; c < columns; ++c) {
      double value = 0;
      if (!parse_number(fields[c], value))
        throw UsageError(fmt::format("'{}' line {} column {}: '{}' is not a number", path, line_number, c, fields[c]));
      if (c != label) {
        x.push_back(static_cast<float>(value));
      } else if (value != std::floor(value) || std::fabs(value) > 9.0e15) {
        throw UsageError(
            fmt::format("'{}' line {} column {}: label '{}' is not an integer", path, line_number, c, fields[c]));
      } else {
        source->labels.push_back(static_cast<std::int64_t>(value));
      }
    }
  }
  if (source->labels.empty()) throw UsageError(fmt::format("'{}' holds no samples", path));
  source->num_samples = static_cast<std::int64_t>(source->labels.size());
  source->sample_shape = {static_cast<std::int64_t>(columns - 1)};
  source->data.resize(x.size() * sizeof(float));
  std::memcpy(source->data.data(), x.data(), source->data.size());
  source->description =
      fmt::format("CSV '{}' (label column {}{})", path, label, names.empty() ? "" : fmt::format(" '{}'", names[label]));
  return source;
}

}  // namespace mnddp::tools
