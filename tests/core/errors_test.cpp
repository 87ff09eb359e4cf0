#include "core/errors.h"

#include <set>

#include <gtest/gtest.h>

#include "test_util.h"

namespace detforge {
namespace {

TEST(Errors, DataErrorHasFixedFormat) {
  DataErrorInfo info{
      "bbox.non_positive_size", 139, "000000000139.jpg", 2245, "bbox", "[12,40.5,0,31.2]",
      "width must be > 0"};
  EXPECT_EQ(info.format(),
            "[data:bbox.non_positive_size] image_id=139 file=000000000139.jpg ann_id=2245 "
            "bbox=[12,40.5,0,31.2]: "
            "width must be > 0");
  EXPECT_THROW_WITH(throw_data_error(info), DataError, "ann_id=2245");
  DataErrorInfo partial{"image.missing_file", 7, "", std::nullopt, "", "", "no such file"};
  EXPECT_EQ(partial.format(), "[data:image.missing_file] image_id=7: no such file");
}

TEST(Errors, EachCategoryHasItsOwnExitCode) {
  const std::vector<std::unique_ptr<Error>> errors = [] {
    std::vector<std::unique_ptr<Error>> v;
    v.push_back(std::make_unique<Error>("x"));
    v.push_back(std::make_unique<ConfigError>("x"));
    v.push_back(std::make_unique<DataError>("x"));
    v.push_back(std::make_unique<DistError>("x"));
    v.push_back(std::make_unique<IoError>("x"));
    v.push_back(std::make_unique<TrainingError>("x"));
    return v;
  }();
  std::set<int> codes;
  std::set<std::string> names;
  for (const auto& e : errors) {
    const int code = static_cast<int>(e->exit_code());
    EXPECT_NE(code, 0);
    EXPECT_NE(code, static_cast<int>(ExitCode::kUsage));
    codes.insert(code);
    names.insert(e->category());
  }
  EXPECT_EQ(codes.size(), errors.size());
  EXPECT_EQ(names.size(), errors.size());
}

TEST(Errors, StrConcatenates) { EXPECT_EQ(str("label ", 3, " >= ", 2.5), "label 3 >= 2.5"); }

}  // namespace
}  // namespace detforge
