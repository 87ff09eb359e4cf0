// detforge lint: checks a COCO instances file and its images with every validation rule,
// prints a summary, optionally writes a JSON report, and exits 4 (data error) on errors.
#include <fstream>
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "core/errors.h"
#include "data/lint.h"

namespace detforge::tools {

void add_lint_command(CLI::App& app) {
  struct Args {
    data::LintOptions lint;
    int64_t num_classes = 0;
    std::string report;
    std::string check_images = "decode";
    std::vector<int64_t> category_ids;
    std::string format = "coco";
  };
  auto a = std::make_shared<Args>();
  a->lint.split = "train";
  auto* cmd = app.add_subcommand("lint", command_help("lint"));
  cmd->add_option("--format", a->format, "the dataset's format")
      ->capture_default_str()
      ->check(CLI::IsMember(data::dataset_format_names()));
  cmd->add_option("--ann", a->lint.annotation_file,
                  "coco: the instances json; yolo: the data.yaml; voc: an ImageSets list or a "
                  "folder of XML files")
      ->required();
  cmd->add_option("--images", a->lint.image_root,
                  "coco: the folder the file_name entries are relative to (required); voc: the "
                  "JPEGImages folder (default: beside Annotations)");
  cmd->add_option("--split", a->lint.split, "yolo: the data.yaml key to check")
      ->capture_default_str();
  cmd->add_option("--num-classes", a->num_classes,
                  "expected number of classes (category.count_mismatch otherwise)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--category-ids", a->category_ids,
                  "category subset used as labels, in label order");
  cmd->add_option("--report", a->report, "write the JSON report here");
  cmd->add_option("--check-images", a->check_images, "none | exists | decode")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "exists", "decode"}));
  cmd->add_option("--bbox-tolerance", a->lint.validation.bbox_tolerance,
                  "pixels a box may reach beyond the image")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--near-duplicate-iou", a->lint.validation.near_duplicate_iou,
                  "same-class IoU reported as bbox.near_duplicate (0 = off)")
      ->capture_default_str();
  cmd->add_option("--max-objects", a->lint.max_objects,
                  "count the images with more objects than a detector outputs per image (DETR "
                  "queries, YOLO's detections_per_image)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--examples", a->lint.examples, "examples printed per code")
      ->capture_default_str();
  cmd->add_option("--threads", a->lint.validation.threads, "decoding threads (0 = all cores)")
      ->capture_default_str();
  cmd->callback([a] {
    a->lint.format = *data::parse_dataset_format(a->format);
    const auto& format = data::dataset_format_info(a->lint.format);
    if (format.images == data::DatasetFormatInfo::Images::kRequired && a->lint.image_root.empty())
      throw ConfigError(str("lint: --images is required with --format ", format.name));
    auto& v = a->lint.validation;
    if (a->num_classes > 0) v.num_classes = a->num_classes;
    v.category_subset = a->category_ids;
    v.check_images = a->check_images == "none"     ? data::ImageCheck::kNone
                     : a->check_images == "exists" ? data::ImageCheck::kExists
                                                   : data::ImageCheck::kDecode;
    const auto report = data::run_lint(a->lint);
    std::cout << data::format_lint(report, a->lint.examples) << std::flush;
    if (!a->report.empty()) {
      std::ofstream out(a->report);
      out << data::lint_json(report);
      out.close();
      if (!out) throw IoError(str("lint: cannot write report ", a->report));
      std::cout << "report: " << a->report << "\n";
    }
    if (report.errors > 0) {
      throw DataError(
          str("lint: ", report.errors, " errors in ", a->lint.annotation_file, " (see above)"));
    }
  });
}

}  // namespace detforge::tools
