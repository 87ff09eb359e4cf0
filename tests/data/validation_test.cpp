// Validation rules, policies and lint, one hand-written fixture per code (tests/fixtures/coco).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "data/coco.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "data/lint.h"
#include "data/validation.h"
#include "test_util.h"

namespace detforge::data {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(DETFORGE_SOURCE_DIR) + "/tests/fixtures/coco/";
const std::string kImages = kFixtures + "images";

std::vector<Issue> check(const std::string& name, ValidationOptions o = {}) {
  return validate(read_coco(kFixtures + name, kImages), o);
}

std::vector<const Issue*> with_code(const std::vector<Issue>& issues, const std::string& code) {
  std::vector<const Issue*> out;
  for (const auto& i : issues) {
    if (i.code == code) out.push_back(&i);
  }
  return out;
}

std::string dump(const std::vector<Issue>& issues) {
  std::string s;
  for (const auto& i : issues) s += i.format() + "\n";
  return s;
}

TEST(Coco, ValidFixtureHasNoIssuesAndMapsLabels) {
  const auto f = read_coco(kFixtures + "valid.json", kImages);
  ASSERT_EQ(f.images.size(), 2u);
  ASSERT_EQ(f.annotations.size(), 2u);
  EXPECT_EQ(f.annotations[1].bbox, (std::array<double, 4>{10, 20, 30, 30}));
  ValidationOptions o;
  o.check_images = ImageCheck::kDecode;
  o.num_classes = 2;
  const auto issues = validate(f, o);
  EXPECT_TRUE(issues.empty()) << dump(issues);
}

// A run reads each instances file once: later readers get the same record, even when the file
// has changed or gone since.
TEST(Coco, DatasetFilesReadsEachFileOnce) {
  testing::TempDir dir;
  const std::string valid =
      R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 4, "height": 4}],
          "annotations": [], "categories": [{"id": 1, "name": "x"}]})";
  const auto path = dir.write("train.json", valid);
  DatasetFiles files;
  const DatasetSource source{DatasetFormat::kCoco, path, "images", ""};
  const CocoFile& first = files.get(source);
  std::filesystem::remove(path);
  const CocoFile& again = files.get(source);
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(again.images.size(), 1u);
  EXPECT_EQ(files.size(), 1u);
  // Another image root is another dataset.
  EXPECT_THROW_WITH(files.get({DatasetFormat::kCoco, path, "other", ""}), IoError,
                    "cannot open annotation file");
}

TEST(Coco, CategoryMapIsContiguousAndInvertible) {
  const auto f = read_coco(kFixtures + "category_non_contiguous.json", kImages);
  const auto m = CategoryMap::from_file(f);
  EXPECT_EQ(m.num_classes(), 2);
  EXPECT_EQ(m.label(1), 0);
  EXPECT_EQ(m.label(7), 1);
  EXPECT_FALSE(m.label(2).has_value());
  EXPECT_EQ(m.category_id(1), 7);
  EXPECT_THROW_WITH(m.category_id(2), DataError, "[0, 2)");
  const auto sub = CategoryMap::subset(f, {7});
  EXPECT_EQ(sub.label(7), 0);
  EXPECT_FALSE(sub.label(1).has_value());
  EXPECT_THROW_WITH(CategoryMap::subset(f, {3}), ConfigError, "id 3 is not a category");
  const auto issues = validate(f, {});
  ASSERT_EQ(with_code(issues, codes::kCategoryNonContiguous).size(), 1u) << dump(issues);
  EXPECT_NE(issues[0].message.find("id 7 -> 1"), std::string::npos) << issues[0].message;
  EXPECT_EQ(issues[0].severity, Severity::kInfo) << dump(issues);
}

struct Case {
  const char* fixture;
  const char* code;
  size_t count;
  std::optional<int64_t> image_id;
  std::optional<int64_t> ann_id;
};

class RuleFixture : public ::testing::TestWithParam<Case> {};

TEST_P(RuleFixture, GivesItsCode) {
  const Case c = GetParam();
  ValidationOptions o;
  o.check_images = ImageCheck::kDecode;
  const auto issues = check(c.fixture, o);
  const auto hits = with_code(issues, c.code);
  ASSERT_EQ(hits.size(), c.count) << dump(issues);
  EXPECT_EQ(hits[0]->severity, code_severity(c.code));
  EXPECT_EQ(hits[0]->image_id, c.image_id) << hits[0]->format();
  EXPECT_EQ(hits[0]->ann_id, c.ann_id) << hits[0]->format();
  // Nothing else at error level beyond what the fixture is about.
  for (const auto& i : issues) {
    if (i.severity == Severity::kError) {
      EXPECT_EQ(i.code, c.code) << i.format();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codes, RuleFixture,
    ::testing::Values(
        Case{"bbox_non_finite.json", codes::kBboxNonFinite, 1, 2, 11},
        Case{"bbox_non_positive_size.json", codes::kBboxNonPositiveSize, 1, 2, 11},
        Case{"bbox_out_of_image.json", codes::kBboxOutOfImage, 1, 2, 11},
        Case{"category_unknown.json", codes::kCategoryUnknown, 1, 2, 11},
        Case{"category_duplicate_id.json", codes::kCategoryDuplicateId, 1, std::nullopt,
             std::nullopt},
        Case{"image_duplicate_id.json", codes::kImageDuplicateId, 1, 2, std::nullopt},
        Case{"ann_duplicate_id.json", codes::kAnnDuplicateId, 1, 2, 10},
        Case{"ann_orphan_image.json", codes::kAnnOrphanImage, 1, 99, 12},
        Case{"image_missing_file.json", codes::kImageMissingFile, 1, 3, std::nullopt},
        Case{"image_unreadable.json", codes::kImageUnreadable, 3, 3, std::nullopt},
        Case{"image_size_mismatch.json", codes::kImageSizeMismatch, 1, 1, std::nullopt},
        Case{"image_bad_path.json", codes::kImageBadPath, 2, 3, std::nullopt},
        Case{"json_bad_field.json", codes::kJsonBadField, 3, std::nullopt, std::nullopt},
        Case{"image_no_annotations.json", codes::kImageNoAnnotations, 1, 2, std::nullopt},
        Case{"image_crowd_only.json", codes::kImageCrowdOnly, 1, 2, std::nullopt},
        Case{"bbox_near_duplicate.json", codes::kBboxNearDuplicate, 1, 2, 12},
        // A 1x1 px box warns; a 2x2 px box and a crowd region of any size do not.
        Case{"bbox_tiny.json", codes::kBboxTiny, 1, 2, 11}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = info.param.fixture;
      n = n.substr(0, n.find('.'));
      return n;
    });

TEST(Validation, MessagesNameTheValues) {
  auto issues = check("bbox_non_positive_size.json");
  auto hit = with_code(issues, codes::kBboxNonPositiveSize);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0]->format(),
            "[error:bbox.non_positive_size] image_id=2 file=b.jpg ann_id=11: bbox=[10,20,0,30]: "
            "width must be > 0");
  issues = check("json_bad_field.json");
  const auto bad = with_code(issues, codes::kJsonBadField);
  ASSERT_EQ(bad.size(), 3u) << dump(issues);
  EXPECT_NE(bad[0]->message.find("images[2].id: expected an integer, got string \"three\""),
            std::string::npos)
      << bad[0]->message;
  EXPECT_NE(bad[1]->message.find("annotations[1].bbox: expected [x, y, w, h], got \"abc\""),
            std::string::npos)
      << bad[1]->message;
  EXPECT_EQ(bad[1]->ann_id, 11);
  EXPECT_NE(bad[2]->message.find("got [1,2,3]"), std::string::npos) << bad[2]->message;
  issues = check("bbox_non_finite.json");
  EXPECT_NE(with_code(issues, codes::kBboxNonFinite)[0]->message.find("bbox=[nan,20,30,inf]"),
            std::string::npos)
      << dump(issues);
}

TEST(Validation, ToleranceAndPathEscape) {
  EXPECT_TRUE(check("bbox_within_tolerance.json").empty());
  ValidationOptions strict;
  strict.bbox_tolerance = 0.1;
  EXPECT_EQ(with_code(check("bbox_within_tolerance.json", strict), codes::kBboxOutOfImage).size(),
            1u);
  EXPECT_FALSE(resolve_image_path("/data/img", "../../etc/passwd"));
  EXPECT_FALSE(resolve_image_path("/data/img", "a/../../x.jpg"));
  EXPECT_FALSE(resolve_image_path("/data/img", "/etc/passwd"));
  EXPECT_FALSE(resolve_image_path("/data/img", ""));
  EXPECT_EQ(resolve_image_path("/data/img", "a/../b/x.jpg"), "/data/img/b/x.jpg");
  const auto issues = check("image_bad_path.json");
  const auto hits = with_code(issues, codes::kImageBadPath);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0]->file, "../../etc/passwd");
  EXPECT_EQ(hits[1]->file, "/etc/passwd");
  EXPECT_TRUE(with_code(issues, codes::kImageMissingFile).empty())
      << "an escaping path must not be looked up";
}

TEST(Validation, UnreadableFilesSayWhy) {
  ValidationOptions o;
  o.check_images = ImageCheck::kDecode;
  o.threads = 3;
  const auto issues = check("image_unreadable.json", o);
  const auto hits = with_code(issues, codes::kImageUnreadable);
  ASSERT_EQ(hits.size(), 3u) << dump(issues);
  EXPECT_EQ(hits[0]->file, "corrupt.jpg");
  EXPECT_NE(hits[0]->message.find("not a decodable image"), std::string::npos);
  EXPECT_EQ(hits[1]->file, "empty.jpg");
  EXPECT_NE(hits[1]->message.find("0-byte file"), std::string::npos);
  EXPECT_EQ(hits[2]->file, "truncated.jpg");
  // Without decoding, the 0-byte file is the only unreadable one ...
  const auto cheap = check("image_unreadable.json");
  EXPECT_EQ(with_code(cheap, codes::kImageUnreadable).size(), 1u) << dump(cheap);
  // ... and the two JPEGs without an end-of-image marker are image.truncated.
  const auto cut = with_code(cheap, codes::kImageTruncated);
  ASSERT_EQ(cut.size(), 2u) << dump(cheap);
  EXPECT_EQ(cut[0]->file, "corrupt.jpg");
  EXPECT_EQ(cut[1]->file, "truncated.jpg");
}

TEST(Validation, NumClassesMustMatchUnlessSubset) {
  ValidationOptions o;
  o.num_classes = 3;
  const auto issues = check("valid.json", o);
  const auto hit = with_code(issues, codes::kCategoryCountMismatch);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_NE(hit[0]->message.find("num_classes is 3 but the file has 2 categories (1:cat, 2:dog)"),
            std::string::npos)
      << hit[0]->message;
  o.num_classes = 1;
  o.category_subset = {2};
  const auto sub = check("valid.json", o);
  EXPECT_TRUE(std::none_of(sub.begin(), sub.end(), [](const Issue& i) {
    return i.severity == Severity::kError;
  })) << dump(sub);
  EXPECT_EQ(with_code(sub, codes::kCategoryExcluded).size(), 1u);
  DatasetOptions d;
  d.annotation_file = kFixtures + "valid.json";
  d.image_root = kImages;
  d.validation.num_classes = 80;
  EXPECT_THROW_WITH(CocoDataset{d}, DataError, "num_classes is 80 but the file has 2 categories");
  d.on_invalid = OnInvalid::kDrop;
  EXPECT_THROW_WITH(CocoDataset{d}, DataError, "cannot repair a file-level error");
}

TEST(Validation, ReadErrorsAreDataErrorsNamingTheFile) {
  EXPECT_THROW_WITH(read_coco(kFixtures + "json_parse_truncated.json", kImages), DataError,
                    "[data:json.parse]");
  EXPECT_THROW_WITH(read_coco(kFixtures + "json_parse_truncated.json", kImages), DataError,
                    "json_parse_truncated.json");
  EXPECT_THROW_WITH(read_coco(kFixtures + "json_schema.json", kImages), DataError,
                    "'images' must be an array");
  EXPECT_THROW_WITH(parse_coco("[1, 2]", "x.json", "."), DataError,
                    "[data:json.schema] file=x.json");
  EXPECT_THROW_WITH(parse_coco("{\"images\": []}", "x.json", "."), DataError,
                    "'annotations' is missing");
  EXPECT_THROW_WITH(parse_coco("", "x.json", "."), DataError, "[data:json.parse]");
  EXPECT_THROW_WITH(read_coco(kFixtures + "does_not_exist.json", kImages), IoError,
                    "does_not_exist.json");
  // NaN inside a string stays a string: a bad field, not a number.
  const auto f = parse_coco(
      R"({"images": [{"id": 1, "file_name": "NaN", "width": 2, "height": 2}], "annotations": [{"id": 1, "image_id": 1,
      "category_id": 1, "bbox": ["NaN", 0, 1, 1]}], "categories": [{"id": 1, "name": "Infinity"}]})",
      "x.json", ".");
  ASSERT_EQ(f.images.size(), 1u);
  EXPECT_EQ(f.images[0].file_name, "NaN");
  EXPECT_EQ(f.categories[0].name, "Infinity");
  ASSERT_EQ(f.issues.size(), 1u);
  EXPECT_EQ(f.issues[0].code, codes::kJsonBadField);
}

CocoDataset dataset(const std::string& fixture, OnInvalid p, const std::string& report = "") {
  DatasetOptions d;
  d.annotation_file = kFixtures + fixture;
  d.image_root = kImages;
  d.on_invalid = p;
  d.validation.check_images = ImageCheck::kDecode;
  d.report_path = report;
  return CocoDataset(d);
}

TEST(Policy, ErrorListsEveryIssueWithCounts) {
  try {
    dataset("broken_all.json", OnInvalid::kError);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("data.on_invalid=error"), std::string::npos) << m;
    EXPECT_NE(m.find("bbox.non_finite=1"), std::string::npos) << m;
    EXPECT_NE(m.find("[error:image.bad_path] image_id=3 file=../../etc/passwd"), std::string::npos)
        << m;
    EXPECT_NE(m.find("ann_id=14"), std::string::npos) << m;
  }
}

TEST(Policy, DropRemovesAnnotationsAndSkipsBrokenImages) {
  testing::TempDir dir;
  const auto report = (dir.path() / "run" / "data_report.json").string();
  const auto d = dataset("image_unreadable.json", OnInvalid::kDrop, report);
  EXPECT_EQ(d.size(), 2);  // images 3, 4, 5 cannot be decoded
  const auto doc = nlohmann::json::parse(testing::read_file(report));
  std::set<int64_t> skipped;
  for (const auto& s : doc.at("skipped_images")) skipped.insert(s.at("image_id").get<int64_t>());
  EXPECT_EQ(skipped, (std::set<int64_t>{3, 4, 5}));
  EXPECT_EQ(doc.at("counts").at("image.unreadable"), 3);

  const auto drop = dataset("bbox_out_of_image.json", OnInvalid::kDrop);
  ASSERT_EQ(drop.size(), 2);
  EXPECT_EQ(drop.read(0).labels.size(), 1u);
  EXPECT_EQ(drop.read(1).labels.size(), 0u);  // its only box was dropped, the image stays
  ASSERT_EQ(drop.policy_result().dropped_annotations.size(), 1u);
  EXPECT_EQ(drop.policy_result().dropped_annotations[0],
            std::make_pair(int64_t(11), std::string("bbox.out_of_image")));

  const auto skip = dataset("bbox_out_of_image.json", OnInvalid::kSkipImage);
  ASSERT_EQ(skip.size(), 1);
  EXPECT_EQ(skip.image(0).id, 1);
  EXPECT_EQ(skip.policy_result().skipped_images.size(), 1u);
}

TEST(Policy, DuplicateIdsRemoveEveryHolder) {
  const auto d = dataset("image_duplicate_id.json", OnInvalid::kSkipImage);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.image(0).id, 1);
  const auto a = dataset("ann_duplicate_id.json", OnInvalid::kDrop);
  EXPECT_EQ(a.read(0).labels.size() + a.read(1).labels.size(), 0u);
}

TEST(Lint, BrokenSetHitsEveryCode) {
  LintOptions o;
  o.annotation_file = kFixtures + "broken_all.json";
  o.image_root = kImages;
  o.validation.check_images = ImageCheck::kDecode;
  o.validation.num_classes = 4;
  o.validation.category_subset = {1, 2, 5};
  const auto r = run_lint(o);
  std::set<std::string> seen;
  for (const auto& i : r.issues) seen.insert(i.code);
  for (const auto& [code, sev] : all_codes()) {
    if (code == codes::kJsonParse || code == codes::kJsonSchema) continue;  // file-level, see below
    // The YOLO and VOC readers' codes: tests/data/formats_test.cpp.
    if (code.rfind("yolo.", 0) == 0 || code.rfind("voc.", 0) == 0 || code.rfind("label.", 0) == 0)
      continue;
    EXPECT_TRUE(seen.count(code)) << "missing " << code << "\n" << dump(r.issues);
  }
  EXPECT_GT(r.errors, 0);
  std::map<int64_t, int64_t> label_of;
  for (const auto& c : r.classes) label_of[c.category_id] = c.label;
  EXPECT_EQ(label_of, (std::map<int64_t, int64_t>{{1, 0}, {2, 1}, {5, 2}, {6, -1}}));
  const std::string text = format_lint(r, 2);
  EXPECT_NE(text.find("result: FAILED"), std::string::npos);
  EXPECT_NE(text.find("bbox.out_of_image"), std::string::npos);
  const auto doc = nlohmann::json::parse(lint_json(r));
  EXPECT_EQ(doc.at("errors").get<int64_t>(), r.errors);
  EXPECT_EQ(doc.at("issues").size(), r.issues.size());

  o.annotation_file = kFixtures + "json_parse_truncated.json";
  const auto p = run_lint(o);
  ASSERT_EQ(p.issues.size(), 1u);
  EXPECT_EQ(p.issues[0].code, codes::kJsonParse);
  o.annotation_file = kFixtures + "json_schema.json";
  EXPECT_EQ(run_lint(o).issues.at(0).code, codes::kJsonSchema);
}

// A dense set (576 objects in one image, 150 in another): lint counts the images above COCO's
// 100 detections and above the detector's outputs (--max-objects), naming the densest image.
TEST(Lint, DenseImagesAreCountedAgainstCocoAndTheDetector) {
  nlohmann::json f = {{"images", nlohmann::json::array()},
                      {"annotations", nlohmann::json::array()},
                      {"categories", {{{"id", 1}, {"name", "cell"}}}}};
  int64_t ann = 1;
  for (const auto& [id, n] : std::vector<std::pair<int64_t, int>>{{1, 10}, {2, 576}, {3, 150}}) {
    f["images"].push_back(
        {{"id", id}, {"file_name", str("d", id, ".jpg")}, {"width", 640}, {"height", 640}});
    for (int k = 0; k < n; ++k) {
      const double x = 25.0 * (k % 24), y = 25.0 * (k / 24);
      f["annotations"].push_back({{"id", ann++},
                                  {"image_id", id},
                                  {"category_id", 1},
                                  {"bbox", {x, y, 20, 20}},
                                  {"area", 400},
                                  {"iscrowd", 0}});
    }
  }
  testing::TempDir dir;
  LintOptions o;
  o.annotation_file = dir.write("dense.json", f.dump());
  o.image_root = dir.path().string();
  o.validation.check_images = ImageCheck::kNone;
  o.validation.num_classes = 1;
  o.max_objects = 300;
  const auto r = run_lint(o);
  EXPECT_EQ(r.over_coco_max_dets.count, 2);
  EXPECT_EQ(r.over_max_objects.count, 1);
  EXPECT_EQ(r.over_max_objects.most_image_id, 2);
  const auto text = format_lint(r, 2);
  EXPECT_NE(text.find("dense images: 2 of 3 images hold more than 100 objects (the most, 576, in "
                      "image_id=2 file=d2.jpg): at most 28.5% of the objects can be found by COCO "
                      "evaluation"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("dense images: 1 of 3 images hold more than 300 objects"), std::string::npos)
      << text;
  const auto doc = nlohmann::json::parse(lint_json(r));
  EXPECT_EQ(doc.at("dense_images").at("max_objects").at("most_file"), "d2.jpg");
  EXPECT_EQ(doc.at("dense_images").at("coco_max_dets").at("images"), 2);
}

// shared/datasets/bccd/README.md: no errors; 7 pairs of RBC boxes drawn twice (IoU 0.92-0.93)
// and one pair with IoU 0.83, in 00020, 00100, 00104, 00251, 00284 (train), 00331, 00403 and
// 00013 (val); 1131 boxes touch the border; RBC is absent from 15 images.
TEST(Lint, BccdIsCleanAndReportsItsKnownAnomalies) {
  const std::string root = testing::shared_dataset("bccd");
  if (root.empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  std::set<std::string> near_files;
  int64_t touching = 0, rbc_absent = 0;
  for (const std::string split : {"train", "val"}) {
    LintOptions o;
    o.annotation_file = root + "/annotations/instances_" + split + ".json";
    o.image_root = root + "/images";
    o.validation.check_images = ImageCheck::kDecode;
    o.validation.num_classes = 3;
    const auto r = run_lint(o);
    EXPECT_EQ(r.errors, 0) << dump(r.issues);
    EXPECT_EQ(r.warnings, 0) << dump(r.issues);
    for (const auto& i : r.issues) {
      EXPECT_EQ(i.code, codes::kBboxNearDuplicate) << i.format();
      near_files.insert(i.file);
    }
    touching += r.touching_border;
    for (const auto& c : r.classes) {
      if (c.name == "RBC") rbc_absent += c.images_without;
    }
  }
  EXPECT_EQ(near_files, (std::set<std::string>{"BloodImage_00013.jpg", "BloodImage_00020.jpg",
                                               "BloodImage_00100.jpg", "BloodImage_00104.jpg",
                                               "BloodImage_00251.jpg", "BloodImage_00284.jpg",
                                               "BloodImage_00331.jpg", "BloodImage_00403.jpg"}));
  EXPECT_EQ(touching, 1131);
  EXPECT_EQ(rbc_absent, 15);
}

}  // namespace
}  // namespace detforge::data
