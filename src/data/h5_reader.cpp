// H5Reader: rows of unfiltered datasets are read with preadv straight into place (DirectRows), other
// datasets through HDF5 (h5_read_rows). Inputs arrive in the file's own element type and are
// converted and checked here (sample_values.cpp); labels are read once per shard and kept.
#include "mnddp/data/h5_reader.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "compressed_chunks.hpp"
#include "decoded_chunk_cache.hpp"
#include "direct_rows.hpp"
#include "h5_rows.hpp"
#include "mnddp/data/h5_types.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/error.hpp"
#include "mnddp/finite_scan.hpp"
#include "mnddp/h5/h5_handle.hpp"
#include "sample_values.hpp"

namespace mnddp {
namespace {

// Chunk cache policy. Unfiltered chunks: no cache, so HDF5 reads just the selected bytes (with a
// cache it copies each whole touched chunk first, which made random 64-sample batches 1 MiB per
// sample slower). Compressed chunks must be decoded whole anyway: cache the chunks one batch of
// consecutive samples touches (at least 4), so sequential reads (shard mode, evaluation) decode
// each chunk once, not once per batch; HDF5's 1 MiB default would silently skip bigger chunks.
H5Handle chunk_cache_access_list(hid_t dataset, std::int64_t batch_size) {
  constexpr std::size_t kMinChunksCached = 4;
  constexpr std::size_t kMinBytes = std::size_t{1} << 20;
  constexpr std::size_t kMaxBytes = std::size_t{256} << 20;
  constexpr std::size_t kHashSlots = 12421;  // a prime well above the chunks that fit
  H5Handle dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Handle dcpl(H5Dget_create_plist(dataset));
  H5Handle type(H5Dget_type(dataset));
  if (!dapl || !dcpl || !type || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return dapl;
  std::size_t bytes = 0;
  if (H5Pget_nfilters(dcpl.get()) > 0) {
    std::vector<hsize_t> chunk(h5_dims(dataset).size());
    const int rank = H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    std::size_t chunk_bytes = H5Tget_size(type.get());
    for (int d = 0; d < rank; ++d) chunk_bytes *= chunk[static_cast<std::size_t>(d)];
    const std::size_t chunk_rows = rank > 0 ? std::max<std::size_t>(1, chunk[0]) : 1;
    // +1: a batch that does not start on a chunk boundary straddles one more chunk.
    const std::size_t per_batch = static_cast<std::size_t>(std::max<std::int64_t>(batch_size, 0)) / chunk_rows + 1;
    bytes = std::clamp(std::max(kMinChunksCached, per_batch) * chunk_bytes, kMinBytes, kMaxBytes);
  }
  H5Pset_chunk_cache(dapl.get(), kHashSlots, bytes, H5D_CHUNK_CACHE_W0_DEFAULT);
  return dapl;
}

H5Handle open_dataset(hid_t file, const std::string& path, const std::string& name, std::int64_t batch_size) {
  H5Handle probe(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!probe) throw UsageError(fmt::format("'{}': cannot open dataset '{}': {}", path, name, h5_take_error()));
  H5Handle dapl = chunk_cache_access_list(probe.get(), batch_size);
  // Closed first: a second open of a still-open dataset shares its chunk cache and ignores dapl.
  probe.reset();
  H5Handle dataset(H5Dopen2(file, name.c_str(), dapl.get()));
  if (!dataset) throw UsageError(fmt::format("'{}': cannot open dataset '{}': {}", path, name, h5_take_error()));
  return dataset;
}

constexpr std::size_t kPieceBytes = std::size_t{1} << 20;  // direct reads between checks

// One requested sample: its shard, its row there, and its position in the caller's order.
struct Request {
  std::size_t shard;
  std::int64_t row;
  std::size_t out;
};

}  // namespace

struct H5Reader::OpenShards {
  struct Shard {
    H5Handle file;
    H5Handle x;
    H5Handle y;
    H5Handle x_float_type;   // what read() asks HDF5 for: native form of x (float for float16)
    H5Handle x_stored_type;  // what read_stored() asks for: x's own type in native byte order
    H5Handle y_stored_type;
    ConvertFn convert = nullptr;
    ConvertIdsFn convert_ids = nullptr;  // integer inputs only
    bool x_chunked = false;              // the layout of x, for h5_read_rows
    bool warned_nonfinite = false;
    std::vector<bool> finite;            // rows checked and found finite, not checked again in later epochs
    std::unique_ptr<DirectRows> direct;  // null: x is read through HDF5
    // Gzip/shuffle chunks that H5Reader decodes itself (null: unfiltered, or HDF5's pipeline).
    std::unique_ptr<CompressedChunks> compressed;
    // The shard's labels in y_stored_type, read whole on opening (label_numel values a sample):
    // per-row label reads through HDF5 would cost more than the rows themselves.
    std::vector<unsigned char> labels;
  };
  std::vector<Shard> shards;
  std::vector<std::int64_t> first_index;  // global index of each shard's first sample
  // Held by read_rows() over the shards and the scratch; HDF5 calls take hdf5_mutex() inside it.
  std::mutex mutex;
  std::vector<unsigned char> x_rows;  // scratch: distinct rows in file order, before conversion

  std::unique_ptr<DecodedChunkCache> decoded;  // gzip/shuffle chunks decoded by mnddp

  // Opens shard `number` on first use and checks it still matches what the index says about it.
  void open(const ShardIndex& index, std::size_t number, std::int64_t batch_size);
};

void H5Reader::OpenShards::open(const ShardIndex& index, std::size_t number, std::int64_t batch_size) {
  const std::string& path = index.shards[number].path;
  std::lock_guard lock(hdf5_mutex());
  Shard shard;
  shard.file = h5_open_read_only(path);
  shard.x = open_dataset(shard.file.get(), path, index.x_name, batch_size);
  if (index.has_labels()) shard.y = open_dataset(shard.file.get(), path, index.y_name, batch_size);

  // The index was made by a scan that may be old (or from another rank's view of the filesystem).
  const auto x_dims = h5_dims(shard.x.get());
  std::vector<hsize_t> expected_sample(index.sample_shape.begin(), index.sample_shape.end());
  std::vector<hsize_t> expected_label(index.label_shape.begin(), index.label_shape.end());
  const auto wanted = static_cast<hsize_t>(index.shards[number].num_samples);
  const auto fits = [wanted](const std::vector<hsize_t>& dims, const std::vector<hsize_t>& per_sample) {
    return dims.size() == per_sample.size() + 1 && std::equal(per_sample.begin(), per_sample.end(), dims.begin() + 1) &&
           dims[0] >= wanted;
  };
  if (!fits(x_dims, expected_sample) || (index.has_labels() && !fits(h5_dims(shard.y.get()), expected_label)))
    throw UsageError(
        fmt::format("'{}' changed since it was scanned: datasets '{}'/'{}' no longer hold {} samples of "
                    "the indexed shape",
                    path, index.x_name, index.y_name, wanted));

  H5Handle file_type(H5Dget_type(shard.x.get()));
  const auto stored = sample_type_of(file_type.get());
  if (stored != index.sample_type)
    throw UsageError(fmt::format("'{}' changed since it was scanned: dataset '{}' now holds {}, not {}", path,
                                 index.x_name, h5_type_name(file_type.get()), sample_type_name(index.sample_type)));
  // HDF5 has no native half type; its soft conversion widens IEEE half to float exactly.
  shard.x_float_type =
      index.sample_type == SampleType::F16 ? h5_memory_type(SampleType::F32) : h5_memory_type(index.sample_type);
  shard.x_stored_type = h5_memory_type(index.sample_type);
  shard.y_stored_type = h5_memory_type(index.label_type);
  shard.convert = converter_for(shard.x_float_type.get());
  shard.convert_ids = id_converter_for(shard.x_stored_type.get());
  if (shard.convert == nullptr)
    throw UsageError(fmt::format("'{}': dataset '{}' has unsupported element type {}", path, index.x_name,
                                 h5_type_name(file_type.get())));
  shard.finite.assign(static_cast<std::size_t>(wanted), false);
  H5Handle x_dcpl(H5Dget_create_plist(shard.x.get()));
  shard.x_chunked = x_dcpl && H5Pget_layout(x_dcpl.get()) == H5D_CHUNKED;
  shard.direct = DirectRows::open(shard.file.get(), shard.x.get(), shard.x_stored_type.get(), path);
  if (!shard.direct)
    shard.compressed = CompressedChunks::open(shard.file.get(), shard.x.get(), shard.x_stored_type.get(), path);

  if (!index.has_labels()) {
    shards[number] = std::move(shard);
    return;
  }
  const auto label_values = wanted * static_cast<hsize_t>(index.label_numel());
  shard.labels.resize(label_values * sample_type_size(index.label_type));
  H5Handle y_file = h5_select_run(shard.y.get(), 0, wanted);
  H5Handle y_memory(H5Screate_simple(1, &label_values, nullptr));
  if (!y_file || !y_memory ||
      H5Dread(shard.y.get(), shard.y_stored_type.get(), y_memory.get(), y_file.get(), H5P_DEFAULT,
              shard.labels.data()) < 0)
    throw UsageError(fmt::format("'{}': cannot read dataset '{}': {}", path, index.y_name, h5_take_error()));
  shards[number] = std::move(shard);
}

H5Reader::H5Reader(ShardIndex index, H5ReaderOptions options)
    : index_(std::move(index)), options_(options), open_(std::make_unique<OpenShards>()) {
  open_->decoded = std::make_unique<DecodedChunkCache>(options_);
  open_->shards.resize(index_.shards.size());
  std::int64_t first = 0;
  for (const auto& shard : index_.shards) {
    open_->first_index.push_back(first);
    first += shard.num_samples;
  }
}

H5Reader::~H5Reader() = default;

void H5Reader::read(std::span<const std::int64_t> indices, float* x_out, std::int64_t* y_out) {
  if (y_out != nullptr && !index_.has_class_labels())
    throw Error(fmt::format("H5Reader: dataset '{}' holds {} values, not integer labels (internal error)",
                            index_.y_name, sample_type_name(index_.label_type)));
  read_rows(indices, InputForm::Float, LabelForm::Class, x_out, y_out);
}

void H5Reader::read_targets(std::span<const std::int64_t> indices, float* x_out, float* targets_out) {
  if (!index_.has_labels()) throw Error("H5Reader: the data has no label dataset (internal error)");
  read_rows(indices, InputForm::Float, LabelForm::Float, x_out, targets_out);
}

void H5Reader::read_tokens(std::span<const std::int64_t> indices, std::int64_t* tokens_out) {
  if (is_float_type(index_.sample_type))
    throw Error(fmt::format("H5Reader: dataset '{}' holds {} values, not token ids (internal error)", index_.x_name,
                            sample_type_name(index_.sample_type)));
  read_rows(indices, InputForm::Ids, LabelForm::Class, tokens_out, nullptr);
}

void H5Reader::read_stored(std::span<const std::int64_t> indices, void* x_out, void* y_out) {
  read_rows(indices, InputForm::Stored, LabelForm::Stored, x_out, y_out);
}

void H5Reader::read_rows(std::span<const std::int64_t> indices, InputForm x_form, LabelForm y_form, void* x_out,
                         void* y_out) {
  if (indices.empty()) return;
  const std::int64_t total = index_.num_samples();
  const auto numel = static_cast<std::size_t>(index_.sample_numel());
  const bool stored = x_form == InputForm::Stored;
  const bool ids = x_form == InputForm::Ids;
  const std::size_t x_out_bytes = stored ? sample_type_size(index_.sample_type)
                                  : ids  ? sizeof(std::int64_t)
                                         : sizeof(float);
  const auto label_numel = static_cast<std::size_t>(index_.label_numel());
  const std::size_t label_bytes = label_numel * sample_type_size(index_.label_type);
  const std::size_t y_out_bytes = y_form == LabelForm::Float ? label_numel * sizeof(float) : label_bytes;
  const bool check_finite =
      x_form == InputForm::Float && is_float_type(index_.sample_type) && options_.nonfinite != NonfinitePolicy::Ignore;
  // Float32 inputs, int64 ids and stored reads need no conversion: direct reads put them in place.
  const bool in_place = stored || (x_form == InputForm::Float && index_.sample_type == SampleType::F32) ||
                        (ids && index_.sample_type == SampleType::I64);
  // HDF5 widens float16 to float for read(); the direct reads move bytes only.
  const bool direct_allowed = x_form != InputForm::Float || index_.sample_type != SampleType::F16;
  const std::size_t row_bytes = numel * (direct_allowed ? sample_type_size(index_.sample_type) : sizeof(float));

  std::vector<Request> requests;
  requests.reserve(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t global = indices[i];
    if (global < 0 || global >= total)
      throw Error(fmt::format("H5Reader: sample index {} is outside the data's {} samples", global, total));
    const auto next = std::upper_bound(open_->first_index.begin(), open_->first_index.end(), global);
    const auto shard = static_cast<std::size_t>(next - open_->first_index.begin() - 1);
    requests.push_back({shard, global - open_->first_index[shard], i});
  }
  std::sort(requests.begin(), requests.end(),
            [](const Request& a, const Request& b) { return std::tie(a.shard, a.row) < std::tie(b.shard, b.row); });
  // Each row once per reader: the check is a second pass over memory, a third of the time a read
  // from the page cache takes. After a Warn the file reports nothing more, so it needs no checks.
  const auto check = [&](OpenShards::Shard& shard, const std::string& path, std::int64_t row, const void* values) {
    std::vector<bool>::reference finite = shard.finite[static_cast<std::size_t>(row)];
    if (!finite && !shard.warned_nonfinite)
      finite = check_nonfinite(options_.nonfinite, shard.warned_nonfinite, path, index_.x_name, row,
                               static_cast<const float*>(values), numel);
  };
  const auto check_ids = [&](const std::string& path, std::int64_t row, const void* values) {
    check_token_ids(path, index_.x_name, row, static_cast<const std::int64_t*>(values), numel, options_.vocab_size);
  };
  const auto x_target = [&](const Request& r) {
    return static_cast<unsigned char*>(x_out) + r.out * numel * x_out_bytes;
  };

  // The requests of each shard, and their distinct rows in file order (padding may request a sample
  // twice; each row is read once): slots[i] is request i's row's position among its shard's rows.
  struct Group {
    std::size_t begin, end;            // in requests (and slots)
    std::size_t rows_begin, rows_end;  // in all_rows
  };
  std::vector<Group> groups;
  std::vector<std::int64_t> all_rows;
  std::vector<std::size_t> slots;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (i == 0 || requests[i].shard != requests[i - 1].shard)
      groups.push_back({i, i, all_rows.size(), all_rows.size()});
    Group& g = groups.back();
    if (g.rows_end == g.rows_begin || all_rows.back() != requests[i].row) {
      all_rows.push_back(requests[i].row);
      ++g.rows_end;
    }
    slots.push_back(g.rows_end - g.rows_begin - 1);
    g.end = i + 1;
  }
  const auto rows_of = [&](const Group& g) {
    return std::span<const std::int64_t>(all_rows).subspan(g.rows_begin, g.rows_end - g.rows_begin);
  };

  std::lock_guard lock(open_->mutex);
  // Compressed chunks of every shard decoded first, together on the decode pool: the chunks of a
  // --shuffle-unit chunk window lie in many shards, and one shard at a time would decode them one
  // at a time.
  std::vector<DecodedChunkCache::Wanted> wanted;
  std::vector<std::size_t> wanted_group;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const std::size_t number = requests[groups[k].begin].shard;
    if (!open_->shards[number].x) open_->open(index_, number, options_.batch_size);
    auto& shard = open_->shards[number];
    if (shard.direct != nullptr || shard.compressed == nullptr || !direct_allowed) continue;
    wanted.push_back({number, shard.compressed.get(), rows_of(groups[k])});
    wanted_group.push_back(k);
  }
  std::vector<bool> decoded(groups.size(), false);
  if (!wanted.empty()) {
    const std::vector<bool> present = open_->decoded->decode(wanted);
    for (std::size_t w = 0; w < wanted.size(); ++w) decoded[wanted_group[w]] = present[w];
  }

  std::vector<DirectRows::Target> reads;  // direct reads: one per distinct row
  for (std::size_t each = 0; each < groups.size(); ++each) {
    const Group& g = groups[each];
    const std::size_t number = requests[g.begin].shard;
    const auto group = std::span(requests).subspan(g.begin, g.end - g.begin);
    const auto rows = rows_of(g);
    const auto slot = std::span(slots).subspan(g.begin, group.size());
    auto& shard = open_->shards[number];
    const std::string& path = index_.shards[number].path;
    const Activity reading(fmt::format("reading {} rows of shard {}", rows.size(), path));

    // Direct reads go to the first request of each row in place, or else to the scratch.
    bool direct = shard.direct != nullptr && direct_allowed;
    if (!in_place) open_->x_rows.resize(rows.size() * row_bytes);
    reads.clear();
    for (std::size_t i = 0, row = 0; direct && i < group.size(); ++i) {
      if (i > 0 && slot[i] == slot[i - 1]) continue;
      const auto offset = shard.direct->offset(group[i].row);
      direct = offset.has_value();  // an unwritten chunk: HDF5 supplies its fill value
      if (direct) reads.push_back({*offset, in_place ? x_target(group[i]) : open_->x_rows.data() + row++ * row_bytes});
    }
    // In pieces that fit in L2, each checked while still there (not a whole batch at the end).
    const bool checked_here = direct && in_place && check_finite;
    for (std::size_t first = 0, per_piece = std::max<std::size_t>(1, kPieceBytes / std::max<std::size_t>(row_bytes, 1));
         direct && first < reads.size(); first += per_piece) {
      const auto piece = std::span(reads).subspan(first, std::min(per_piece, reads.size() - first));
      shard.direct->read(piece);
      for (std::size_t k = 0; checked_here && k < piece.size(); ++k)
        check(shard, path, rows[first + k], piece[k].destination);
    }
    // Rows copied out of the chunks decoded above.
    bool placed = direct;
    if (!placed && decoded[each]) {
      placed = true;
      for (std::size_t i = 0; i < group.size(); ++i) {
        if (i > 0 && slot[i] == slot[i - 1]) continue;
        unsigned char* target = in_place ? x_target(group[i]) : open_->x_rows.data() + slot[i] * row_bytes;
        std::memcpy(target, open_->decoded->row(number, *shard.compressed, group[i].row), row_bytes);
      }
    }
    if (!placed) {
      open_->x_rows.resize(rows.size() * row_bytes);
      std::lock_guard h5_lock(hdf5_mutex());
      const hid_t memory_type = x_form == InputForm::Float ? shard.x_float_type.get() : shard.x_stored_type.get();
      if (!h5_read_rows(shard.x.get(), shard.x_chunked, memory_type, rows, row_bytes, open_->x_rows.data()))
        throw UsageError(fmt::format("cannot read {} samples from '{}' (dataset '{}'): {}", rows.size(), path,
                                     index_.x_name, h5_take_error()));
    }

    // Into request order: copies of repeated rows, or conversion from the scratch.
    for (std::size_t i = 0; i < group.size(); ++i) {
      unsigned char* target = x_target(group[i]);
      if (placed && in_place) {
        if (i > 0 && slot[i] == slot[i - 1]) std::memcpy(target, x_target(group[i - 1]), row_bytes);
      } else if (stored) {
        std::memcpy(target, open_->x_rows.data() + slot[i] * row_bytes, row_bytes);
      } else if (ids) {
        shard.convert_ids(open_->x_rows.data() + slot[i] * row_bytes, reinterpret_cast<std::int64_t*>(target), numel);
      } else {
        shard.convert(open_->x_rows.data() + slot[i] * row_bytes, reinterpret_cast<float*>(target), numel);
      }
      const bool first_of_row = i == 0 || slot[i] != slot[i - 1];
      if (check_finite && !checked_here && first_of_row) check(shard, path, group[i].row, target);
      if (ids && first_of_row) check_ids(path, group[i].row, target);
      if (y_out == nullptr) continue;
      const unsigned char* label = shard.labels.data() + static_cast<std::size_t>(group[i].row) * label_bytes;
      unsigned char* label_target = static_cast<unsigned char*>(y_out) + group[i].out * y_out_bytes;
      if (y_form == LabelForm::Float)
        labels_to_float(index_.label_type, label, reinterpret_cast<float*>(label_target), label_numel);
      else
        std::memcpy(label_target, label, label_bytes);
    }
  }
  if (!wanted.empty()) open_->decoded->evict();
}

}  // namespace mnddp
