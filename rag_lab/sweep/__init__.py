"""Sweeps: the Hydra callback that turns a multirun into an MLflow parent with a child per trial
(``callback``), what the callback and the jobs share (``context``: the parent-run file, a job's
view of its sweep, the refusals), the parent run closed however a sweep ends (``parent``),
``winner.json`` and the one check of its job name (``winner``), and the leaderboard,
significance marks and plots over finished trials (``report``)."""
