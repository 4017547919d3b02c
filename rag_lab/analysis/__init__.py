"""Verbs over finished runs: ``compare`` two runs query by query, ``gate`` a candidate against a
baseline, ``walk`` from one pipeline to another a stage at a time; ``runs`` reads a run back
(folder or MLflow) and ``stats`` holds the paired statistics they share."""
