#include "core/config_diff.h"
#include "core/config_node.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_util.h"

namespace detforge {
namespace {

using testing::TempDir;

// A hostile config (docs/security.md): 100,000 nested lists in the file or an override are a
// ConfigError naming the file or key, not a stack overflow.
TEST(Config, AHundredThousandNestedLevelsAreAConfigError) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_THROW_WITH(Config::parse("a: " + deep, "deep.yaml"), ConfigError,
                    "deep.yaml:1: YAML syntax error: nested deeper than yaml-cpp's limit");
  EXPECT_THROW_WITH(Config::parse("a: 1", "ok.yaml", {"a=" + deep}), ConfigError, "a: value '[[[");
  std::string block;
  for (int i = 0; i < 2'000; ++i) block += std::string(i, ' ') + "k:\n";
  EXPECT_THROW_WITH(Config::parse(block, "block.yaml"), ConfigError, "nested deeper than");
}

// Found by fuzz/config_fuzz.cpp (docs/security.md): a list or a map as a key escaped as
// yaml-cpp's conversion error.
TEST(Config, AKeyThatIsAMapOrAListIsAConfigError) {
  EXPECT_THROW_WITH(Config::parse("model:\n  ? {head: 1}\n  : 3\n", "k.yaml"), ConfigError,
                    "k.yaml:2: a key must be a plain name, not a list or a map");
  EXPECT_THROW_WITH(Config::parse("a: [{? [1]: 2}]\n", "l.yaml"), ConfigError,
                    "l.yaml:1: a key must be a plain name");
  EXPECT_THROW_WITH(Config::parse("a: 1", "o.yaml", {"b={? [1]: 2}"}), ConfigError,
                    "a key must be a plain name");
}

TEST(Config, AutoSwitchesAreAutoTrueOrFalse) {
  const auto c = Config::parse("a: auto\nb: true\nc: false\nd: maybe\n", "s.yaml");
  const auto r = c.root();
  EXPECT_EQ(r.auto_bool("a"), std::nullopt);
  EXPECT_EQ(r.auto_bool("absent"), std::nullopt);
  EXPECT_EQ(r.auto_bool("b"), std::optional<bool>(true));
  EXPECT_EQ(r.auto_bool("c"), std::optional<bool>(false));
  EXPECT_THROW_WITH(r.auto_bool("d"), ConfigError,
                    "s.yaml:4 d: unknown 'maybe'; allowed: auto, true, false");
}

TEST(Config, TypedGettersReadValues) {
  const Config c = Config::parse(
      "train:\n  epochs: 12\n  lr: 0.01\n  amp: true\n  name: r50\n"
      "  steps: [8, 11]\n  scales: [0.5, 1.0]\n  tags: [a, b]\n");
  const ConfigNode t = c.root().child("train");
  EXPECT_EQ(t.required<int64_t>("epochs"), 12);
  EXPECT_EQ(t.required<int>("epochs"), 12);
  EXPECT_DOUBLE_EQ(t.required<double>("lr"), 0.01);
  EXPECT_TRUE(t.required<bool>("amp"));
  EXPECT_EQ(t.required<std::string>("name"), "r50");
  EXPECT_EQ(t.required<std::vector<int64_t>>("steps"), (std::vector<int64_t>{8, 11}));
  EXPECT_EQ(t.required<std::vector<double>>("scales"), (std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(t.required<std::vector<std::string>>("tags"), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(t.optional<int64_t>("missing").has_value());
  EXPECT_EQ(t.get<int64_t>("missing", 7), 7);
  EXPECT_EQ(t.path(), "train");
  EXPECT_NO_THROW(c.root().reject_unused());
}

// with_overrides: a copy with more overrides and its own read-tracking (the engine writes the
// values it resolves for `auto` this way); the original keeps its values.
TEST(Config, WithOverridesCopiesAndLeavesTheOriginal) {
  const Config c =
      Config::parse("model:\n  anchors: {base_sizes: auto}\neval: {interval: 3}\n", "x.yaml");
  const Config d = c.with_overrides({"model.anchors.base_sizes=[16, 32]", "eval.interval=2"});
  EXPECT_EQ(d.root().child("model").child("anchors").required<std::vector<int64_t>>("base_sizes"),
            (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(d.root().child("eval").required<int64_t>("interval"), 2);
  EXPECT_EQ(c.root().child("model").child("anchors").required<std::string>("base_sizes"), "auto");
  EXPECT_EQ(c.root().child("eval").required<int64_t>("interval"), 3);
  EXPECT_NE(c.hash(), d.hash());
}

TEST(Config, MissingRequiredKeyNamesFileLineAndKey) {
  TempDir dir;
  const auto f = dir.write("x.yaml", "model:\n  depth: 50\ntrain:\n  lr: 0.1\n");
  const Config c = Config::load(f);
  EXPECT_THROW_WITH(c.root().child("train").required<int64_t>("epochs"), ConfigError,
                    f + ":3 train.epochs: required key is missing (expected an integer)");
  EXPECT_THROW_WITH(c.root().child("data"), ConfigError, "data: required section is missing");
}

TEST(Config, WrongTypeNamesKeyAndValue) {
  TempDir dir;
  const auto f = dir.write("x.yaml", "train:\n  epochs: 12\n  steps: 3\n  lr: fast\n");
  const Config c = Config::load(f, {"train.epochs=abc"});
  const ConfigNode t = c.root().child("train");
  EXPECT_THROW_WITH(t.required<int64_t>("epochs"), ConfigError,
                    "<command line> train.epochs: expected an integer, got 'abc'");
  EXPECT_THROW_WITH(t.required<std::vector<int64_t>>("steps"), ConfigError,
                    f + ":3 train.steps: expected a list of integers, got '3'");
  EXPECT_THROW_WITH(t.required<double>("lr"), ConfigError,
                    f + ":4 train.lr: expected a number, got 'fast'");
  EXPECT_THROW_WITH(c.root().child("train").child("epochs"), ConfigError,
                    "train.epochs: expected a map");
}

TEST(Config, BaseInheritanceLaterFilesWin) {
  TempDir dir;
  dir.write(
      "_base_/model.yaml",
      "model:\n  backbone: {type: resnet, depth: 50}\n  head: {num_classes: 80, num_anchors: 9}\n");
  dir.write("_base_/schedule.yaml", "train:\n  epochs: 12\n  steps: [8, 11]\n");
  const auto f = dir.write("exp.yaml",
                           "_base_: [_base_/model.yaml, _base_/schedule.yaml]\n"
                           "model:\n  head:\n    num_classes: 3\n"
                           "train:\n  steps: [20]\n");
  const Config c = Config::load(f);
  const auto model = c.root().child("model");
  EXPECT_EQ(model.child("head").required<int64_t>("num_classes"), 3);  // child file wins
  EXPECT_EQ(model.child("head").required<int64_t>("num_anchors"), 9);  // maps merge key by key
  EXPECT_EQ(model.child("backbone").required<int64_t>("depth"), 50);
  EXPECT_EQ(c.root().child("train").required<std::vector<int64_t>>("steps"),
            std::vector<int64_t>{20});  // lists replace
  EXPECT_EQ(c.root().child("train").required<int64_t>("epochs"), 12);
  // Locations point at the file that set each key.
  EXPECT_EQ(model.child("head").where("num_anchors"),
            (dir.path() / "exp.yaml").parent_path().string() + "/_base_/model.yaml:3");
  EXPECT_EQ(model.child("head").where("num_classes"), f + ":4");
}

TEST(Config, DeleteReplacesInheritedMap) {
  TempDir dir;
  dir.write("base.yaml", "optimizer:\n  type: sgd\n  momentum: 0.9\n  nesterov: true\n");
  const auto f =
      dir.write("exp.yaml", "_base_: base.yaml\noptimizer:\n  _delete_: true\n  type: adam\n");
  const Config c = Config::load(f);
  const auto o = c.root().child("optimizer");
  EXPECT_EQ(o.keys(), std::vector<std::string>{"type"});
  EXPECT_EQ(o.required<std::string>("type"), "adam");
  EXPECT_EQ(c.dump().find("_delete_"), std::string::npos);
}

TEST(Config, LaterBaseWinsOverEarlierBase) {
  TempDir dir;
  dir.write("a.yaml", "x: 1\ny: 1\n");
  dir.write("b.yaml", "x: 2\n");
  const auto f = dir.write("c.yaml", "_base_: [a.yaml, b.yaml]\n");
  const Config c = Config::load(f);
  EXPECT_EQ(c.root().required<int64_t>("x"), 2);
  EXPECT_EQ(c.root().required<int64_t>("y"), 1);
}

TEST(Config, CircularBaseIsRefused) {
  TempDir dir;
  dir.write("a.yaml", "_base_: b.yaml\nx: 1\n");
  const auto b = dir.write("b.yaml", "_base_: [a.yaml]\ny: 2\n");
  EXPECT_THROW_WITH(Config::load(dir.path() / "a.yaml"), ConfigError,
                    "circular _base_: a.yaml -> b.yaml -> a.yaml");
  EXPECT_THROW_WITH(Config::load(dir.path() / "a.yaml"), ConfigError, b + ":1");
}

TEST(Config, MissingFileAndMissingBase) {
  TempDir dir;
  EXPECT_THROW_WITH(Config::load((dir.path() / "nope.yaml").string()), ConfigError,
                    "config file not found: ");
  const auto f = dir.write("a.yaml", "x: 1\n_base_: [gone.yaml]\n");
  EXPECT_THROW_WITH(Config::load(f), ConfigError, f + ":2 config file not found: ");
}

TEST(Config, SyntaxErrorNamesFileAndLine) {
  TempDir dir;
  const auto f = dir.write("bad.yaml", "model:\n  depth: 50\n  head: [1, 2\ntrain: {}\n");
  try {
    Config::load(f);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(f + ":", 0), 0u) << m;
    EXPECT_NE(m.find("YAML syntax error"), std::string::npos) << m;
  }
}

TEST(Config, UnknownKeyIsRejectedWithNearMiss) {
  TempDir dir;
  const auto f = dir.write("x.yaml", "model:\n  head:\n    num_classes: 3\n    num_anchor: 9\n");
  const Config c = Config::load(f);
  const auto head = c.root().child("model").child("head");
  head.required<int64_t>("num_classes");
  EXPECT_FALSE(head.optional<int64_t>("num_anchors").has_value());
  EXPECT_THROW_WITH(head.reject_unused(), ConfigError,
                    f + ":4 model.head.num_anchor: unknown key (did you mean num_anchors?)");
}

TEST(Config, UnknownSectionIsReportedAtItsTop) {
  const Config c =
      Config::parse("train:\n  epochs: 1\ntrian:\n  lr: 0.1\n  epochs: 3\nseed: 1\n", "x.yaml");
  c.root().child("train").required<int64_t>("epochs");
  c.root().has("train");
  c.root().required<int64_t>("seed");
  EXPECT_THROW_WITH(c.root().reject_unused(), ConfigError,
                    "x.yaml:3 trian: unknown key (did you mean train?)");
}

TEST(Config, AllUnknownKeysAreListed) {
  const Config c = Config::parse("a: 1\nb: 2\nc: 3\n", "x.yaml");
  c.root().required<int64_t>("b");
  EXPECT_THROW_WITH(c.root().reject_unused(), ConfigError,
                    "x.yaml:1 a: unknown key; also unknown: c");
}

TEST(Config, ListOfMapsTracksIndexedPaths) {
  const Config c = Config::parse(
      "transforms:\n  - {type: flip, prob: 0.5}\n  - {type: resize, sizee: 3}\n", "t.yaml");
  const auto items = c.root().list("transforms");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].path(), "transforms[1]");
  EXPECT_EQ(items[0].required<std::string>("type"), "flip");
  EXPECT_DOUBLE_EQ(items[0].required<double>("prob"), 0.5);
  EXPECT_EQ(items[1].required<std::string>("type"), "resize");
  items[1].optional<int64_t>("size");
  EXPECT_THROW_WITH(c.root().reject_unused(), ConfigError,
                    "transforms[1].sizee: unknown key (did you mean size?)");
}

TEST(Config, OverridesAreTypedByYaml) {
  const Config c = Config::parse("train:\n  epochs: 12\n  steps: [8, 11]\n", "x.yaml",
                                 {"train.epochs=3", "train.steps=[1, 2, 3]", "train.lr=1e-4",
                                  "model.head.depth=4", "train.name=r50"});
  const auto t = c.root().child("train");
  EXPECT_EQ(t.required<int64_t>("epochs"), 3);
  EXPECT_EQ(t.required<std::vector<int64_t>>("steps"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(t.required<double>("lr"), 1e-4);
  EXPECT_EQ(t.required<std::string>("name"), "r50");
  EXPECT_EQ(c.root().child("model").child("head").required<int64_t>("depth"), 4);
  EXPECT_EQ(t.where("epochs"), "<command line>");
}

TEST(Config, MalformedOverridesAreRefused) {
  EXPECT_THROW_WITH(Config::parse("a: 1\n", "x.yaml", {"novalue"}), ConfigError,
                    "must look like a.b.c=value");
  EXPECT_THROW_WITH(Config::parse("a: 1\n", "x.yaml", {"a..b=1"}), ConfigError,
                    "empty key segment");
  EXPECT_THROW_WITH(Config::parse("a: 1\n", "x.yaml", {"a.b=2"}), ConfigError,
                    "a.b: cannot set a key inside 'a', which is not a map (x.yaml:1)");
  EXPECT_THROW_WITH(Config::parse("a: 1\n", "x.yaml", {"a=[1,"}), ConfigError,
                    "a: value '[1,' is not valid YAML");
}

TEST(Config, DumpRoundTripsAndHashIsStable) {
  TempDir dir;
  dir.write("base.yaml", "model: {depth: 50}\n");
  const auto f = dir.write("exp.yaml", "_base_: base.yaml\ntrain: {epochs: 2}\n");
  const Config a = Config::load(f, {"train.epochs=5"});
  const Config b = Config::parse(a.dump(), "dumped.yaml");
  EXPECT_EQ(b.root().child("train").required<int64_t>("epochs"), 5);
  EXPECT_EQ(b.root().child("model").required<int64_t>("depth"), 50);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 16u);
  EXPECT_NE(a.hash(), Config::load(f).hash());
  const auto out = (dir.path() / "resolved.yaml").string();
  a.write(out);
  EXPECT_EQ(testing::read_file(out), a.dump());
  EXPECT_THROW(a.write((dir.path() / "no/such/dir/x.yaml").string()), IoError);
}

TEST(Config, NullValuesCountAsAbsent) {
  const Config c = Config::parse("a: ~\nb:\n", "x.yaml");
  EXPECT_FALSE(c.root().has("a"));
  EXPECT_FALSE(c.root().optional<int64_t>("b").has_value());
  // Asked for, a null key is read (an override unsets an inherited value); a null key nobody
  // asks for (a typo) is still unknown.
  c.root().reject_unused();
  const Config unset = Config::parse("w: file.pth\nx: 1\n", "y.yaml", {"w=null", "wieghts=null"});
  EXPECT_FALSE(unset.root().optional<std::string>("w").has_value());
  unset.root().required<int64_t>("x");
  EXPECT_THROW_WITH(unset.root().reject_unused(), ConfigError, "wieghts: unknown key");
}

}  // namespace
}  // namespace detforge

namespace detforge {
namespace {

TEST(Config, FlattenListsEveryLeaf) {
  const Config c =
      Config::parse("train: {epochs: 3, steps: [8, 11]}\nmodel: {head: {gn: true}}\nempty: {}\n");
  const auto flat = c.flatten();
  EXPECT_EQ(flat.at("train.epochs"), "3");
  EXPECT_EQ(flat.at("train.steps"), "[8, 11]");
  EXPECT_EQ(flat.at("model.head.gn"), "true");
  EXPECT_EQ(flat.at("empty"), "{}");
  EXPECT_EQ(flat.size(), 4u);
}

}  // namespace
}  // namespace detforge

namespace detforge {
namespace {

TEST(ConfigHelpers, ReadFailOneOfAndChoices) {
  TempDir dir;
  const auto f = dir.write("x.yaml", "data:\n  workers: 4\n  on_invalid: dropp\n  policy: cosin\n");
  const ConfigNode d = Config::load(f).root().child("data");
  int64_t workers = 2, prefetch = 2;
  EXPECT_TRUE(d.read("workers", workers));
  EXPECT_FALSE(d.read("prefetch", prefetch));
  EXPECT_EQ(workers, 4);
  EXPECT_EQ(prefetch, 2) << "an absent key leaves the Options default alone";
  EXPECT_THROW_WITH(d.fail("workers", "must be even"), ConfigError,
                    f + ":2 data.workers: must be even");
  EXPECT_THROW_WITH(d.fail("", "needs a train section"), ConfigError,
                    f + ":1 data: needs a train section");
  EXPECT_THROW_WITH(d.one_of("on_invalid", {"error", "drop", "skip_image"}, "error"), ConfigError,
                    f + ":3 data.on_invalid: unknown 'dropp'; allowed: error, drop, skip_image "
                        "(did you mean drop?)");
  EXPECT_EQ(d.one_of("check_images", {"none", "exists"}, "exists"), "exists");
  EXPECT_EQ(list_choices("cosin", {"constant", "cosine", "multistep"}),
            "known: constant, cosine, multistep (did you mean cosine?)");
  EXPECT_EQ(list_choices("xyz", {"constant", "cosine"}), "known: constant, cosine")
      << "no near miss, no suggestion";
  d.required<std::string>("policy");
  EXPECT_NO_THROW(d.reject_unused());
}

// shared/STYLE.md 3.3: only a folder's build.h / build.cpp (and tools/) read the config.
TEST(ConfigDiff, ListsChangedAddedAndRemovedKeysInOrder) {
  const auto changes = config_changes("model: {depth: 50, fpn: {channels: 256}}\nseed: 1\n", "a",
                                      "model: {depth: 18, fpn: {channels: 256}}\nlr: 0.1\n", "b");
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "lr");
  EXPECT_EQ(changes[0].before, "<absent>");
  EXPECT_EQ(changes[1].key, "model.depth");
  EXPECT_EQ(changes[1].before, "50");
  EXPECT_EQ(changes[1].after, "18");
  EXPECT_EQ(changes[2].key, "seed");
  EXPECT_EQ(changes[2].after, "<absent>");
  EXPECT_TRUE(config_changes("a: 1\n", "a", "a: 1\n", "b").empty());
  EXPECT_THROW_WITH(config_changes("a: [1\n", "stored.yaml", "a: 1\n", "b"), ConfigError,
                    "stored.yaml");
}

TEST(ConfigBoundary, OnlyBuildFilesIncludeConfigNode) {
  namespace fs = std::filesystem;
  std::vector<std::string> offenders;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(DETFORGE_SOURCE_DIR) / "src")) {
    const auto name = e.path().filename().string();
    if (!e.is_regular_file() || e.path().parent_path().filename() == "core") continue;
    // build.h / build.cpp and their parts, build_<part>.h / .cpp.
    if (name.rfind("build.", 0) == 0 || name.rfind("build_", 0) == 0) continue;
    if (testing::read_file(e.path()).find("core/config_node.h") != std::string::npos) {
      offenders.push_back(e.path().string());
    }
  }
  EXPECT_TRUE(offenders.empty()) << ::testing::PrintToString(offenders);
}

// The commands load configs (Config::load) and hand them to the build functions; none reads a
// section itself, so every command accepts and refuses the same keys as the library.
TEST(ConfigBoundary, ToolsNeverReadConfigSections) {
  namespace fs = std::filesystem;
  std::vector<std::string> offenders;
  for (const auto& e : fs::directory_iterator(fs::path(DETFORGE_SOURCE_DIR) / "tools")) {
    if (!e.is_regular_file()) continue;
    const std::string text = testing::read_file(e.path());
    if (text.find("ConfigNode") != std::string::npos || text.find(".root()") != std::string::npos)
      offenders.push_back(e.path().string());
  }
  EXPECT_TRUE(offenders.empty()) << ::testing::PrintToString(offenders);
}

}  // namespace
}  // namespace detforge
