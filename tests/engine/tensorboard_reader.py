"""TensorBoard's own reading of a run's event files: every scalar, image and PR curve as JSON.

usage: tensorboard_reader.py EVENT_DIR OUT_JSON
EventAccumulator checks each record's CRC-32C framing and parses the Event protos, as the
TensorBoard server does when it loads the folder.
"""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator

from tensorboard.util import tensor_util

acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={
    event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0, event_accumulator.TENSORS: 0})
acc.Reload()
tags = acc.Tags()
out = {
    "scalars": {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags["scalars"]},
    "images": {t: [[e.step, e.width, e.height, len(e.encoded_image_string)] for e in acc.Images(t)]
               for t in tags["images"]},
    # The PR-curves plugin's [6, n] tensors, with the plugin named in each one's metadata.
    "pr_curves": {t: [[e.step, tensor_util.make_ndarray(e.tensor_proto).tolist()]
                      for e in acc.Tensors(t)]
                  for t in tags["tensors"]
                  if acc.SummaryMetadata(t).plugin_data.plugin_name == "pr_curves"},
}
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
