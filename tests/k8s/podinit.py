"""The container runtime's part for one simulated pod (k8s_sim.py).

Run as the first process of fresh mount, UTS and PID namespaces inside the
pod's network namespace:

    ip netns exec NS unshare --mount --uts --pid --fork --kill-child \
        --mount-proc python3 podinit.py SPEC.json

It sets the pod's host name, mounts what the pod spec mounts (the
kubelet-managed /etc/hosts, volumes, the image's /usr/local/bin), changes to
the container's workingDir and execs the container's command with exactly
the container's environment: from then on the command is the pod's PID 1.

SPEC.json: {"hostname": str, "workingDir": str, "argv": [str], "env": {},
"mounts": [{"kind": "bind"|"tmpfs", "source": str, "target": str,
"readOnly": bool, "size": str}]} with mounts in mounting order.
"""

import json
import os
import socket
import subprocess
import sys


def mount(args):
    subprocess.run(["mount"] + args, check=True)


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    socket.sethostname(spec["hostname"])
    for m in spec["mounts"]:
        if m["kind"] == "tmpfs":
            opts = ["-o", "size=" + m["size"]] if m.get("size") else []
            # Directories to keep visible under the new tmpfs: held open
            # before it hides them, bound back after.
            keep = [(d, os.open(d, os.O_PATH)) for d in m.get("keep", [])]
            mount(["-t", "tmpfs"] + opts + ["tmpfs", m["target"]])
            for path, fd in keep:
                os.makedirs(path, exist_ok=True)
                subprocess.run(["mount", "--no-canonicalize", "--bind",
                                "/proc/self/fd/%d" % fd, path],
                               check=True, pass_fds=(fd,))
                os.close(fd)
        else:
            mount(["--bind", m["source"], m["target"]])
            if m.get("readOnly"):
                mount(["-o", "remount,bind,ro", m["target"]])
    os.chdir(spec["workingDir"])
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as e:
        # What a container runtime reports when the command cannot start.
        print("podinit: cannot run %s: %s" % (argv[0], e), file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
