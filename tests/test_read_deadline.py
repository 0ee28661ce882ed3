"""The read-deadline watchdog: alarms go off on time, disarmed ones never, and reads do not wake it one by one."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from extender import read_deadline
from tests.conftest import ROOT

# Scheduling on a loaded 2-core machine: how much later than its promise an alarm may be seen to go off.
MARGIN = 0.5


def _alarm(seconds: float) -> tuple[int, threading.Event, list[float]]:
    fired = threading.Event()
    when: list[float] = []

    def ring() -> None:
        when.append(time.monotonic())
        fired.set()

    return read_deadline.arm_action(ring, seconds), fired, when


def test_an_alarm_goes_off_at_its_deadline_and_says_so_when_disarmed():
    armed = time.monotonic()
    number, fired, when = _alarm(0.2)
    assert fired.wait(0.2 + read_deadline._SLACK + MARGIN)
    assert 0.2 <= when[0] - armed <= 0.2 + read_deadline._SLACK + MARGIN
    assert read_deadline.disarm(number)  # it went off first


def test_a_disarmed_alarm_never_goes_off():
    number, fired, _ = _alarm(0.1)
    assert not read_deadline.disarm(number)
    assert not fired.wait(0.1 + read_deadline._SLACK + MARGIN)


def test_an_earlier_deadline_armed_after_later_ones_wakes_the_watchdog():
    later = [_alarm(30.0)[0] for _ in range(3)]
    armed = time.monotonic()
    _, fired, when = _alarm(0.1)
    assert fired.wait(0.1 + read_deadline._SLACK + MARGIN)
    assert when[0] - armed <= 0.1 + read_deadline._SLACK + MARGIN
    assert not any(read_deadline.disarm(number) for number in later)


# In a fresh interpreter, whose watchdog starts with the counting condition in place: one read after another, as
# kube-scheduler sends requests, each armed for the scheduler's 5 s and disarmed when its body has arrived.
COUNT_WAKES = """
import json, threading, time
from extender import read_deadline

class Counting(threading.Condition):
    wakes = 0
    def wait(self, timeout=None):
        Counting.wakes += 1
        return super().wait(timeout)

read_deadline._changed = Counting()
read_deadline.disarm(read_deadline.arm_action(lambda: None, 5.0))
time.sleep(0.1)
before, began = Counting.wakes, time.monotonic()
for _ in range(2000):
    read_deadline.disarm(read_deadline.arm_action(lambda: None, 5.0))
    time.sleep(0.0002)
print(json.dumps([Counting.wakes - before, time.monotonic() - began]))
"""


def test_reads_one_after_another_do_not_wake_the_watchdog_each():
    command = [sys.executable, "-c", COUNT_WAKES]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr
    wakes, seconds = json.loads(finished.stdout)
    # The watchdog sleeps past every new deadline: the 2000 reads wake it not once (the first deadline is 5 s away).
    assert wakes <= 1 + seconds / read_deadline._SLACK, (wakes, seconds)
