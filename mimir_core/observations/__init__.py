"""Observations: the facts of past attempts an agent is shown, from the first repeat.

The ε-gate decides which *rules* (lessons) reach an agent. Facts need no gate: "this exact
command failed here 3 of 3 times, with this error, and this worked instead" is shown as soon as
it is true, labelled as observations, inside the one fence every host injects.

* :mod:`.tally`: how each action went on a set of tasks, by independent source;
* :mod:`.policy`: what is shown at task start, before a tool runs and after it failed, and in
  which words;
* :mod:`.attempt_digest`: the signed per-project digest hook processes read (with the spool's
  tail), kept current by every process that stores experiences;
* :mod:`.guard`: the hook side (stdlib only);
* :mod:`.from_store`: the in-process side (``Mimir.context()``, the digest's upkeep).

Everything but :mod:`.from_store` imports the standard library only.
"""
