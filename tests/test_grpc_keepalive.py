"""The keepalive the cluster tasks' gRPC channels take (training/task.py's GRPC_KEEPALIVE),
against a gRPC server with gRPC's default ping policy, as TensorFlow's servers keep it (they set
no ping options): a call silent for longer than four keepalive periods is not cut off (pinging
every 2 s with and without calls drew GOAWAY too_many_pings at 8 s, failing the call), and the
client still pings while it waits, which is what notices a cut link within seconds."""

import socket
import threading
import time
from concurrent import futures

import grpc

from training import task

SILENT_SECONDS = 10  # Five keepalive periods: the old options' GOAWAY came at the fourth ping.


def _options():
  return [
    (name, int(value)) for name, value in (o.split('=') for o in task.GRPC_KEEPALIVE.split(','))
  ]


class _CountingProxy:
  """Relays one TCP connection to `port`, timing each chunk the client sends."""

  def __init__(self, port):
    self.sent = []  # (time, bytes) from the client.
    self._listener = socket.create_server(('127.0.0.1', 0))
    self.port = self._listener.getsockname()[1]
    self._port = port
    threading.Thread(target=self._accept, daemon=True).start()

  def _accept(self):
    client, _ = self._listener.accept()
    server = socket.create_connection(('127.0.0.1', self._port), timeout=30)
    threading.Thread(target=self._relay, args=(client, server, True), daemon=True).start()
    self._relay(server, client, False)

  def _relay(self, source, sink, count):
    """Until either side closes (the other's relay then meets a closed socket: its end too)."""
    try:
      while data := source.recv(65536):
        if count:
          self.sent.append((time.monotonic(), len(data)))
        sink.sendall(data)
    except OSError:
      pass


def test_a_silent_call_outlasts_the_keepalive_and_the_client_pings_meanwhile():
  server = grpc.server(futures.ThreadPoolExecutor(2))
  answer = grpc.unary_unary_rpc_method_handler(lambda *_: time.sleep(SILENT_SECONDS) or b'')
  server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler('t', {'Silent': answer})])
  port = server.add_insecure_port('127.0.0.1:0')
  server.start()
  proxy = _CountingProxy(port)
  try:
    with grpc.insecure_channel(f'127.0.0.1:{proxy.port}', options=_options()) as channel:
      call = channel.unary_unary('/t/Silent')
      started = time.monotonic()
      call(b'', timeout=SILENT_SECONDS + 20)  # Raises UNAVAILABLE (Too many pings) if cut.
      assert time.monotonic() - started >= SILENT_SECONDS
    # Pings (17-byte frames) while the call waited: a cut link fails it within seconds.
    pings = [size for at, size in proxy.sent if started + 1 < at < started + SILENT_SECONDS - 1]
    assert pings and all(size % 17 == 0 for size in pings), proxy.sent
  finally:
    server.stop(grace=None)
