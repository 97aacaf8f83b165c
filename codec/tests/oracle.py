"""Oracle driver for codec/tests/json_oracle.rs: answers with shared/tools/js_json.py.

Reads one case per line on stdin and writes one answer per line on stdout (UTF-8):
  J <hex of UTF-8 JSON text>  ->  OK <JSON.stringify(JSON.parse(text))>   or  ERR <why>
  N <16 hex digits of binary64 bits>  ->  OK <number_to_string(x)>
js_json is imported from argv[1] if given, else from <repo>/../shared/tools (this file lives in
<repo>/codec/tests/). Nothing is copied into the repository.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "tools")
sys.path.insert(0, TOOLS)
import js_json  # noqa: E402

sys.setrecursionlimit(10000)


def answer(line):
    kind, _, payload = line.partition(" ")
    if kind == "N":
        (x,) = struct.unpack(">d", bytes.fromhex(payload))
        return "OK " + js_json.number_to_string(x)
    if kind == "J":
        text = bytes.fromhex(payload).decode("utf-8")
        try:
            value = js_json.parse(text)
        except (ValueError, RecursionError, OverflowError) as e:
            return "ERR " + type(e).__name__
        return "OK " + js_json.stringify(value)
    return "ERR unknown case kind " + kind


def main():
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        line = raw.decode("ascii").rstrip("\n")
        if line:
            out.write(answer(line).encode("utf-8") + b"\n")
    out.flush()


if __name__ == "__main__":
    main()
