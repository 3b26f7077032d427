"""What the CLI tests share: the sluice binary from argv[1], expect() that records failures and
goes on (one run reports every broken property), and finish() for the exit status."""
import os
import sys

SLUICE = os.path.abspath(sys.argv[1])
VOCAB = 512  # mkmodel's default
FAILURES = []


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)
    return cond


def finish():
    print(f"\n{len(FAILURES)} failures")
    return 1 if FAILURES else 0
