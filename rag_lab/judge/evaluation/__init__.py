"""Measuring the judges (an application over the judge stages, like sentence-transformers'
``evaluation/``): logged answers read back (``logs``), human labels (``labels``), agreement and
prediction-powered estimates (``calibration``), judges against each other (``compare``) and the
meta-evaluation suites (``meta``)."""
