#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: small valid (and a few nearly valid)
inputs that start each fuzzer on the paths worth mutating. Rerun after a
format changes; the files are checked in and replay as tests."""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def write(corpus, name, data):
    path = os.path.join(ROOT, corpus, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def hello(rank, size, token):
    return struct.pack("<5I", 0x54445648, 1, rank, size, len(token)) + token


def frame(payload):
    return struct.pack("<Q", len(payload)) + payload


def pb_string(field, value):
    return bytes([field << 3 | 2, len(value)]) + value


def pb_varint(field, value):
    out = bytes([field << 3])
    while True:
        byte = value & 0x7F
        value >>= 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def segment(flags=0, rank=1, rings=2, ring_bytes=4096, segment_bytes=0,
            state=0, reason_code=0, reason=b"", head=0, ring=b""):
    """An input of core/transport/shm:segment_fuzzer (see its header)."""
    return (struct.pack("<BIIQIIi", flags, rank, rings, ring_bytes,
                        segment_bytes, state, reason_code) +
            reason.ljust(64, b"\0")[:64] + struct.pack("<Q", head) + ring)


def agent_calls(mode, calls):
    """An input of launcher:agent_rpc_fuzzer: (agent, AgentMessage bytes)."""
    return bytes([mode]) + b"".join(bytes([a, len(m)]) + m for a, m in calls)


def pb_message(field, body):
    return bytes([field << 3 | 2, len(body)]) + body


def tcp_seeds():
    tcp = "core/transport/tcp/fuzz_corpus"
    write(tcp + "/hello", "valid", hello(1, 2, b"0123456789abcdef"))
    write(tcp + "/hello", "long_token", hello(1, 2, b"x")[:16] +
          struct.pack("<I", 1 << 31))
    write(tcp + "/hello", "record", "hvd-tcp-1\nhost-a\n10.0.0.1:4000,127.0.0.1:4000")
    write(tcp + "/stream", "two_messages", frame(b"negotiation") + frame(b"\0" * 64))
    write(tcp + "/stream", "stop_notice",
          struct.pack("<Q", (1 << 63) | 6) + b"reason")
    write(tcp + "/stream", "huge_header", struct.pack("<Q", 1 << 62))
    write(tcp + "/stream", "short_header", b"\x05\x00\x00")


def segment_seeds():
    shm = "core/transport/shm/fuzz_corpus/segment"
    message = struct.pack("<Q", 64).ljust(64, b"\0") + bytes(range(64))
    write(shm, "valid_with_message", segment(ring=message))
    write(shm, "valid_empty", segment())
    write(shm, "control_message", segment(
        ring=struct.pack("<Q", 5).ljust(64, b"\0") + b"hello".ljust(64, b"\0")))
    write(shm, "huge_length", segment(ring=struct.pack("<Q", 1 << 62)))
    write(shm, "aborted", segment(state=1, reason_code=13, reason=b"peer died"))
    write(shm, "odd_head", segment(flags=64, head=(1 << 63) + 7, ring=message))
    write(shm, "zero_ring_bytes", segment(flags=16, ring_bytes=0))
    write(shm, "huge_ring_bytes", segment(flags=16, ring_bytes=(1 << 64) - 64))
    write(shm, "short_segment", segment(flags=32, segment_bytes=100))
    write(shm, "wrong_identity", segment(flags=1 | 2 | 4 | 8, rank=7, rings=9))


def agent_hello(index, slots=0):
    """An AgentMessage with a Hello of host `index`."""
    body = (pb_varint(1, index) + pb_varint(2, slots) +
            pb_string(3, b"h%d" % index) +
            pb_message(4, pb_string(1, b"eth0") +
                       pb_string(2, b"10.0.0.%d" % (index + 1))) +
            pb_varint(5, 1) + pb_string(6, b"n"))
    return pb_message(1, body)


def agent_rpc_seeds():
    agent = "launcher/fuzz_corpus/agent_rpc"
    started = [(a, pb_message(3, pb_varint(1, a) + pb_varint(2, 100 + a)))
               for a in (0, 1)]
    output = (0, pb_message(4, pb_varint(1, 0) + pb_string(3, b"line\n")))
    exits = [(a, pb_message(5, pb_varint(1, a))) for a in (0, 1)]
    probe = (0, pb_message(2, pb_message(1, pb_varint(1, 1) + pb_string(2, b"10.0.0.2") + pb_varint(3, 1))))
    write(agent, "clean_job", agent_calls(0, [(0, agent_hello(0)), (1, agent_hello(1)), probe] +
                                          started + [output] + exits))
    write(agent, "orchestrated", agent_calls(1, [(0, agent_hello(0xFFFFFFFF, 1)),
                                                 (1, agent_hello(0xFFFFFFFF, 1))] + started + exits))
    write(agent, "failing_worker", agent_calls(0, [(0, agent_hello(0)), (1, agent_hello(1))] + started +
                                               [(1, pb_message(5, pb_varint(1, 1) + pb_varint(2, 3)))]))
    write(agent, "no_hello", agent_calls(0, exits + [(0, pb_message(7, pb_varint(1, 5) + pb_varint(2, 1)))]))
    write(agent, "same_host_twice", agent_calls(0, [(0, agent_hello(0)), (1, agent_hello(0))]))


def rpc_seeds():
    rpc = "core/rendezvous/fuzz_corpus/rpc"
    register = pb_varint(1, 1) + pb_string(2, b"host-a") + pb_varint(3, 42)
    set_kv = pb_string(1, b"tcp/1") + pb_string(2, b"hvd-tcp-1\nh\n1.2.3.4:5")
    get = pb_string(1, b"tcp/1")
    barrier = pb_string(1, b"init") + pb_varint(2, 2) + pb_string(4, b"p1")
    calls = [(0, register), (1, set_kv), (2, get), (3, barrier)]
    write(rpc, "each_method",
          b"".join(bytes([m, len(b)]) + b for m, b in calls))
    write(rpc, "barrier_too_big", bytes([3, 4]) + pb_string(1, b"b") +
          pb_varint(2, 9)[:2])


def dlpack_and_host_list_seeds():
    write("core/fuzz_corpus/dlpack_view", "float32_2x3",
          bytes([1 | 4, 1, 0, 2, 32]) + struct.pack("<H", 1) + bytes([2, 2, 3]) +
          bytes(16) + bytes([0, 0xFF]))
    write("core/fuzz_corpus/dlpack_view", "strided",
          bytes([1 | 4 | 8, 1, 0, 0, 8]) + struct.pack("<H", 1) + bytes([2, 4, 4]) +
          struct.pack("<2q", 4, 1) + bytes([3, 0xFF]))
    write("core/fuzz_corpus/dlpack_view", "huge",
          bytes([1 | 2 | 4, 1, 0, 2, 64]) + struct.pack("<H", 1) + bytes([2]) +
          struct.pack("<2q", 1 << 40, 1 << 40) + bytes(16) + bytes([0, 0xFF]))

    hosts = "launcher/fuzz_corpus/host_list"
    write(hosts, "list", "\x04h1:4,h2:2,h3")
    write(hosts, "hostfile", "\x08# cluster\nnode1 slots=4\nnode2:2\nnode3\n")
    write(hosts, "bad", "\x02a:2:x,b:,:3")


def main():
    tcp_seeds()
    segment_seeds()
    agent_rpc_seeds()
    rpc_seeds()
    dlpack_and_host_list_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
