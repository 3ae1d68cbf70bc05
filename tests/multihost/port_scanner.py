"""The part a port scanner or a confused client plays against a running job:
connects to every given TCP address over and over, sends random bytes (1 B
to 64 KiB) and closes, or leaves some connections half-sent and open, until
STOP_FILE exists. Run inside a host's network namespace.

    port_scanner.py STOP_FILE HOST:PORT...

Prints "scanned N connections (M failed)" when it stops.
"""

import os
import random
import socket
import sys
import time


def main():
    stop_file, targets = sys.argv[1], sys.argv[2:]
    rng = random.Random(0x5ca)
    held, done, failed = [], 0, 0
    deadline = time.time() + 300  # never outlive a test that forgot to stop
    while not os.path.exists(stop_file) and time.time() < deadline:
        for target in targets:
            host, port = target.rsplit(":", 1)
            try:
                s = socket.create_connection((host, int(port)), timeout=2)
                s.settimeout(0.2)
                s.sendall(os.urandom(rng.choice([1, 7, 64, 4096, 65536])))
            except OSError:
                failed += 1
                continue
            done += 1
            if len(held) < 16 and rng.random() < 0.1:
                held.append(s)  # half-sent, left open
            else:
                s.close()
    for s in held:
        s.close()
    print("scanned %d connections (%d failed)" % (done, failed))


if __name__ == "__main__":
    main()
