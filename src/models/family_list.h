// The one list of detector families `model.type` may name, in the order error messages list
// them. Each line is
//   DETFORGE_FAMILY(<type>)
// and src/models/<type>/ is the family's folder: its CMakeLists.txt adds its sources to
// detforge_models, and its build.cpp defines the table entry
// `void <type>_spec(const ConfigNode& model, DetectorSpec& spec)`. From this list come those
// declarations and the family table (src/models/build.cpp) and the folders
// src/models/CMakeLists.txt adds.
//
// An X-macro file: it has no include guard, and its includer defines DETFORGE_FAMILY.
DETFORGE_FAMILY(dfine)
DETFORGE_FAMILY(retinanet)
DETFORGE_FAMILY(rfdetr)
DETFORGE_FAMILY(rtdetr)
DETFORGE_FAMILY(yolo)
