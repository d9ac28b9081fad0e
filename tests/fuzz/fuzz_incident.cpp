// Fuzz harness: the incident reader (`mnddp incident FILE`): records are parsed, checked against the
// schema, and explained. A record of the wrong shape is skipped with a message; nothing may escape but
// mnddp's Error, and nothing may crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "mnddp/diagnose/incident_command.hpp"
#include "mnddp/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 256 * 1024) return -1;
  // Frames are named by addr2line where their module exists: a program per input would make the
  // fuzzer measure addr2line. With no PATH it cannot start, and the frames stay unnamed.
  static const bool no_programs = ::setenv("PATH", "/nonexistent", 1) == 0;
  (void)no_programs;
  const mnddp::fuzz::MemoryFile file(data, size);
  try {
    const auto records = mnddp::read_incident_records(file.path());
    (void)mnddp::explain_incident(records);
    (void)mnddp::explain_incident(records, /*all_ranks=*/true);
  } catch (const mnddp::Error&) {
  }
  return 0;
}
