"""Worker for tests/test_launch.py: never finishes on its own (for --timeout)."""

import time

print("sleeping", flush=True)
time.sleep(600)
