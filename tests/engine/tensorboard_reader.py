"""TensorBoard's own reading of a run's event files: every scalar and image as JSON.

usage: tensorboard_reader.py EVENT_DIR OUT_JSON
EventAccumulator checks each record's CRC-32C framing and parses the Event protos, as the
TensorBoard server does when it loads the folder.
"""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator

acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={
    event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0})
acc.Reload()
tags = acc.Tags()
out = {
    "scalars": {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags["scalars"]},
    "images": {t: [[e.step, e.width, e.height, len(e.encoded_image_string)] for e in acc.Images(t)]
               for t in tags["images"]},
}
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
