"""Sans-I/O protocol state machines (ARCHITECTURE.md 2): they take decoded input plus ``now_ns`` and
return what to send, what to deliver and their next deadline.  No sockets, threads, clocks or global
randomness: time and a ``random.Random`` are passed in."""
