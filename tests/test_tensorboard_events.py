#!/usr/bin/env python3
"""graphtune's hand-written TensorBoard event files (launcher/tensorboard_writer.hpp) read back
by TensorBoard itself. Run by ctest with GRAPHTUNE_TB_EVENTS_DRIVER naming
tests/tensorboard_events_driver.cpp's binary; exit 77 ("SKIP: ...") without tensorboard.

1. EventAccumulator (what `tensorboard --logdir` uses) finds the three tags with every step,
   value (float32, exactly) and wall time (double, exactly) the driver wrote.
2. event_file_loader and the Event protobuf: the first event is file_version "brain.Event:2"
   and every record parses; each record's length and data crcs match TensorBoard's own
   crc32c (tensorboard.compat.tensorflow_stub.pywrap_tensorflow), which checks "123456789".
3. Damage: TensorBoard's record reader checks both crcs (it raises DataLossError "failed event
   crc32 check" / "failed header crc32 check"); with one byte flipped in a record's data, or
   in its length, the reader rejects that record and the loader yields only the records
   before it.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import check, finish, skip  # noqa: E402

try:
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
except ImportError as e:
    skip("the tensorboard Python package is needed: %s" % e)

DRIVER = os.environ.get("GRAPHTUNE_TB_EVENTS_DRIVER")
if not DRIVER or not os.access(DRIVER, os.X_OK):
    print("FAIL: GRAPHTUNE_TB_EVENTS_DRIVER does not name the built tensorboard_events_driver: %r" % DRIVER)
    sys.exit(1)

N = 50
TAGS = ("train/loss", "train/lr", "perf/tokens_per_s")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected(tag, i):
    """(step, wall_time, value) as the driver computes them, value rounded to float32."""
    value = {"train/loss": 3.0 / (1 + i), "train/lr": 1e-3 * (i + 1) / N, "perf/tokens_per_s": 1000.5 + 37 * i}[tag]
    return 10 * i, 1.7e9 + 0.25 * i, f32(value)


def records(data):
    """(offset, length bytes, length crc, payload, payload crc) of each TFRecord, walked by hand."""
    out, pos = [], 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        payload = data[pos + 12:pos + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        out.append((pos, header, header_crc, payload, payload_crc))
        pos += 16 + length
    return out


def read_with_tensorboard_reader(path):
    """Payloads TensorBoard's record reader accepts, and the error that stopped it (or None)."""
    reader = pywrap_tensorflow.PyRecordReader_New(path, 0, "", None)
    got = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return got, None
        except errors.DataLossError as e:
            return got, str(e)
        got.append(reader.record())


with tempfile.TemporaryDirectory(prefix="gt_tb_") as tmp:
    logdir = os.path.join(tmp, "run", "tb")  # the writer creates it
    p = subprocess.run([DRIVER, logdir, str(N)], capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL: driver exited %d: %s" % (p.returncode, p.stderr.strip()))
        sys.exit(1)
    path = p.stdout.strip()
    check("one event file named like TensorFlow's", os.listdir(logdir) == [os.path.basename(path)]
          and os.path.basename(path).startswith("events.out.tfevents."), str(os.listdir(logdir)))

    # 1. What TensorBoard shows.
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    check("scalar tags", sorted(acc.Tags()["scalars"]) == sorted(TAGS), str(acc.Tags()["scalars"]))
    for tag in TAGS:
        got = [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
        want = [expected(tag, i) for i in range(N)]
        bad = [(g, w) for g, w in zip(got, want) if g != w]
        check("%s: %d steps, values float32-exact, wall times exact" % (tag, N),
              len(got) == N and not bad, "%d events, first mismatch %s" % (len(got), bad[:1]))

    # 2. The records and their protobufs.
    events = [event_pb2.Event.FromString(r) for r in event_file_loader.RawEventFileLoader(path).Load()]
    check("1 + 3N events", len(events) == 1 + 3 * N, str(len(events)))
    check("first event: file_version brain.Event:2", events[0].file_version == "brain.Event:2"
          and events[0].wall_time > 1.6e9, str(events[0]).replace("\n", " "))
    e = events[1]
    check("a scalar event's fields", e.step == 0 and e.wall_time == 1.7e9 and len(e.summary.value) == 1
          and e.summary.value[0].tag == "train/loss" and e.summary.value[0].simple_value == 3.0,
          str(e).replace("\n", " "))
    check("TensorBoard's crc32c on the check vector", pywrap_tensorflow.crc32c(b"123456789") == 0xE3069283)
    with open(path, "rb") as f:
        data = f.read()
    recs = records(data)
    check("records tile the file", len(recs) == 1 + 3 * N and recs[-1][0] + 16 + len(recs[-1][3]) == len(data))
    bad = [r[0] for r in recs if pywrap_tensorflow.masked_crc32c(r[1]) != r[2]
           or pywrap_tensorflow.masked_crc32c(r[3]) != r[4]]
    check("every length and data crc matches TensorBoard's masked crc32c", not bad, "bad at offsets %s" % bad[:3])

    # 3. Damage: one byte flipped.
    damaged_at = 10
    offset, _, _, payload, _ = recs[damaged_at]
    for what, flip_at, message in (("data", offset + 12 + len(payload) // 2, "failed event crc32 check"),
                                   ("length", offset + 1, "failed header crc32 check")):
        damaged_dir = os.path.join(tmp, "damaged_" + what)
        os.makedirs(damaged_dir)
        damaged = os.path.join(damaged_dir, os.path.basename(path))
        shutil.copy(path, damaged)
        with open(damaged, "r+b") as f:
            f.seek(flip_at)
            byte = f.read(1)[0]
            f.seek(flip_at)
            f.write(bytes([byte ^ 0x10]))
        got, error = read_with_tensorboard_reader(damaged)
        check("a flipped byte in a record's %s: the reader rejects that record" % what,
              len(got) == damaged_at and error is not None and message in error, "%d read, %r" % (len(got), error))
        loaded = list(event_file_loader.RawEventFileLoader(damaged).Load())
        check("... and the loader yields only the %d records before it" % damaged_at,
              loaded == [r[3] for r in recs[:damaged_at]], "%d loaded" % len(loaded))

finish()
