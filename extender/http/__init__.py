"""The HTTP boundary: everything between the bytes a client sends and the verb that decides.

The server, before the function sees a request:

- ``server`` and ``server_limits``: functions-framework's gunicorn, built
  with the limits a server anyone may reach needs (request line, headers,
  no path set by a header), whether run by ``functions-framework --target``
  or ``python -m extender serve``.
- ``head_deadline``: a request head (and a TLS handshake) arrives within a
  deadline, read on the event loop; only a complete head takes a serving
  thread.
- ``token_redaction``: no log line, the server's own included, holds the
  caller token in any form.

A request then goes through it in one direction (``handler.Extender.handle``):

- ``routing``: the path names a verb (and a profile), behind the caller token
  when one is configured.
- ``request_body``: content type, encoding and declared size are checked
  before a byte is read; the body is read within the scheduler's timeout and
  broken framing is a 400; an unread body is never read after the answer.
- ``body_budget``: bodies served at once never hold more memory than the
  budget, charged by the bytes received and by what decoding them may build
  (``extender.wire.decode_cost``).
- ``extender.read_deadline`` (below this package): one watchdog thread ends
  reads that stall, request bodies here and outbound answers alike.
- ``handler``: decode, hand to the verb, encode, log one decision entry;
  every failure is an answer, never a traceback.
- ``memory`` and ``after_answer``: large buffers go back to the system, the
  memory a costly decoding left behind once no request is in flight, and
  work the answer does not need runs after it is sent.

Calls this function makes the other way (the Kubernetes API, Prometheus) go
through ``extender.outbound``, a layer below the verbs and plugins that make
them: this package sits above everything a request reaches.
"""
