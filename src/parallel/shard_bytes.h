// Which bytes of a GGUF one rank of a ShardPlan reads: the header (metadata and tensor infos)
// and, per tensor of its stage, the rows, column slices, experts or vocabulary rows its share
// uses. A worker without the file fetches exactly these (shard_transfer.h) into a sparse copy.
//
// The per-tensor rules follow model::Decoder::CopyShardWeights and the attention blocks'
// CopyAttentionRows (which rows/columns a rank copies out of the mapping) and read the layer
// shard from StageShardOf, the same function the Executor uses. Tensors without a rule here
// are taken whole, so a new tensor is over-fetched, never missing; tests/parallel/
// shard_bytes_test.cc runs every fixture on files holding only these bytes (the rest poisoned)
// and demands bit-identical logits, which is what keeps the two in agreement.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "parallel/file_digest.h"
#include "plan/shard_plan.h"

namespace cohort::gguf {
class File;
}

namespace cohort::parallel {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t end() const { return offset + length; }
  bool operator==(const ByteRange&) const = default;
};

// Sorted by offset, empty ranges dropped, overlapping and adjacent ones joined.
std::vector<ByteRange> MergeRanges(std::vector<ByteRange> ranges);
uint64_t TotalBytes(std::span<const ByteRange> ranges);
// Whether every byte of `need` lies in `have` (both merged).
bool Covers(std::span<const ByteRange> have, std::span<const ByteRange> need);
// A digest of the list (offsets and lengths, little-endian): two sides compare range lists
// with it without sending them.
Sha256Digest RangesDigest(std::span<const ByteRange> ranges);

// The merged byte ranges of `file` that plan rank `rank` reads (offsets from the file start).
Result<std::vector<ByteRange>> ShardByteRanges(const gguf::File& file, const plan::ShardPlan& plan,
                                               int rank);

// Touches bytes `ranges` of a mapped file (`file_bytes`, gguf::File::bytes()) page by page,
// so the loader that reads them next finds them in memory: what loading a model from a cold
// disk costs, measured. `on_read` (may be empty) hears the bytes touched so far and in all
// after every MiB.
Status TouchRanges(std::span<const uint8_t> file_bytes, std::span<const ByteRange> ranges,
                   const std::function<void(uint64_t bytes_read, uint64_t bytes_total)>& on_read);

}  // namespace cohort::parallel
