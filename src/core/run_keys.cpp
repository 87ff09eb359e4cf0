#include "core/run_keys.h"

#include "core/config_node.h"
#include "core/errors.h"

namespace detforge {

int64_t read_train_epochs(const ConfigNode& root) {
  const auto train = root.optional_child("train");
  if (!train || !train->has("epochs")) return kDefaultTrainEpochs;
  const auto epochs = train->required<int64_t>("epochs");
  if (epochs < 1) train->fail("epochs", str("must be > 0, got ", epochs));
  return epochs;
}

int64_t read_class_count(const ConfigNode& section) {
  const auto v = section.required<int64_t>("num_classes");
  if (v < 1) section.fail("num_classes", str(v, " must be >= 1"));
  return v;
}

std::optional<int64_t> run_num_classes(const ConfigNode& root) {
  const auto model = root.optional_child("model");
  const auto data = root.optional_child("data");
  std::optional<int64_t> from_model, from_data;
  if (model && model->has("num_classes")) from_model = read_class_count(*model);
  if (data && data->has("num_classes")) from_data = read_class_count(*data);
  if (from_model && from_data && *from_model != *from_data) {
    model->fail("num_classes",
                str(*from_model, " but data.num_classes is ", *from_data, " (",
                    data->where("num_classes"), "); set one of them, or both to the same value"));
  }
  if (!from_model && !from_data && model) {
    model->fail("num_classes",
                "required key is missing (give model.num_classes or data.num_classes)");
  }
  return from_model ? from_model : from_data;
}

}  // namespace detforge
