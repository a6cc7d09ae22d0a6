"""An "MCP server" that starts but never answers: for connect-timeout tests."""

import sys
import time

sys.stdin.readline()
time.sleep(3600)
