#include "core/config_diff.h"

#include <set>

#include "core/config_node.h"

namespace detforge {

std::vector<ConfigChange> config_changes(const std::string& before, const std::string& before_name,
                                         const std::string& after, const std::string& after_name) {
  const auto a = Config::parse(before, before_name).flatten();
  const auto b = Config::parse(after, after_name).flatten();
  // The union of both key sets, so added and removed keys are listed too, in sorted order.
  std::set<std::string> keys;
  for (const auto& kv : a) keys.insert(kv.first);
  for (const auto& kv : b) keys.insert(kv.first);
  std::vector<ConfigChange> out;
  for (const auto& key : keys) {
    const auto x = a.find(key), y = b.find(key);
    ConfigChange c{key, x == a.end() ? "<absent>" : x->second,
                   y == b.end() ? "<absent>" : y->second};
    if (c.before != c.after) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace detforge
