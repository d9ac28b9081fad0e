// Internal to task/: the three tasks' factories (task.cpp chooses one).
#pragma once

#include <memory>

#include "mnddp/task/task.hpp"

namespace mnddp {

std::unique_ptr<Task> make_classification_task(const TaskOptions& options);
std::unique_ptr<Task> make_regression_task(const TaskOptions& options, std::int64_t targets_per_sample);
std::unique_ptr<Task> make_language_model_task(const TaskOptions& options);

}  // namespace mnddp
