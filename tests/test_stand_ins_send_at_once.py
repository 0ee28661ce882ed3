"""The HTTP stand-ins send each write at once (TCP_NODELAY), as Go's servers do: kube-apiserver and Prometheus.

With Nagle's algorithm on, a body written after its headers waits for the client's delayed ACK: 40 ms a page of a
node list or an event of a watch, where the real servers take none. A cold instance's first lists, the in-flight
pods a watch brings and every figure of the burst bench would then measure the stand-in, not the extender.
"""

from __future__ import annotations

import http.client
import socket
import ssl

from testkit.certs import CertificateAuthority
from testkit.fake_apiserver import TOKEN, FakeApiServer
from testkit.loopback import Loopback, QuietHandler


def test_the_api_stand_in_sends_each_write_at_once(apiserver: FakeApiServer, test_ca: CertificateAuthority) -> None:
    context = ssl.create_default_context(cadata=test_ca.cert_pem.decode())
    port = int(apiserver.url.rsplit(":", 1)[1])
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.request("GET", "/api/v1/nodes?limit=1", headers={"Authorization": f"Bearer {TOKEN}"})
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200
        # The connection is kept alive: the server's end of it is still held, and its option can be read.
        with apiserver._lock:
            served = list(apiserver._connections)
        assert served, "the API stand-in holds no connection after answering a kept-alive one"
        assert all(end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for end in served)
    finally:
        connection.close()


def test_a_loopback_stand_in_sends_each_write_at_once() -> None:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            nodelay = self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            self.answer(200, b"%d" % nodelay, "text/plain")

    served = Loopback(Handler)
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        connection.request("GET", "/")
        answer = connection.getresponse()
        assert answer.status == 200
        assert answer.read() != b"0", "a loopback stand-in's connection holds writes back for ACKs (Nagle)"
    finally:
        connection.close()
        served.close()
