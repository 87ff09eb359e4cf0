// detforge convert: one split of a COCO, YOLO or VOC dataset, checked by the validation rules,
// written in another of these formats with its images (src/data/convert.h).
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "core/errors.h"
#include "data/convert.h"
#include "data/formats.h"
#include "data/tile_dataset.h"
#include "data/validation.h"

namespace detforge::tools {
namespace {

// The end of convert's summary line: what the policy and the output format left out.
void report_left_out(const data::PolicyResult& kept, const std::vector<data::Issue>& issues,
                     const data::ConvertResult& r) {
  if (!kept.skipped_images.empty() || !kept.dropped_annotations.empty()) {
    std::cout << " (" << kept.skipped_images.size() << " images and "
              << kept.dropped_annotations.size() << " boxes left out: " << data::summarize(issues)
              << ")";
  }
  if (r.crowd_left_out > 0) {
    std::cout << "; " << r.crowd_left_out << " iscrowd boxes left out (YOLO labels have no "
              << "ignore flag)";
  }
  std::cout << "\n";
}

// Removes the folder at `path` when it goes out of scope, also on an error.
struct RemovedAtExit {
  std::string path;
  ~RemovedAtExit() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

void add_convert_command(CLI::App& app) {
  struct Args {
    std::string from = "coco", to, ann, images, split = "train", out, transfer = "link",
                on_invalid = "error";
    std::vector<int64_t> tile;
    data::TileDatasetOptions tiles;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("convert", command_help("convert"));
  const auto formats = CLI::IsMember(data::dataset_format_names());
  cmd->add_option("--from", a->from, "the source's format")->capture_default_str()->check(formats);
  cmd->add_option("--to", a->to, "the output's format")->required()->check(formats);
  cmd->add_option("--ann", a->ann,
                  "coco: the instances json; yolo: the data.yaml; voc: an ImageSets list or a "
                  "folder of XML files")
      ->required();
  cmd->add_option("--images", a->images,
                  "coco: the image folder; voc: the JPEGImages folder (default: beside "
                  "Annotations); yolo: unused");
  cmd->add_option(
         "--split", a->split,
         "the split's name: the data.yaml key of a yolo source, and the name in the output")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "the output folder (a second split may go into the same one)")
      ->required();
  cmd->add_option("--image-files", a->transfer,
                  "link (hard link, a copy across file systems) | copy | symlink")
      ->capture_default_str()
      ->check(CLI::IsMember({"link", "copy", "symlink"}));
  cmd->add_option("--on-invalid", a->on_invalid,
                  "error: refuse a source with errors; drop: leave out bad boxes; skip_image: "
                  "leave out images with any error")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "drop", "skip_image"}));
  cmd->add_option("--tile", a->tile,
                  "cut every image into tiles of H,W pixels (H: square) at its own resolution, "
                  "as predict --slice and SAHI's slice_coco cut them; each tile is an image")
      ->delimiter(',')
      ->expected(1, 2);
  cmd->add_option("--overlap", a->tiles.overlap,
                  "--tile: fraction of a tile its neighbour overlaps")
      ->capture_default_str();
  cmd->add_option("--min-visible", a->tiles.min_visible,
                  "--tile: a box cut by a tile's edge stays while this fraction of it is inside")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--skip-empty", a->tiles.skip_empty, "--tile: leave out tiles without boxes");
  cmd->callback([a] {
    const auto& from = data::dataset_format_info(*data::parse_dataset_format(a->from));
    if (from.images == data::DatasetFormatInfo::Images::kRequired && a->images.empty())
      throw ConfigError(str("convert: --from ", from.name,
                            " needs --images (the folder of the file_name entries)"));
    const data::DatasetSource source{from.format, a->ann, a->images, a->split};
    const data::CocoFile file = data::read_dataset(source);
    data::ValidationOptions v;
    v.near_duplicate_iou = 0;
    const auto issues = data::validate(file, v);
    const auto kept = data::apply_policy(file, issues, *data::parse_on_invalid(a->on_invalid));
    data::CocoFile out = file;
    out.images.clear();
    out.annotations.clear();
    for (const auto i : kept.kept_image_indices) out.images.push_back(file.images[size_t(i)]);
    for (const auto i : kept.kept_annotation_indices)
      out.annotations.push_back(file.annotations[size_t(i)]);
    data::ConvertOptions o;
    o.to = *data::parse_dataset_format(a->to);
    o.out_dir = a->out;
    o.split = a->split;
    o.images = *data::parse_image_transfer(a->transfer);
    if (a->tile.empty()) {
      const auto r = data::convert_dataset(out, o);
      std::cout << "convert: " << source.describe() << " -> " << a->to << " " << r.entry << ": "
                << r.images << " images, " << r.boxes << " boxes";
      report_left_out(kept, issues, r);
      return;
    }
    if (o.images == data::ImageTransfer::kSymlink)
      throw ConfigError(
          "convert --tile writes new images: --image-files link or copy, not symlink");
    // The tiles are written beside the output, then linked (or copied) into it as any image is.
    a->tiles.tile_height = a->tile.front();
    a->tiles.tile_width = a->tile.back();
    a->tiles.image_dir = (std::filesystem::path(a->out) / (".tiles-" + a->split)).string();
    const RemovedAtExit staging{a->tiles.image_dir};
    const auto t = data::tile_dataset(out, a->tiles);
    const auto r = data::convert_dataset(t.file, o);
    std::cout << "convert: " << source.describe() << " -> " << a->to << " " << r.entry << ": "
              << t.source_images << " images cut into " << t.tiles << " tiles of "
              << a->tiles.tile_height << "x" << a->tiles.tile_width << " (overlap "
              << a->tiles.overlap << "), " << r.boxes << " boxes: " << t.boxes_whole << " whole, "
              << t.boxes_cut << " cut by a tile's edge; " << t.pieces_dropped << " pieces under "
              << a->tiles.min_visible << " visible left out";
    if (t.empty_tiles_skipped > 0)
      std::cout << "; " << t.empty_tiles_skipped << " empty tiles skipped";
    if (t.boxes_lost > 0) {
      std::cout << "; " << t.boxes_lost << " boxes are in no tile (larger than a tile's "
                << "overlap allows: give a larger --tile or --overlap)";
    }
    report_left_out(kept, issues, r);
  });
}

}  // namespace detforge::tools
