#include "core/errors.h"

namespace detforge {

std::string DataErrorInfo::format() const {
  std::ostringstream os;
  os << "[data:" << code << "]";
  if (image_id) os << " image_id=" << *image_id;
  if (!file.empty()) os << " file=" << file;
  if (ann_id) os << " ann_id=" << *ann_id;
  if (!field.empty()) os << " " << field << "=" << value;
  os << ": " << message;
  return os.str();
}

void throw_data_error(const DataErrorInfo& info) { throw DataError(info.format()); }

}  // namespace detforge
