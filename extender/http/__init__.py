"""The HTTP boundary: everything between the bytes the server hands over and the verb that decides.

A request goes through it in one direction (``handler.Extender.handle``):

- ``routing``: the path names a verb (and a profile), behind the caller token
  when one is configured; a token never reaches a log line.
- ``request_body``: content type, encoding and declared size are checked
  before a byte is read; the body is read within the scheduler's timeout and
  broken framing is a 400; an unread body is never read after the answer.
- ``body_budget``: bodies served at once never hold more memory than the
  budget, charged by the bytes received.
- ``read_deadline``: one watchdog thread ends reads that stall (request
  bodies, Kubernetes API answers).
- ``handler``: decode, hand to the verb, encode, log one decision entry;
  every failure is an answer, never a traceback.
- ``memory`` and ``after_answer``: large buffers go back to the system, and
  work the answer does not need runs after it is sent.

And the other way, ``outbound``: calls this function makes (the Kubernetes
API), each bounded in total by one deadline and in the bytes it keeps.
"""
