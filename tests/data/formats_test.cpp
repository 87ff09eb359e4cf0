// The YOLO and VOC readers and `convert`'s writers: BCCD (COCO) converted to YOLO and VOC and
// read back must give the same batches; the YOLO reader must agree with Ultralytics' own dataset
// class (live); every broken label gets its code, naming the label file and line.
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "data/build.h"
#include "data/convert.h"
#include "data/formats.h"
#include "data/image_header.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "data/validation.h"
#include "test_util.h"

namespace detforge::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string bccd() { return testing::shared_dataset("bccd"); }

CocoFile bccd_split(const std::string& split) {
  return read_coco(bccd() + "/annotations/instances_" + split + ".json", bccd() + "/images");
}

void convert_bccd(const fs::path& out, DatasetFormat to) {
  for (const std::string split : {"train", "val"}) {
    ConvertOptions o;
    o.to = to;
    o.out_dir = out.string();
    o.split = split;
    convert_dataset(bccd_split(split), o);
  }
}

std::shared_ptr<DataLoader> val_loader(const std::string& data_yaml) {
  const auto cfg = Config::parse(data_yaml, "data.yaml");
  const auto opts = data_options(cfg.root().child("data"));
  return build_loader(*opts.val, 0, 1);
}

std::vector<const Issue*> with_code(const std::vector<Issue>& issues, const std::string& code) {
  std::vector<const Issue*> out;
  for (const auto& i : issues) {
    if (i.code == code) out.push_back(&i);
  }
  return out;
}

// Hostile annotation files (docs/security.md): a COCO json 100,000 levels deep is refused by
// its parser's depth limit naming the file; a VOC XML as deep is read without recursion (its
// object has no box: an issue, no crash).
TEST(Formats, AHundredThousandNestedLevelsAreRefusedOrReadFlat) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_THROW_WITH(parse_coco("{\"images\": " + deep + "}", "deep.json", "."), DataError,
                    "deep.json");
  TempDir dir;
  fs::create_directories(dir.path() / "Annotations");
  std::string xml = "<annotation><object><name>a</name>";
  for (int i = 0; i < 100'000; ++i) xml += "<bndbox>";
  for (int i = 0; i < 100'000; ++i) xml += "</bndbox>";
  dir.write("Annotations/a.xml", xml + "</object></annotation>");
  // Found by fuzz/voc_fuzz.cpp: a <size> of 1e48 was cast to an integer (UBSan).
  dir.write("Annotations/b.xml",
            "<annotation><size><width>1e48</width><height>4e47</height></size></annotation>");
  const auto file =
      read_voc((dir.path() / "Annotations").string(), (dir.path() / "JPEGImages").string());
  ASSERT_EQ(file.images.size(), 2u);
  EXPECT_EQ(file.images[1].width, 0);
  EXPECT_TRUE(file.annotations.empty());
  bool named = false;
  for (const auto& issue : file.issues) named |= issue.format().find("a.xml") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Formats, BccdConvertedToYoloAndVocGivesTheSameBatches) {
  if (bccd().empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  TempDir tmp;
  convert_bccd(tmp.path() / "yolo", DatasetFormat::kYolo);
  convert_bccd(tmp.path() / "voc", DatasetFormat::kVoc);
  const std::string common =
      "  num_classes: 3\n  workers: 0\n  batch_size: 4\n  min_size: 320\n  max_size: 480\n"
      "  pin_memory: 'false'\n";
  auto coco = val_loader(str("data:\n", common, "  root: ", bccd(),
                             "\n  val: {ann: annotations/instances_val.json, images: images}\n"));
  auto yolo = val_loader(str("data:\n", common, "  format: yolo\n  val: {ann: ",
                             (tmp.path() / "yolo" / "data.yaml").string(), "}\n"));
  auto voc =
      val_loader(str("data:\n", common, "  format: voc\n  root: ", (tmp.path() / "voc").string(),
                     "\n  val: {ann: ImageSets/Main/val.txt}\n"));
  ASSERT_EQ(coco->dataset().size(), 73);
  for (auto* other : {yolo.get(), voc.get()}) {
    ASSERT_EQ(other->dataset().size(), coco->dataset().size());
    EXPECT_EQ(other->dataset().categories().names(), coco->dataset().categories().names());
  }
  coco->start_epoch(0), yolo->start_epoch(0), voc->start_epoch(0);
  int64_t batches = 0, boxes = 0;
  for (;;) {
    auto a = coco->next(), b = yolo->next(), c = voc->next();
    ASSERT_EQ(a.has_value(), b.has_value());
    ASSERT_EQ(a.has_value(), c.has_value());
    if (!a) break;
    ++batches;
    EXPECT_TRUE(torch::equal(a->images, b->images));
    EXPECT_TRUE(torch::equal(a->images, c->images));
    ASSERT_EQ(a->targets.size(), b->targets.size());
    for (size_t i = 0; i < a->targets.size(); ++i) {
      const auto& ta = a->targets[i];
      EXPECT_TRUE(torch::equal(ta.labels, b->targets[i].labels));
      EXPECT_TRUE(torch::equal(ta.labels, c->targets[i].labels));
      // VOC keeps the integer corners exactly; YOLO's fractions come back within rounding.
      EXPECT_TRUE(torch::equal(ta.boxes.tensor(), c->targets[i].boxes.tensor()));
      EXPECT_TRUE(torch::allclose(ta.boxes.tensor(), b->targets[i].boxes.tensor(), 0, 1e-3));
      boxes += ta.boxes.size();
    }
  }
  EXPECT_EQ(batches, 19);
  EXPECT_GT(boxes, 900);
}

TEST(Formats, ConvertingBackGivesTheCocoFileAgain) {
  if (bccd().empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  TempDir tmp;
  convert_bccd(tmp.path() / "voc", DatasetFormat::kVoc);
  const CocoFile original = bccd_split("val");
  const CocoFile from_voc = read_voc((tmp.path() / "voc/ImageSets/Main/val.txt").string(), "");
  ConvertOptions o;
  o.out_dir = (tmp.path() / "coco").string();
  o.split = "val";
  convert_dataset(from_voc, o);
  const CocoFile back = read_coco((tmp.path() / "coco/annotations/instances_val.json").string(),
                                  (tmp.path() / "coco/images/val").string());
  ASSERT_EQ(back.images.size(), original.images.size());
  ASSERT_EQ(back.annotations.size(), original.annotations.size());
  for (size_t i = 0; i < original.images.size(); ++i) {
    EXPECT_EQ(back.images[i].file_name, original.images[i].file_name);
    EXPECT_EQ(back.images[i].width, original.images[i].width);
  }
  for (size_t i = 0; i < original.annotations.size(); ++i) {
    EXPECT_EQ(back.annotations[i].bbox, original.annotations[i].bbox) << i;
    EXPECT_EQ(back.annotations[i].category_id, original.annotations[i].category_id) << i;
  }
  EXPECT_TRUE(fs::equivalent(tmp.path() / "coco/images/val" / original.images[0].file_name,
                             fs::path(bccd()) / "images" / original.images[0].file_name))
      << "images are hard-linked by default";
}

TEST(Formats, YoloReadAsUltralyticsReadsIt) {
  if (bccd().empty()) GTEST_SKIP() << detforge::testing::shared_missing("bccd");
  TempDir tmp;
  convert_bccd(tmp.path(), DatasetFormat::kYolo);
  const std::string yaml = (tmp.path() / "data.yaml").string();
  const std::string ref = (tmp.path() / "ultralytics.json").string();
  testing::run_reference("data/yolo_reference.py", str(yaml, " val ", ref));
  const auto theirs = nlohmann::json::parse(testing::read_file(ref));
  const CocoFile ours = read_yolo(yaml, "val");
  ASSERT_EQ(theirs.size(), ours.images.size());
  std::map<int64_t, std::vector<const CocoAnnotation*>> anns;
  for (const auto& an : ours.annotations) anns[an.image_id].push_back(&an);
  int64_t compared = 0;
  for (size_t i = 0; i < ours.images.size(); ++i) {
    const auto& im = ours.images[i];
    const auto& t = theirs[i];
    EXPECT_EQ(fs::path(ours.image_root) / im.file_name, fs::path(t["im_file"].get<std::string>()));
    EXPECT_EQ(t["shape"][0].get<int64_t>(), im.height);
    EXPECT_EQ(t["shape"][1].get<int64_t>(), im.width);
    const auto& mine = anns[im.id];
    ASSERT_EQ(t["cls"].size(), mine.size()) << im.file_name;
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_EQ(t["cls"][k].get<int64_t>(), mine[k]->category_id - 1);
      const auto& b = mine[k]->bbox;
      const double W = double(im.width), H = double(im.height);
      const double xywhn[4] = {(b[0] + b[2] / 2) / W, (b[1] + b[3] / 2) / H, b[2] / W, b[3] / H};
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(t["bboxes"][k][j].get<double>(), xywhn[j], 1e-6);
      ++compared;
    }
  }
  EXPECT_EQ(compared, int64_t(bccd_split("val").annotations.size()));
}

// A small YOLO tree with one broken thing per image.
struct BrokenYolo {
  TempDir tmp;
  std::string yaml;
  BrokenYolo() {
    const fs::path images = tmp.path() / "images/train", labels = tmp.path() / "labels/train";
    fs::create_directories(images), fs::create_directories(labels);
    const cv::Mat img(40, 60, CV_8UC3, cv::Scalar(30, 60, 90));
    for (const char* n : {"a", "b", "c", "d", "e", "f"})
      cv::imwrite((images / (std::string(n) + ".png")).string(), img);
    auto label = [&](const char* n, const std::string& text) {
      std::ofstream(labels / (std::string(n) + ".txt")) << text;
    };
    label("a", "0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.4 0.4\n7 0.5 0.5 0.1 0.1\n");
    label("b", "2 1.5 0.5 0.2 0.2\n");
    // c: no label file
    label("d", "0 0.5 0.5 0.2\n3 0.1 0.1 0.2 x\n");
    label("e", "\n");
    label("f", "1 0.1 0.1 0.5 0.1 0.3 0.6\n");  // a polygon: the box around it
    yaml = tmp.write("data.yaml",
                     "path: .\ntrain: images/train\nval: images/train\n"
                     "names: {0: cat, 1: dog, 2: bird, 3: fish}\n");
  }
};

TEST(Formats, BrokenYoloLabelsEachGetTheirCode) {
  BrokenYolo y;
  const CocoFile f = read_yolo(y.yaml, "train");
  ASSERT_EQ(f.images.size(), 6u);
  ASSERT_EQ(f.categories.size(), 4u);
  EXPECT_EQ(f.categories[3].name, "fish");
  const auto issues = validate(f, {});
  const auto out_of_range = with_code(issues, codes::kLabelClassOutOfRange);
  ASSERT_EQ(out_of_range.size(), 1u);
  EXPECT_EQ(out_of_range[0]->message, "labels/train/a.txt:3: class 7 but names has 4 (0..3)");
  EXPECT_EQ(out_of_range[0]->file, "images/train/a.png");
  EXPECT_EQ(out_of_range[0]->severity, Severity::kError);
  const auto coord = with_code(issues, codes::kLabelCoordOutOfRange);
  ASSERT_EQ(coord.size(), 1u);
  EXPECT_NE(coord[0]->message.find("labels/train/b.txt:1: coordinate 1.5"), std::string::npos);
  const auto missing = with_code(issues, codes::kLabelMissingFile);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->severity, Severity::kWarning);
  EXPECT_EQ(missing[0]->file, "images/train/c.png");
  const auto malformed = with_code(issues, codes::kLabelMalformed);
  ASSERT_EQ(malformed.size(), 2u);
  EXPECT_NE(malformed[0]->message.find("labels/train/d.txt:1: '0 0.5 0.5 0.2' is not"),
            std::string::npos);
  EXPECT_NE(malformed[1]->message.find("d.txt:2:"), std::string::npos);
  EXPECT_NE(malformed[1]->message.find("not all numbers"), std::string::npos);
  const auto empty = with_code(issues, codes::kLabelEmpty);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0]->severity, Severity::kInfo);
  EXPECT_EQ(empty[0]->file, "images/train/e.png");
  // The good lines: two boxes of a.png and the polygon's box, in pixels of the 60x40 image.
  ASSERT_EQ(f.annotations.size(), 3u);
  const std::array<double, 4> first{24, 16, 12, 8};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(f.annotations[0].bbox[size_t(j)], first[size_t(j)], 1e-9);
  EXPECT_EQ(f.annotations[2].category_id, 2);
  EXPECT_NEAR(f.annotations[2].bbox[0], 6, 1e-9);
  EXPECT_NEAR(f.annotations[2].bbox[2], 0.4 * 60, 1e-9);
  EXPECT_NEAR(f.annotations[2].bbox[3], 0.5 * 40, 1e-9);

  // The policies: error names the line; drop leaves out the bad lines only; skip_image the images.
  EXPECT_THROW_WITH(apply_policy(f, issues, OnInvalid::kError), DataError,
                    "labels/train/a.txt:3: class 7 but names has 4");
  const auto dropped = apply_policy(f, issues, OnInvalid::kDrop);
  EXPECT_EQ(dropped.kept_image_indices.size(), 6u);
  EXPECT_EQ(dropped.kept_annotation_indices.size(), 3u);
  EXPECT_EQ(dropped.dropped_annotations.size(), 4u);
  const auto skipped = apply_policy(f, issues, OnInvalid::kSkipImage);
  EXPECT_EQ(skipped.kept_image_indices.size(), 3u);  // c, e, f
}

TEST(Formats, YoloDataYamlVariantsAndItsErrors) {
  BrokenYolo y;
  // A list file, relative lines against its folder; names as a list.
  std::ofstream(y.tmp.path() / "subset.txt") << "./images/train/f.png\nimages/train/a.png\n";
  const auto listed =
      y.tmp.write("listed.yaml", "train: [subset.txt]\nnames: [cat, dog, bird, fish]\n");
  const CocoFile f = read_yolo(listed, "train");
  ASSERT_EQ(f.images.size(), 2u);
  EXPECT_EQ(f.images[0].file_name, "images/train/a.png");
  EXPECT_EQ(f.images[1].file_name, "images/train/f.png");

  auto schema = [&](const std::string& text, const std::string& split, const std::string& message) {
    const auto p = y.tmp.write("bad.yaml", text);
    EXPECT_THROW_WITH(read_yolo(p, split), DataError, message);
  };
  schema("train: images/train\n", "train", "[data:yolo.schema]");
  schema("train: images/train\n", "train", "no 'names'");
  schema("train: images/train\nnames: [a]\nnc: 2\n", "train", "nc is 2 but names has 1");
  schema("train: images/train\nnames: {0: a, 2: b}\n", "train", "0..1 without gaps; 1 is missing");
  schema("train: images/train\nnames: [a]\n", "val", "no 'val'");
  schema("train: images/nowhere\nnames: [a]\n", "train", "train: 'images/nowhere' not found");
  schema("train: [images/train\nnames: [a]\n", "train", "line ");
  EXPECT_THROW_WITH(read_yolo((y.tmp.path() / "none.yaml").string(), "train"), IoError,
                    "none.yaml");
}

TEST(Formats, VocXmlListsDifficultAndBrokenFiles) {
  TempDir tmp;
  const fs::path root = tmp.path() / "VOC";
  fs::create_directories(root / "Annotations"), fs::create_directories(root / "JPEGImages");
  fs::create_directories(root / "ImageSets/Main");
  const cv::Mat img(50, 70, CV_8UC3, cv::Scalar(1, 2, 3));
  for (const char* n : {"x1", "x2", "x3", "x4"})
    cv::imwrite((root / "JPEGImages" / (std::string(n) + ".jpg")).string(), img);
  auto xml = [&](const char* n, const std::string& objects) {
    std::ofstream(root / "Annotations" / (std::string(n) + ".xml"))
        << "<annotation>\n<filename>" << n
        << ".jpg</filename>\n<size><width>70</width><height>50</height>"
        << "<depth>3</depth></size>\n"
        << objects << "</annotation>\n";
  };
  xml("x1",
      "<object><name>dog</name><difficult>0</difficult>\n<bndbox><xmin>11</xmin><ymin>21</ymin>"
      "<xmax>31</xmax><ymax>41</ymax></bndbox></object>\n"
      "<object><name>cat</name><difficult>1</difficult>\n<bndbox><xmin>1</xmin><ymin>1</ymin>"
      "<xmax>5</xmax><ymax>5</ymax></bndbox></object>\n");
  xml("x2", "<object><name>cat</name>\n<bndbox><xmin>1</xmin><ymin>1</ymin></bndbox></object>\n");
  std::ofstream(root / "Annotations/x3.xml")
      << "<annotation>\n<filename>x3.jpg</filename>\n<size>\n</annotation>\n";
  std::ofstream(root / "ImageSets/Main/train.txt") << "x1\nx2\nx3\nx4\n";
  const CocoFile f = read_voc((root / "ImageSets/Main/train.txt").string(), "");
  ASSERT_EQ(f.images.size(), 4u);
  ASSERT_EQ(f.categories.size(), 2u);
  EXPECT_EQ(f.categories[0].name, "cat");  // sorted names of every XML
  ASSERT_EQ(f.annotations.size(), 2u);
  EXPECT_EQ(f.annotations[0].bbox, (std::array<double, 4>{10, 20, 20, 20}));
  EXPECT_EQ(f.annotations[0].category_id, 2);
  EXPECT_TRUE(f.annotations[1].iscrowd);
  EXPECT_EQ(f.images[3].width, 70);  // x4: no XML, the size from the image header
  const auto issues = validate(f, {});
  const auto malformed = with_code(issues, codes::kLabelMalformed);
  ASSERT_EQ(malformed.size(), 1u);
  EXPECT_NE(malformed[0]->message.find("Annotations/x2.xml:4: object 'cat' has no numeric bndbox"),
            std::string::npos)
      << malformed[0]->message;
  const auto parse = with_code(issues, codes::kVocParse);
  ASSERT_EQ(parse.size(), 1u);
  EXPECT_NE(parse[0]->message.find("Annotations/x3.xml: line 4"), std::string::npos)
      << parse[0]->message;
  ASSERT_EQ(with_code(issues, codes::kLabelMissingFile).size(), 1u);

  // A labelmap.txt fixes the order (and the ids); a name outside it is an error on its line.
  std::ofstream(root / "labelmap.txt") << "# label:color_rgb:parts:actions\ndog:0,0,0::\n";
  const CocoFile g = read_voc((root / "Annotations").string(), (root / "JPEGImages").string());
  EXPECT_EQ(g.categories.size(), 1u);
  EXPECT_EQ(g.annotations[0].category_id, 1);
  const auto g_issues = validate(g, {});
  const auto unknown = with_code(g_issues, codes::kLabelClassOutOfRange);
  ASSERT_GE(unknown.size(), 1u);
  EXPECT_NE(unknown[0]->message.find("Annotations/x1.xml:6: class 'cat' is not in labelmap.txt"),
            std::string::npos)
      << unknown[0]->message;
  EXPECT_THROW_WITH(read_voc((tmp.path() / "nothing").string(), ""), IoError, "nothing");
}

// A JPEG whose EXIF orientation says "rotate 90": OpenCV decodes it turned, and the header
// reader must say the same size.
std::vector<unsigned char> with_orientation(std::vector<unsigned char> jpeg, uint16_t orientation) {
  const unsigned char exif[] = {0xFF,
                                0xE1,
                                0x00,
                                0x22,
                                'E',
                                'x',
                                'i',
                                'f',
                                0,
                                0,
                                'I',
                                'I',
                                0x2A,
                                0,
                                8,
                                0,
                                0,
                                0,
                                1,
                                0,
                                0x12,
                                0x01,
                                3,
                                0,
                                1,
                                0,
                                0,
                                0,
                                static_cast<unsigned char>(orientation),
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0};
  jpeg.insert(jpeg.begin() + 2, std::begin(exif), std::end(exif));
  return jpeg;
}

TEST(ImageHeader, SizesAreOpenCvsDecodedSizes) {
  TempDir tmp;
  const cv::Mat img(37, 81, CV_8UC3, cv::Scalar(9, 99, 199));
  std::vector<std::string> paths;
  for (const char* ext : {".png", ".bmp", ".jpg", ".webp", ".tiff"}) {
    paths.push_back((tmp.path() / (std::string("a") + ext)).string());
    ASSERT_TRUE(cv::imwrite(paths.back(), img)) << ext;
  }
  std::vector<unsigned char> jpeg;
  cv::imencode(".jpg", img, jpeg);
  for (const uint16_t o : {1, 3, 6, 8}) {
    const auto bytes = with_orientation(jpeg, o);
    paths.push_back((tmp.path() / str("exif", o, ".jpg")).string());
    std::ofstream(paths.back(), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  if (!bccd().empty()) paths.push_back(bccd() + "/images/BloodImage_00000.jpg");
  for (const auto& p : paths) {
    const cv::Mat decoded = cv::imread(p, cv::IMREAD_COLOR);
    ASSERT_FALSE(decoded.empty()) << p;
    const auto size = read_image_size(p);
    ASSERT_TRUE(size.has_value()) << p;
    EXPECT_EQ(size->width, decoded.cols) << p;
    EXPECT_EQ(size->height, decoded.rows) << p;
  }
  EXPECT_EQ(read_image_size(paths[5])->width, 81);  // orientation 1: upright
  EXPECT_EQ(read_image_size(paths[7])->width, 37);  // orientation 6: turned
  EXPECT_FALSE(read_image_size(tmp.write("not.jpg", "hello")).has_value());
  EXPECT_FALSE(read_image_size((tmp.path() / "missing.png").string()).has_value());
}

// Found by fuzz/image_header_fuzz.cpp: a truncated DICOM file (a 128-byte preamble, then "DICM")
// sent OpenCV to GDCM, whose assertion aborted the process. Only JPEG, PNG, BMP, WebP and TIFF
// files reach OpenCV: this one has no size and is an error naming the file, in the header reader
// and in the loader's decoder alike.
TEST(ImageHeader, FilesOfOtherFormatsNeverReachOpenCv) {
  TempDir tmp;
  const auto dicom = tmp.write("scan.jpg", std::string(128, '\0') + "DICM\xff");
  EXPECT_FALSE(read_image_size(dicom).has_value());
  const auto decoded = try_decode_image(dicom);
  EXPECT_TRUE(decoded.bgr.empty());
  EXPECT_NE(decoded.error.find("scan.jpg (133 bytes) is not a JPEG, PNG, BMP, WebP or TIFF file"),
            std::string::npos)
      << decoded.error;
  const auto at = [](const std::string& bytes) {
    return has_image_signature(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  };
  EXPECT_TRUE(at("\xff\xd8\xff\xe0"));
  EXPECT_TRUE(at("\x89PNG\r\n"));
  EXPECT_TRUE(at(std::string("RIFF\0\0\0\0WEBPVP8 ", 16)));
  EXPECT_TRUE(at(std::string("II*\0", 4)));
  EXPECT_TRUE(at(std::string("MM\0*", 4)));
  EXPECT_FALSE(at(std::string("RIFF\0\0\0\0WAVEfmt ", 16)));
  EXPECT_FALSE(at("GIF89a"));
  EXPECT_FALSE(at("\xff\xd8"));
}

}  // namespace
}  // namespace detforge::data
