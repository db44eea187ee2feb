"""TensorFlow's log noise, kept off the output of every task, however it was started.

`TF_LOG_LINE` matches TensorFlow's C++ log lines, which TF_CPP_MIN_LOG_LEVEL no longer
silences, and the lines that continue its gRPC errors when a peer goes away (screens of them
when a parameter-server worker drops off the network). The launcher drops them from its
children's output; a task started by hand or by a scheduler drops them from its own with
`filter_own_stderr`: its file descriptor 2 becomes a pipe into a filter process that outlives
it, so no line written just before a crash (or by the start-up watchdog) is lost. Run as
`python log_filter.py COMMAND...`, it runs COMMAND with its stderr filtered: the TensorBoard
command run.py prints (orchestration/commands.py), TensorBoard loading TensorFlow.
"""

import functools
import os
import re
import signal
import subprocess
import sys

TF_LOG_LINE = re.compile(
  r'([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before '
  r'absl::InitializeLog|To enable the following instructions: |Additional '
  r'GRPC error information from remote target|:UNKNOWN:Error received from '
  r'peer|This could happen if the remote target has been disconnected|'
  # The coordination service's report when an all-reduce peer is lost.
  r'/job:\w+/replica:\d+/task:\d+\s*$|The tasks have crashed\. |The error '
  r'could be from a previous operation|RPC: /tensorflow\.|'
  # The node an error of a C++ log line came from, on a line of its own after it.
  r'^\s*\[\[\{\{(function_)?node )'
)


@functools.cache
def quiet_tensorflow():
  """Once, before TensorFlow loads: its log noise kept off this task's output (the launcher
  filters its children's: a process it did not start filters its own)."""
  from absl import logging  # Here: the filter process itself needs neither.

  from orchestration import processes

  if logging.get_verbosity() < logging.INFO:
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TensorFlow's C++ INFO and WARNING.
    if processes.PARENT_PID_ENV not in os.environ:
      filter_own_stderr()


def filter_own_stderr():
  """From now on, this process's stderr (Python's and TensorFlow's C++ alike) is relayed
  without the lines TF_LOG_LINE matches."""
  sys.stderr.flush()
  read_end, write_end = os.pipe()
  subprocess.Popen(
    [sys.executable, os.path.abspath(__file__)], stdin=read_end, stdout=2, stderr=subprocess.DEVNULL
  )
  os.close(read_end)
  os.dup2(write_end, 2)
  os.close(write_end)


def _relay(source, sink):
  """`source` to `sink`, line by line, but the noise, until every writer of `source` has
  closed it."""
  for line in source:
    if not TF_LOG_LINE.match(line.decode(errors='replace')):
      sink.write(line)
      sink.flush()


def _run_filtered(command):
  """`command`, its stderr relayed here without the noise; its exit status. Ctrl-C reaches
  it with this process's group, SIGTERM is passed on to it; this process ends after it."""
  proc = subprocess.Popen(command, stderr=subprocess.PIPE)
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
  _relay(proc.stderr, sys.stderr.buffer)
  return proc.wait()


if __name__ == '__main__':
  if len(sys.argv) > 1:
    sys.exit(_run_filtered(sys.argv[1:]))
  for sig in (signal.SIGINT, signal.SIGTERM):  # It ends with its writers, never before.
    signal.signal(sig, signal.SIG_IGN)
  _relay(sys.stdin.buffer, sys.stdout.buffer)
