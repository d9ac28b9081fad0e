// Input formats of `mnddp-data convert`: each opens as a SampleSource (samples of one dtype and
// shape, read by position, plus one int64 label per sample, or none for token sequences). Errors
// name the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mnddp/data/shard_index.hpp"

namespace mnddp::tools {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Copies samples [first, first + rows) into `x`: x_type elements in native byte order.
  virtual void read(std::int64_t first, std::int64_t rows, void* x) = 0;

  SampleType x_type = SampleType::F32;
  std::vector<std::int64_t> sample_shape;
  std::int64_t num_samples = 0;
  std::vector<std::int64_t> labels;  // one per sample; empty: no label dataset (token sequences)
  std::string description;           // what was read, for the summary line
};

// Samples held in memory (formats small enough to load whole: CSV, IDX, CIFAR-10).
class MemorySource : public SampleSource {
 public:
  void read(std::int64_t first, std::int64_t rows, void* x) override;
  std::vector<unsigned char> data;  // num_samples rows of x_type elements, native byte order
};

// numpy .npy (format 1.0, 2.0, 3.0; C order; any byte order): x of uint8, int8/16/32/64 or
// float16/32/64 with at least 2 dimensions; y a 1-D (or [n, 1]) array of integers.
std::unique_ptr<SampleSource> open_npy_source(const std::string& x_path, const std::string& y_path);

// Numeric CSV: one sample per line; the label column is an index (negative: from the end) or, with
// a header line, a column name. header: "auto" (a first line that is not all numbers), "yes", "no".
// Inputs become float32 [n, columns - 1].
std::unique_ptr<SampleSource> open_csv_source(const std::string& path, const std::string& label_column,
                                              const std::string& header);

// MNIST-style IDX pair (uncompressed): images [n, rows, cols] (any IDX element type) and labels [n].
std::unique_ptr<SampleSource> open_idx_source(const std::string& images_path, const std::string& labels_path);

// CIFAR-10 binary batches (data_batch_N.bin, test_batch.bin): records of 1 label byte and
// 3072 image bytes, giving uint8 [n, 3, 32, 32], in file order.
std::unique_ptr<SampleSource> open_cifar10_source(const std::vector<std::string>& paths);

// A flat token file (nanoGPT's train.bin: uint16 or uint32 ids, little-endian, no header) as
// consecutive sequences of `length` tokens [n, length]; the tail shorter than a sequence is left out.
std::unique_ptr<SampleSource> open_token_source(const std::string& path, SampleType type, std::int64_t length);

// Reverses the bytes of each of `count` elements of `size` bytes: big-endian data on this host.
void swap_bytes(void* data, std::size_t count, std::size_t size);

// The whole file; throws UsageError naming it when it cannot be read.
std::vector<unsigned char> read_whole_file(const std::string& path);

}  // namespace mnddp::tools
