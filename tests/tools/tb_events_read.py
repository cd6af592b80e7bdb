#!/usr/bin/python3
"""Reads TensorBoard event files independently of ledgerlm's writer, for the tests.

    tests/tools/tb_events_read.py EVENT_FILE [EVENT_FILE ...]

Prints one JSON object: {"file_version": ..., "events": [{"step", "wall_time", "scalars":
{tag: value}}, ...]}. The TFRecord framing and its masked CRC-32C are checked here (a CRC-32C of
our own, bit by bit, checked against the standard test vector), and each record is parsed by
Google's protobuf library (Debian's python3-protobuf) against the Event / Summary schema of
TensorFlow's event.proto and summary.proto (the field numbers below), declared at run time so that
no generated code is needed. Any framing, CRC or parse error exits non-zero naming the file and
the byte offset.
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    f = descriptor_pb2.FileDescriptorProto(name="ledgerlm_test_event.proto", package="tb",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED,
                      type_name=".tb.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL,
                    oneof_index=0)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                    type_name=".tb.Summary", oneof_index=0)
    event.oneof_decl.add(name="what")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    desc = pool.FindMessageTypeByName("tb.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def read_file(path, Event, out):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            sys.exit(f"{path}: offset {pos}: truncated record header")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if len_crc != masked(crc32c(header)):
            sys.exit(f"{path}: offset {pos}: length CRC mismatch")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            sys.exit(f"{path}: offset {pos}: truncated record")
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if data_crc != masked(crc32c(body)):
            sys.exit(f"{path}: offset {pos}: data CRC mismatch")
        ev = Event()
        ev.ParseFromString(body)
        if ev.WhichOneof("what") == "file_version":
            if out["events"] or out["file_version"] is not None:
                sys.exit(f"{path}: offset {pos}: file_version is not the first record")
            out["file_version"] = ev.file_version
        else:
            out["events"].append({"step": ev.step, "wall_time": ev.wall_time,
                                  "scalars": {v.tag: v.simple_value for v in ev.summary.value}})
        pos += 16 + length


def main():
    if crc32c(b"123456789") != 0xE3069283:  # the CRC-32C check value (RFC 3720)
        sys.exit("tb_events_read: CRC-32C self-check failed")
    Event = event_class()
    out = {"file_version": None, "events": []}
    for path in sys.argv[1:]:
        read_file(path, Event, out)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
