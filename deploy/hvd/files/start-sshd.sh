#!/bin/bash
# A worker pod of an elastic job: sshd in the foreground (the pod's main
# process), for hvdrun to start hvd-agent over ssh. Its host key and the
# launcher's public key come from the ssh Secret (/etc/hvd/ssh), the rest of
# its configuration from sshd_config beside this script.
set -euo pipefail
mkdir -p /run/sshd  # privilege separation directory
exec /usr/sbin/sshd -D -e -f /etc/hvd/scripts/sshd_config \
  -p "${HVD_K8S_SSH_PORT:-22}"
