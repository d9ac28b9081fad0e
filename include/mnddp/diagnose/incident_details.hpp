// The parts of `mnddp incident`'s text (incident_command.hpp): how a rank's record reads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mnddp {

// "allreduce #812 (4.0 MB, gradient bucket 0)" from a call's JSON (an open call or a history entry).
std::string describe_call(const nlohmann::json& call);
// "in data wait for 61.2 s (data loader: reading 8 rows of shard train_017.h5 for 61.0 s)": the main
// thread's activity and every other thread's that has one.
std::string doing(const nlohmann::json& record);
// Every rank's state in a line, then for each rank in `shown` its threads' stacks and last calls.
std::string describe_ranks(const std::map<int, nlohmann::json>& by_rank, int world, const nlohmann::json& origin,
                           const std::vector<int>& shown);

}  // namespace mnddp
