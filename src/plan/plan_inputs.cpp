// A plan's measured inputs to and from JSON.
#include "mnddp/plan/plan_inputs.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "mnddp/error.hpp"
#include "mnddp/plan/input_file.hpp"

namespace mnddp {
namespace {

double get_number(const nlohmann::json& object, const char* key, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
    throw UsageError(fmt::format("{}: '{}' is missing or not a number >= 0", what, key));
  return it->get<double>();
}

const nlohmann::json& get_object(const nlohmann::json& object, const char* key, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_object())
    throw UsageError(fmt::format("{}: '{}' is missing or not an object", what, key));
  return *it;
}

template <typename T>
std::vector<T> get_list(const nlohmann::json& object, const char* key, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array())
    throw UsageError(fmt::format("{}: '{}' is missing or not a list", what, key));
  std::vector<T> out;
  out.reserve(it->size());
  for (const auto& v : *it) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw UsageError(fmt::format("{}: '{}' holds something other than numbers >= 0", what, key));
    out.push_back(v.get<T>());
  }
  return out;
}

}  // namespace

std::string plan_inputs_json(const PlanInputs& in) {
  const MeasuredStep& s = in.step;
  const MeasuredMemory& m = in.memory;
  const nlohmann::json doc = {{"step",
                               {{"data_wait_s", s.data_wait_s},
                                {"forward_s", s.forward_s},
                                {"backward_s", s.backward_s},
                                {"optimizer_s", s.optimizer_s},
                                {"threads", s.threads},
                                {"helper_cpu_s", s.helper_cpu_s},
                                {"gradient_bytes", s.gradient_bytes},
                                {"keys", s.keys},
                                {"ready_s", s.ready_s}}},
                              {"memory",
                               {{"parameters", m.parameters},
                                {"gradients", m.gradients},
                                {"optimizer_state", m.optimizer_state},
                                {"peak", m.peak},
                                {"baseline", m.baseline},
                                {"bucket_cap", m.bucket_cap}}},
                              {"options",
                               {{"bucket_cap_bytes", in.options.buckets.cap_bytes},
                                {"first_bucket_bytes", in.options.buckets.first_cap_bytes},
                                {"zero", in.options.zero_stage},
                                {"gradient_bytes_factor", in.options.gradient_bytes_factor}}},
                              {"network", nlohmann::json::parse(network_profile_json(in.network))},
                              {"model", in.model},
                              {"device", in.device},
                              {"batch_per_rank", in.batch_per_rank},
                              {"gpus_per_node", in.gpus_per_node},
                              {"max_nodes", in.max_nodes},
                              {"device_memory", in.device_memory},
                              {"checkpoint_cost_s", in.checkpoint_cost_s},
                              {"mtbf_hours", in.mtbf_hours}};
  return doc.dump();
}

PlanInputs parse_plan_inputs(const std::string& text, const std::string& what) {
  const nlohmann::json file = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object()) throw UsageError(fmt::format("{}: not a JSON plan", what));
  const nlohmann::json& doc = file.contains("inputs") ? get_object(file, "inputs", what) : file;
  PlanInputs in;
  const auto& step = get_object(doc, "step", what);
  in.step.data_wait_s = get_number(step, "data_wait_s", what);
  in.step.forward_s = get_number(step, "forward_s", what);
  in.step.backward_s = get_number(step, "backward_s", what);
  in.step.optimizer_s = get_number(step, "optimizer_s", what);
  in.step.threads = std::max(1, static_cast<int>(get_number(step, "threads", what)));
  // Plans written before it was measured have none.
  in.step.helper_cpu_s = step.contains("helper_cpu_s") ? get_number(step, "helper_cpu_s", what) : 0.0;
  in.step.gradient_bytes = get_list<std::size_t>(step, "gradient_bytes", what);
  in.step.keys = get_list<int>(step, "keys", what);
  in.step.ready_s = get_list<double>(step, "ready_s", what);
  if (in.step.keys.size() != in.step.gradient_bytes.size() || in.step.ready_s.size() != in.step.gradient_bytes.size() ||
      in.step.gradient_bytes.empty())
    throw UsageError(fmt::format("{}: 'gradient_bytes', 'keys' and 'ready_s' differ in length or are empty", what));
  const auto& memory = get_object(doc, "memory", what);
  in.memory.parameters = get_number(memory, "parameters", what);
  in.memory.gradients = get_number(memory, "gradients", what);
  in.memory.optimizer_state = get_number(memory, "optimizer_state", what);
  in.memory.peak = get_number(memory, "peak", what);
  in.memory.baseline = get_number(memory, "baseline", what);
  in.memory.bucket_cap = get_number(memory, "bucket_cap", what);
  const auto& options = get_object(doc, "options", what);
  in.options.buckets.cap_bytes = static_cast<std::size_t>(get_number(options, "bucket_cap_bytes", what));
  in.options.buckets.first_cap_bytes = static_cast<std::size_t>(get_number(options, "first_bucket_bytes", what));
  in.options.zero_stage = static_cast<int>(get_number(options, "zero", what));
  in.options.gradient_bytes_factor = get_number(options, "gradient_bytes_factor", what);
  if (in.options.zero_stage > 2)
    throw UsageError(fmt::format("{}: 'zero' is {}, not 0, 1 or 2", what, in.options.zero_stage));
  in.network = parse_network_profile(get_object(doc, "network", what).dump(), what + ": network");
  in.model = doc.contains("model") && doc["model"].is_string() ? doc["model"].get<std::string>() : "";
  in.device = doc.contains("device") && doc["device"].is_string() ? doc["device"].get<std::string>() : "";
  in.batch_per_rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(get_number(doc, "batch_per_rank", what)));
  in.gpus_per_node = std::max(1, static_cast<int>(get_number(doc, "gpus_per_node", what)));
  in.max_nodes = std::max(1, static_cast<int>(get_number(doc, "max_nodes", what)));
  in.device_memory = get_number(doc, "device_memory", what);
  in.checkpoint_cost_s = get_number(doc, "checkpoint_cost_s", what);
  in.mtbf_hours = get_number(doc, "mtbf_hours", what);
  return in;
}

PlanInputs load_plan_inputs(const std::string& path, const std::string& option) {
  const std::string what = fmt::format("{} '{}'", option, path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw UsageError(fmt::format("{}: no such file", what));
  return parse_plan_inputs(read_plan_input_file(path, what, 64u << 20), what);
}

}  // namespace mnddp
