#!/usr/bin/env bash
# mpirun launch agent for the dcr testbed (--mca plm_rsh_agent): Open MPI calls
# it like ssh, `AGENT HOST COMMAND...`; HOST is a testbed host's namespace
# name from the hostfile (dcrtb-<id>-t<i>), and the command (an orted with its
# arguments, one shell string) runs inside that namespace.
set -eu
host=${1-}
[[ $host =~ ^dcrtb-[0-9]+-(svc|t[0-9]+|r[0-9]+)$ ]] ||
    { echo "testbed-agent: host '$host': expected a testbed namespace dcrtb-<id>-t<i>" >&2; exit 2; }
shift
(($#)) || { echo "testbed-agent: no command for $host" >&2; exit 2; }
exec ip netns exec "$host" /bin/sh -c "$*"
