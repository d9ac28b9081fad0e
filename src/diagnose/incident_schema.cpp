// The shape of an incident record, checked field by field.
#include "mnddp/diagnose/incident_schema.hpp"

#include <fmt/format.h>

#include <functional>
#include <initializer_list>
#include <utility>

namespace mnddp {
namespace {

using json = nlohmann::json;

enum class Kind { String, Number, Boolean, Object, Array, NumberOrNull };

bool fits(const json& value, Kind kind) {
  switch (kind) {
    case Kind::String:
      return value.is_string();
    case Kind::Number:
      return value.is_number();
    case Kind::Boolean:
      return value.is_boolean();
    case Kind::Object:
      return value.is_object();
    case Kind::Array:
      return value.is_array();
    case Kind::NumberOrNull:
      return value.is_number() || value.is_null();
  }
  return false;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::String:
      return "a string";
    case Kind::Number:
      return "a number";
    case Kind::Boolean:
      return "true or false";
    case Kind::Object:
      return "an object";
    case Kind::Array:
      return "an array";
    case Kind::NumberOrNull:
      return "a number or null";
  }
  return "?";
}

using Fields = std::initializer_list<std::pair<const char*, Kind>>;

// The first of `fields` present in `object` with another type, as "prefix.name: expected ...".
std::optional<std::string> check_fields(const json& object, const std::string& prefix, Fields fields) {
  for (const auto& [name, kind] : fields) {
    const auto found = object.find(name);
    if (found != object.end() && !fits(*found, kind))
      return fmt::format("{}{}: expected {}", prefix, name, kind_name(kind));
  }
  return std::nullopt;
}

// Every element of the array `name` in `object` (if present) must be an object that `check` accepts.
std::optional<std::string> check_elements(
    const json& object, const std::string& prefix, const char* name,
    const std::function<std::optional<std::string>(const json&, const std::string&)>& check) {
  const auto found = object.find(name);
  if (found == object.end()) return std::nullopt;
  std::size_t i = 0;
  for (const auto& element : *found) {
    const std::string where = fmt::format("{}{}[{}]", prefix, name, i++);
    if (!element.is_object()) return where + ": expected an object";
    if (auto problem = check(element, where + ".")) return problem;
  }
  return std::nullopt;
}

const Fields kCall{{"op", Kind::String},        {"seq", Kind::Number},     {"bytes", Kind::Number},
                   {"label", Kind::String},     {"age_s", Kind::Number},   {"start", Kind::Number},
                   {"end", Kind::NumberOrNull}, {"channel", Kind::String}, {"what", Kind::String}};

std::optional<std::string> check_call(const json& call, const std::string& prefix) {
  return check_fields(call, prefix, kCall);
}

std::optional<std::string> check_channel(const json& channel, const std::string& prefix) {
  if (auto problem = check_fields(channel, prefix,
                                  {{"channel", Kind::String},
                                   {"pace", Kind::String},
                                   {"started", Kind::Number},
                                   {"finished", Kind::Number},
                                   {"history", Kind::Array}}))
    return problem;
  if (const auto open = channel.find("open"); open != channel.end() && !open->is_null()) {
    if (!open->is_object()) return prefix + "open: expected an object or null";
    if (auto problem = check_call(*open, prefix + "open.")) return problem;
  }
  return check_elements(channel, prefix, "history", check_call);
}

std::optional<std::string> check_frame(const json& frame, const std::string& prefix) {
  return check_fields(frame, prefix, {{"module", Kind::String}, {"offset", Kind::String}, {"symbol", Kind::String}});
}

std::optional<std::string> check_thread(const json& thread, const std::string& prefix) {
  if (auto problem = check_fields(thread, prefix,
                                  {{"tid", Kind::Number},
                                   {"name", Kind::String},
                                   {"role", Kind::String},
                                   {"activity", Kind::String},
                                   {"activity_s", Kind::Number},
                                   {"crashed", Kind::Boolean},
                                   {"answered", Kind::Boolean},
                                   {"unwound", Kind::String},
                                   {"frames", Kind::Array}}))
    return problem;
  return check_elements(thread, prefix, "frames", check_frame);
}

std::optional<std::string> check_peer(const json& peer, const std::string& prefix) {
  return check_fields(peer, prefix,
                      {{"rank", Kind::Number},
                       {"state", Kind::String},
                       {"answered", Kind::Boolean},
                       {"where", Kind::String},
                       {"started", Kind::Number},
                       {"finished", Kind::Number},
                       {"idle_s", Kind::Number}});
}

}  // namespace

std::optional<std::string> incident_record_problem(const json& record) {
  if (!record.is_object()) return "the record is not an object";
  if (!record.contains("rank")) return "rank: missing";
  if (auto problem = check_fields(record, "",
                                  {{"incident", Kind::String},
                                   {"rank", Kind::Number},
                                   {"world_size", Kind::Number},
                                   {"cause", Kind::String},
                                   {"reason", Kind::String},
                                   {"origin", Kind::Number},
                                   {"step", Kind::Number},
                                   {"time", Kind::Number},
                                   {"host", Kind::String},
                                   {"pid", Kind::Number},
                                   {"device", Kind::String},
                                   {"withdrawn", Kind::Boolean},
                                   {"threads", Kind::Array},
                                   {"channels", Kind::Array},
                                   {"peers", Kind::Array},
                                   {"exit_code", Kind::Number}}))
    return problem;
  if (const auto stuck = record.find("stuck"); stuck != record.end() && !stuck->is_null()) {
    if (!stuck->is_object()) return std::string("stuck: expected an object or null");
    if (auto problem = check_call(*stuck, "stuck.")) return problem;
  }
  if (auto problem = check_elements(record, "", "threads", check_thread)) return problem;
  if (auto problem = check_elements(record, "", "channels", check_channel)) return problem;
  return check_elements(record, "", "peers", check_peer);
}

const json& field(const json& object, const char* key) {
  static const json null;
  if (!object.is_object()) return null;
  const auto found = object.find(key);
  return found == object.end() ? null : *found;
}

}  // namespace mnddp
