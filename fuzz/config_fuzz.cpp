// A YAML config and its `a.b=value` overrides: the input up to its first NUL byte is the file,
// each line after it one override. The resolved config is dumped and flattened, as `train`
// writes and logs it.
#include <sstream>
#include <vector>

#include "core/config_node.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace detforge;
  const std::string_view input = fuzz::bytes(data, size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::istringstream lines{std::string(input.substr(nul + 1))};
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  fuzz::expect_clean([&] {
    const Config config = Config::parse(yaml, "fuzz.yaml", overrides);
    config.dump();
    config.flatten();
    config.hash();
  });
  return 0;
}
