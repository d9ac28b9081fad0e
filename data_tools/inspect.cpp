// mnddp-data inspect: describes each file's datasets, then validates the files as one dataset
// (shapes, dtypes, label types and ranges across shards); exit 2 on any problem.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <numeric>

#include "cli.hpp"
#include "mnddp/data/h5_reader.hpp"
#include "mnddp/data/shard_index.hpp"
#include "mnddp/error.hpp"
#include "mnddp/h5/h5_handle.hpp"

namespace mnddp::tools {
namespace {

std::string dims_text(hid_t space) {
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
  if (!dims.empty()) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// One line per dataset, groups walked recursively: dtype, shape, chunking and filters.
herr_t describe_member(hid_t group, const char* name, const H5L_info_t* /*info*/, void* prefix_data) {
  const std::string path = *static_cast<const std::string*>(prefix_data) + name;
  H5Handle dataset(H5Oopen(group, name, H5P_DEFAULT));
  const H5I_type_t kind = dataset ? H5Iget_type(dataset.get()) : H5I_BADID;
  if (kind == H5I_GROUP) {
    std::string prefix = path + "/";
    hsize_t position = 0;
    return H5Literate(dataset.get(), H5_INDEX_NAME, H5_ITER_INC, &position, describe_member, &prefix);
  }
  if (kind != H5I_DATASET) {
    h5_take_error();
    std::cout << fmt::format("  {}: (not a dataset)\n", path);
    return 0;
  }
  H5Handle type(H5Dget_type(dataset.get()));
  H5Handle space(H5Dget_space(dataset.get()));
  H5Handle create(H5Dget_create_plist(dataset.get()));
  std::string layout = "contiguous";
  if (H5Pget_layout(create.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space.get()))));
    H5Pget_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data());
    layout = fmt::format("chunks [{}]", fmt::join(chunk, ", "));
    for (int f = 0; f < H5Pget_nfilters(create.get()); ++f) {
      char filter[64] = {};
      unsigned flags = 0;
      std::size_t count = 0;
      H5Pget_filter2(create.get(), static_cast<unsigned>(f), &flags, &count, nullptr, sizeof filter, filter, nullptr);
      layout += fmt::format(", {}", filter);
    }
  }
  std::cout << fmt::format("  {}: {} {}, {}\n", path, h5_type_name(type.get()), dims_text(space.get()), layout);
  return 0;
}

// Reads every input once; the reader's Error policy names the first non-finite value's file.
void check_all_values(const ShardIndex& index) {
  if (!is_float_type(index.sample_type)) return;  // integers are always finite
  H5Reader reader(index);
  constexpr std::int64_t kBlock = 4096;
  std::vector<std::int64_t> ids;
  std::vector<float> x;
  for (std::int64_t first = 0; first < index.num_samples(); first += kBlock) {
    const std::int64_t rows = std::min(kBlock, index.num_samples() - first);
    ids.resize(static_cast<std::size_t>(rows));
    std::iota(ids.begin(), ids.end(), first);
    x.resize(static_cast<std::size_t>(rows * index.sample_numel()));
    reader.read(ids, x.data(), nullptr);
  }
}

// What scan_shards should check y against: a file without y whose x is integer sequences [N, T] is
// token data; otherwise y must be there (and scan_shards names it when it is not).
LabelKind labels_expected(const std::string& file, const std::string& x_name, const std::string& y_name) {
  std::lock_guard lock(hdf5_mutex());
  H5Handle handle = h5_open_read_only(file);
  if (H5Lexists(handle.get(), y_name.c_str(), H5P_DEFAULT) > 0) return LabelKind::Value;
  h5_take_error();
  if (H5Lexists(handle.get(), x_name.c_str(), H5P_DEFAULT) <= 0) return LabelKind::Value;
  H5Handle x(H5Dopen2(handle.get(), x_name.c_str(), H5P_DEFAULT));
  H5Handle type(x ? H5Dget_type(x.get()) : H5I_INVALID_HID);
  const bool sequences = x && h5_dims(x.get()).size() == 2 && type && H5Tget_class(type.get()) == H5T_INTEGER;
  return sequences ? LabelKind::None : LabelKind::Value;
}

// "integer labels in [0, 9]: fits --task classification (--num-classes 10 or more) or regression", ...
std::string task_it_fits(const ShardIndex& index) {
  if (!index.has_labels()) {
    const auto [low, high] = scan_input_range(index);
    return fmt::format("token ids in [{}, {}], no labels: fits --task lm (--vocab-size {} or more, --context up to {})",
                       low, high, high + 1, index.sample_shape[0] - 1);
  }
  if (index.has_class_labels()) {
    std::int64_t low = index.shards.front().label_min;
    std::int64_t high = index.shards.front().label_max;
    for (const auto& shard : index.shards) {
      low = std::min(low, shard.label_min);
      high = std::max(high, shard.label_max);
    }
    return fmt::format(
        "integer labels in [{}, {}]: fits --task classification (--num-classes {} or more) or regression", low, high,
        high + 1);
  }
  return fmt::format("{} targets, {} per sample: fits --task regression", sample_type_name(index.label_type),
                     index.label_numel());
}

}  // namespace

int run_inspect(std::span<const std::string> args) {
  std::vector<std::string> specs;
  std::string x_name = "x";
  std::string y_name = "y";
  int num_classes = 0;
  bool check_values = false;
  po::options_description options("inspect options");
  // clang-format off
  options.add_options()
      ("help,h", "show this help")
      ("paths", po::value(&specs)->multitoken(),
       "files, directories, globs or .txt/.list files (also as plain arguments)")
      ("x-name", po::value(&x_name)->default_value(x_name), "name of the input dataset")
      ("y-name", po::value(&y_name)->default_value(y_name), "name of the label dataset")
      ("num-classes", po::value(&num_classes)->default_value(num_classes),
       "also require integer labels in [0, num-classes) (0: no check)")
      ("check-values", po::bool_switch(&check_values), "read every input and fail on NaN or infinity");
  // clang-format on
  po::positional_options_description positional;
  positional.add("paths", -1);
  po::variables_map values;
  if (!parse_arguments(args, options, positional,
                       "usage: mnddp-data inspect PATHS... [options]\n"
                       "Describes each file and checks that together they form one dataset; exit 2 on problems.",
                       values))
    return kExitOk;
  if (num_classes < 0) throw UsageError(fmt::format("--num-classes must be at least 0, got {}", num_classes));

  const std::vector<std::string> files = expand_all(specs, "inspect");
  for (const auto& file : files) {
    std::lock_guard lock(hdf5_mutex());
    H5Handle handle = h5_open_read_only(file);
    std::cout << file << "\n";
    hsize_t position = 0;
    std::string root;
    H5Literate(handle.get(), H5_INDEX_NAME, H5_ITER_INC, &position, describe_member, &root);
  }
  // Validates what the trainer needs: x/y present and consistent, every shard the same samples. A
  // file without y is token data (--task lm) when its inputs are integer sequences.
  const ShardIndex index = scan_shards(files, x_name, y_name, labels_expected(files.front(), x_name, y_name));
  std::cout << "shards:\n";
  for (const auto& shard : index.shards) {
    const std::string labels = index.has_class_labels()
                                   ? fmt::format("labels [{}, {}]", shard.label_min, shard.label_max)
                               : index.has_labels() ? fmt::format("{} targets", sample_type_name(index.label_type))
                                                    : std::string("token sequences");
    std::cout << fmt::format("  {}: {} samples, {}\n", shard.path, shard.num_samples, labels);
  }
  if (num_classes > 0) check_label_range(index, num_classes, "--num-classes");
  if (check_values) check_all_values(index);
  std::cout << fmt::format("OK: {} file{}, {} samples of {} [{}], {}{}\n", index.shards.size(),
                           index.shards.size() == 1 ? "" : "s", index.num_samples(),
                           sample_type_name(index.sample_type), fmt::join(index.sample_shape, ", "),
                           task_it_fits(index), check_values ? ", all inputs finite" : "");
  return kExitOk;
}

}  // namespace mnddp::tools
