// detforge augment: draws training samples as the model sees them (the data.train pipeline of a
// config, with its boxes and class names) into PNGs and a contact sheet.
#include <filesystem>
#include <iostream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "cli.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "data/build.h"
#include "data/draw.h"

namespace fs = std::filesystem;

namespace detforge::tools {
namespace {

struct AugmentArgs {
  std::string config;
  std::string out = "augment";
  int64_t n = 16;
  int64_t epoch = 0;
  std::vector<std::string> overrides;
};

cv::Mat draw_sample(const data::Sample& s, const data::CategoryMap& categories) {
  cv::Mat img = s.image.clone();
  std::vector<data::DrawnBox> boxes;
  for (size_t i = 0; i < s.labels.size(); ++i) {
    const float* b = &s.boxes[4 * i];
    const int64_t label = s.labels[i];
    boxes.push_back({{b[0], b[1], b[2], b[3]},
                     label,
                     label < categories.num_classes() ? categories.names()[size_t(label)]
                                                      : std::to_string(label)});
  }
  data::draw_boxes(img, boxes);
  return img;
}

// Tiles of at most `tile` pixels a side, `columns` per row, each captioned.
cv::Mat contact_sheet(const std::vector<cv::Mat>& images, const std::vector<std::string>& captions,
                      int tile, int columns) {
  const int rows = (static_cast<int>(images.size()) + columns - 1) / columns;
  const int cell = tile + 20;
  cv::Mat sheet(rows * cell, columns * tile, CV_8UC3, cv::Scalar::all(255));
  for (size_t k = 0; k < images.size(); ++k) {
    const cv::Mat& im = images[k];
    const double scale = std::min(1.0, static_cast<double>(tile) / std::max(im.rows, im.cols));
    cv::Mat small;
    cv::resize(im, small, cv::Size(), scale, scale, cv::INTER_AREA);
    const int x = static_cast<int>(k) % columns * tile, y = static_cast<int>(k) / columns * cell;
    small.copyTo(sheet(cv::Rect(x, y, small.cols, small.rows)));
    cv::putText(sheet, captions[k], {x + 4, y + tile + 15}, cv::FONT_HERSHEY_SIMPLEX, 0.4,
                cv::Scalar::all(0), 1);
  }
  return sheet;
}

void run_augment(const AugmentArgs& a) {
  const auto preview = data::train_preview(Config::load(a.config, a.overrides));
  const data::SplitOptions& split = preview.train;
  const int64_t epochs = preview.epochs;

  const data::CocoDataset dataset(split.dataset);
  data::SamplerOptions so = split.sampler;
  if (split.aspect_ratio_group_factor >= 0)
    so.group_ids =
        data::aspect_ratio_groups(dataset.aspect_ratios(), split.aspect_ratio_group_factor);
  data::BatchSampler sampler(dataset.size(), so);
  sampler.set_epoch(a.epoch);
  data::LoaderOptions lo = split.loader;
  lo.pipeline.total_epochs = epochs;
  const data::Pipeline pipeline = data::make_pipeline(lo);

  make_directories(a.out, "--out");
  std::vector<cv::Mat> drawn;
  std::vector<std::string> captions;
  int64_t dropped = 0, emptied = 0;
  const auto read = [&](int64_t j) { return dataset.read(j); };
  const auto batches = sampler.batches();
  for (size_t k = 0; k < batches.size(); ++k) {
    const auto& batch = batches[k];
    const int64_t side = pipeline.batch_long_side(a.epoch, batch.front());
    // Mosaic and mixup partners from the recent batches, as the loader draws them.
    const auto partners = data::partner_pool(batches, k);
    for (const int64_t i : batch) {
      if (static_cast<int64_t>(drawn.size()) >= a.n) break;
      data::Sample s = pipeline.run(read, dataset.size(), i, a.epoch, &partners);
      if (side > 0) data::resize_long_side(s, side);
      dropped += s.dropped_boxes;
      if (s.dropped_boxes > 0 && s.labels.empty()) ++emptied;
      drawn.push_back(draw_sample(s, dataset.categories()));
      captions.push_back(str("#", drawn.size() - 1, " image_id=", s.image_id, " ", s.image.cols,
                             "x", s.image.rows, " boxes=", s.labels.size()));
      char name[64];
      std::snprintf(name, sizeof(name), "sample_%03zu.png", drawn.size() - 1);
      const std::string path = (fs::path(a.out) / name).string();
      if (!cv::imwrite(path, drawn.back())) throw IoError(str("augment: cannot write ", path));
    }
    if (static_cast<int64_t>(drawn.size()) >= a.n) break;
  }
  const std::string sheet = (fs::path(a.out) / "contact_sheet.png").string();
  if (!drawn.empty() && !cv::imwrite(sheet, contact_sheet(drawn, captions, 320, 4)))
    throw IoError(str("augment: cannot write ", sheet));
  std::string names;
  for (const auto& t : pipeline.transforms()) {
    names += (names.empty() ? "" : ", ") + t->name();
    if (t->mixing() && !pipeline.mixing_on(a.epoch)) names += " (closed)";
  }
  std::cout << "wrote " << drawn.size() << " samples of epoch " << a.epoch << " to " << a.out
            << " (sample_NNN.png, contact_sheet.png)\npipeline: " << names
            << "\ndropped boxes: " << dropped << "; images left without boxes: " << emptied << "\n";
}

}  // namespace

void add_augment_command(CLI::App& app) {
  auto a = std::make_shared<AugmentArgs>();
  auto* cmd = app.add_subcommand("augment", command_help("augment"));
  cmd->add_option("--config,-c", a->config, "YAML config file")->required();
  cmd->add_option("--out", a->out, "folder for the PNGs")->capture_default_str();
  cmd->add_option("--n", a->n, "number of samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--epoch", a->epoch, "epoch to draw (close_mosaic applies)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("overrides", a->overrides, "overrides a.b.c=value (typed by YAML)");
  cmd->callback([a] { run_augment(*a); });
}

}  // namespace detforge::tools
