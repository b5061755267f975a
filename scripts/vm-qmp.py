#!/usr/bin/env python3
"""Talks to a running guest's qemu over its QMP socket (scripts/test-kernels.sh
opens one per VM) so a guest that stopped answering can still be examined from
the host: the vCPUs' registers and local APIC timers, then an NMI.

Usage: vm-qmp.py SOCKET CMD...
  CMD is either a QMP command name ("inject-nmi", "query-status") or
  "hmp:TEXT" for a human monitor command ("hmp:info registers -a"), or
  "hmp@N:TEXT" for one run as vCPU N ("hmp@1:info lapic").
Each command's answer is printed under a "-- CMD" header; exit status 1 if the
socket cannot be reached (the VM is gone).
"""
import json
import socket
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, cmds = sys.argv[1], sys.argv[2:]
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
    except OSError as e:
        print(f"vm-qmp: {path}: {e}", file=sys.stderr)
        return 1
    f = s.makefile("rw", encoding="utf-8")

    def reply():
        # Asynchronous events (e.g. NMI-related status changes) come first.
        while True:
            line = f.readline()
            if not line:
                raise EOFError("qemu closed the QMP socket")
            msg = json.loads(line)
            if "return" in msg or "error" in msg:
                return msg

    def call(name, arguments=None):
        req = {"execute": name}
        if arguments:
            req["arguments"] = arguments
        f.write(json.dumps(req) + "\n")
        f.flush()
        return reply()

    f.readline()  # greeting
    call("qmp_capabilities")
    for c in cmds:
        print(f"-- {c}")
        try:
            if c.startswith("hmp"):
                where, _, text = c.partition(":")
                args = {"command-line": text}
                if where.startswith("hmp@"):
                    args["cpu-index"] = int(where[4:])
                r = call("human-monitor-command", args)
                out = r.get("return", r.get("error"))
                print(out if isinstance(out, str) else json.dumps(out))
            else:
                print(json.dumps(call(c)))
        except (OSError, EOFError, ValueError) as e:
            print(f"vm-qmp: {c}: {e}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
