// The one list of the transforms `data.train.transforms` entries may name, in the order error
// messages list their types. Each line is
//   DETFORGE_TRANSFORM(<type>)
// and src/data/augment/<type>.cpp defines the transform and its reader,
// `read_<type>(const TransformKeys&, const TransformOptions&)`. From this list come the readers'
// declarations (keys.h), the table of types (src/data/build.cpp) and the sources of
// detforge_data_core (src/data/CMakeLists.txt reads the type from each line).
//
// An X-macro file: it has no include guard, and its includer defines DETFORGE_TRANSFORM.
DETFORGE_TRANSFORM(resize)
DETFORGE_TRANSFORM(flip)
DETFORGE_TRANSFORM(hsv)
DETFORGE_TRANSFORM(affine)
DETFORGE_TRANSFORM(scale_jitter)
DETFORGE_TRANSFORM(iou_crop)
DETFORGE_TRANSFORM(resize_crop)
DETFORGE_TRANSFORM(zoom_out)
DETFORGE_TRANSFORM(tile)
DETFORGE_TRANSFORM(mosaic)
DETFORGE_TRANSFORM(mixup)
