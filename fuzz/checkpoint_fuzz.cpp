// A detforge checkpoint as `--resume`, `predict --weights` and `model.weights` open it: the zip
// checks, LibTorch's archive, the format record, classes, pixels and weights.
// DETFORGE_FUZZ_WRITE_SEED=<path> writes a small checkpoint there (a 2x2 linear model with
// classes and pixels) and exits: the seed of fuzz/corpus/checkpoint.
#include <cstdlib>

#include "engine/checkpoint.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace detforge;
  const char* seed = std::getenv("DETFORGE_FUZZ_WRITE_SEED");
  if (!seed) return 0;
  torch::manual_seed(0);
  torch::nn::Linear model(2, 2), ema(2, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const data::CategoryMap classes({1, 3}, {"cat", "dog"});
  const PixelNorm pixels = PixelNorm::unit();
  engine::CheckpointParts parts{model.get(), ema.get(), &optimizer, &classes, &pixels};
  engine::save_checkpoint(seed, parts, engine::TrainProgress{}, "model:\n  type: linear\n");
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string path = fuzz::scratch_file("input.ckpt", fuzz::bytes(data, size));
  fuzz::expect_clean([&] {
    if (!engine::is_checkpoint(path)) return;
    engine::read_checkpoint_classes(path);
    engine::read_checkpoint_pixels(path);
    engine::read_checkpoint_weight_file(path);
  });
  return 0;
}
