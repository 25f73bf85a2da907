"""Spread a guest race's threads over the VM's CPUs.

On the x86-64 lane (tests/vm/run --x86 --smp N) a race test's threads must
run at the same time, not take turns: each one pins itself to its own CPU
with pin(i) as its first step, so thread i runs on CPU i mod N and the
scheduler cannot put two racing threads on one CPU, where only a
preemption would let the second one run. Python threads release the GIL
in every system call, so the kernel paths they race on overlap for real.
On one CPU (User-Mode Linux) pin() is a no-op and the race degrades to
what preemption and sleeps give.
"""

import os


def cpus():
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def pin(i):
    """Pin the calling thread to the i-th allowed CPU (mod their number);
    returns that CPU."""
    allowed = cpus()
    cpu = allowed[i % len(allowed)]
    # Linux applies sched_setaffinity(0) to the calling thread only.
    os.sched_setaffinity(0, {cpu})
    return cpu


def describe():
    n = len(cpus())
    return f"{n} CPU{'s' if n != 1 else ''}"
