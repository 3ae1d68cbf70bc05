"""A peer that sends garbage after the handshake: writes BYTES (hex) into
every established TCP connection of process PID whose remote address is
REMOTE_IP, on the process' own sockets (duplicated with pidfd_getfd), so
that the bytes leave from that rank, after its hello and between its own
messages. Needs the right to ptrace PID (root here).

    garbage_injector.py PID REMOTE_IP HEX_BYTES

Prints "injected N bytes into K connections", K counting the connections
written (one closed meanwhile, or all of them with the process gone, as
the job ends on the first garbage, is skipped); K 0 is an error, exit 1.
"""

import ctypes
import errno
import os
import socket
import struct
import sys

SYS_PIDFD_GETFD = 438  # x86_64


def socket_inodes(pid):
    """fd number -> socket inode, for the process' open sockets."""
    inodes = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes[int(fd)] = int(target[len("socket:["):-1])
    return inodes


def established_to(pid, remote_ip):
    """Inodes of the process' established IPv4 TCP connections to
    remote_ip (its own network namespace's table)."""
    wanted = struct.unpack("<I", socket.inet_aton(remote_ip))[0]
    found = set()
    with open("/proc/%d/net/tcp" % pid) as table:
        next(table)
        for line in table:
            cols = line.split()
            ip = int(cols[2].split(":")[0], 16)
            if ip == wanted and cols[3] == "01":  # ESTABLISHED
                found.add(int(cols[9]))
    return found


def main():
    pid, remote_ip, garbage = int(sys.argv[1]), sys.argv[2], bytes.fromhex(
        sys.argv[3])
    libc = ctypes.CDLL(None, use_errno=True)
    targets = established_to(pid, remote_ip)
    pidfd = os.pidfd_open(pid)
    count = 0
    for fd, inode in socket_inodes(pid).items():
        if inode not in targets:
            continue
        # A connection closed since it was listed (the garbage already
        # written into another ended the job, which closes the rest) is
        # skipped: gone from the process (EBADF) or from the network. So
        # are the rest once the process itself has exited (ESRCH).
        mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if mine < 0:
            err = ctypes.get_errno()
            if err == errno.EBADF:
                continue
            if err == errno.ESRCH and count > 0:
                break
            sys.exit("pidfd_getfd(%d, %d): %s" % (pid, fd, os.strerror(err)))
        try:
            os.write(mine, garbage)
            count += 1
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            os.close(mine)
    os.close(pidfd)
    print("injected %d bytes into %d connections" % (len(garbage), count))
    sys.exit(0 if count else 1)


if __name__ == "__main__":
    main()
