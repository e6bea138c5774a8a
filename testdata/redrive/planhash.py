#!/usr/bin/env python3
"""Recompute a Berth redrive plan's hash (format berth-redrive-plan/v2).

Independent of Berth: it follows cmd/berth/help/redrive.md, "Plan format".
Usage: planhash.py PLAN.json   prints the hash; exits 1 when the file's
"hash" differs from it, 2 when the file is not a v2 plan.
"""
import hashlib
import json
import sys


def plan_hash(core):
    canonical = json.dumps(core, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(b"berth-redrive-plan/v2\n" + canonical.encode("ascii")).hexdigest()


def main(path):
    with open(path, "rb") as f:
        doc = json.load(f)
    core = doc.get("plan")
    if not isinstance(core, dict) or core.get("format") != "berth-redrive-plan/v2":
        print("not a berth-redrive-plan/v2 file", file=sys.stderr)
        return 2
    h = plan_hash(core)
    print(h)
    return 0 if h == doc.get("hash") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
