"""Studies: many runs designed, judged and summed up together.

A sweep runs one scenario at rising load and names the highest load its SLOs
allow (with the knee of the latency curve); a controlled experiment varies one
factor and holds the rest; a plan sizes a deployment before any load is sent.
This room holds their policy (which trial to run next, when a trial is rerun,
what the findings say) and builds their documents (sweep.json,
experiment.json, the plan); the command line parses and calls, ``reports``
renders. Trials are run by a callable the caller passes in, so nothing here
starts a process or an engine.
"""
