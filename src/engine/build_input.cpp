#include "engine/build_input.h"

#include "core/errors.h"

namespace detforge::engine {

void set_loader_input(const FamilyInput& family, const PixelNorm& pixels,
                      const data::DataOptions& configured, const ConfigNode* data,
                      data::LoaderOptions& loader) {
  loader.collate.mean = pixels.mean;
  loader.collate.std = pixels.std;
  auto& divisible = loader.collate.size_divisible;
  if (!data || !data->has("size_divisible")) {
    divisible = family.stride;
  } else if (divisible % family.stride != 0) {
    data->fail("size_divisible", str(divisible, " is not a multiple of the ", family.type,
                                     " detector's stride ", family.stride));
  }
  auto& t = loader.transforms;
  t.stride = divisible;
  const auto resize = configured.resize;
  t.resize =
      resize.value_or(family.letterboxes ? data::ResizeMode::letterbox : data::ResizeMode::opencv);
  if (t.resize == data::ResizeMode::letterbox && !configured.max_size)
    t.max_size = kLetterboxDefaultSize;
  if (resize == data::ResizeMode::letterbox && !family.letterboxes && data) {
    data->fail("resize", str("letterbox is Ultralytics' pre-processing, whose boxes only the yolo "
                             "family maps back; model.type '",
                             family.type, "' takes opencv, torchvision or transformers"));
  }
}

std::string object_count_warning(const data::CocoFile& train, int64_t limit, const std::string& key,
                                 const std::string& family) {
  std::string out;
  if (limit > 0) {
    const auto over = data::crowded_images(train, limit);
    if (over.count) {
      out = str("data.train: ", over.describe(), ": the ", family, " detector outputs ", limit,
                " per image; raise ", key);
    }
  }
  const auto coco = data::crowded_images(train, data::kCocoMaxDetections);
  if (coco.count && (limit == 0 || limit > data::kCocoMaxDetections)) {
    out += str(out.empty() ? "" : "\n", "data.train: ", coco.describe(),
               " by COCO evaluation, which scores at most 100 detections per image (maxDets)");
  }
  return out;
}

}  // namespace detforge::engine
