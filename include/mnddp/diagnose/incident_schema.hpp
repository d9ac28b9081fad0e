// What a record of an incident file must look like before `mnddp incident` reads it: every field the
// verdict and the details read has the type they read it as, wherever it is present (absent fields
// take defaults). The file is input like any other (a torn line, an older or foreign writer, a
// hand-edited or hostile file): a record that does not fit is skipped with a line saying why, never
// thrown at the reader (nlohmann's type errors ended in std::terminate).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace mnddp {

// Nothing when `record` fits; else the first field that does not, as "threads[2].frames[0].offset:
// expected a string".
std::optional<std::string> incident_record_problem(const nlohmann::json& record);

// `object`'s field `key`, or null when it has none (or is no object). The readers use it, never
// operator[] on a const json, which is undefined for a missing key (a use after free, found by
// fuzz_incident).
const nlohmann::json& field(const nlohmann::json& object, const char* key);

}  // namespace mnddp
